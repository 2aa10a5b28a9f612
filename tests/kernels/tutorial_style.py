"""Tutorial-style kernels used by the tests: they live in nki_lite.stdlib (re-exported here)."""
from nki_lite.stdlib.elementwise import spmd_add  # noqa: F401
from nki_lite.stdlib.matmul_kernels import nl_matmul, tiled_matmul  # noqa: F401
from nki_lite.stdlib.norm_kernels import rmsnorm_tutorial as rmsnorm  # noqa: F401
from nki_lite.stdlib.reference import rmsnorm_ref, row_softmax_ref  # noqa: F401
from nki_lite.stdlib.softmax_kernels import row_softmax  # noqa: F401
