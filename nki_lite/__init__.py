"""nki_lite: write, run, test and profile AWS NKI kernels on an ordinary CPU.

    import nki_lite as nki
    import nki_lite.language as nl
    import nki_lite.isa as nisa

    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) + nl.load(b))
        return out
"""
import logging as _logging

# The library's logger: silent unless the application configures logging (NKI_LITE_LOG_LEVEL sets a level).
_logging.getLogger("nki_lite").addHandler(_logging.NullHandler())

from . import config as _config  # noqa: E402

if _config.get("NKI_LITE_LOG_LEVEL"):
    _logging.getLogger("nki_lite").setLevel(_config.get("NKI_LITE_LOG_LEVEL"))

from . import errors, isa, language, typing  # noqa: E402,F401
from .errors import NkiLiteError  # noqa: E402,F401
from .lang.purity import KernelPurityWarning  # noqa: E402,F401
from .lang.tile import TilePrintWarning  # noqa: E402,F401
from .runtime import interpret_compute, interpret_data, interpret_gather, interpret_reduce  # noqa: E402,F401  (register the interpreter rules)
from .runtime import interpret_partition, interpret_rng, interpret_select  # noqa: E402,F401  (issue #13 batch 1)
from .runtime import interpret_indirect  # noqa: E402,F401  (indirect DMA, dynamic copies)
from .runtime.kernel import Kernel, jit, simulate_kernel  # noqa: E402,F401

from . import compiler  # noqa: E402,F401
from .runtime.kernel import baremetal  # noqa: E402,F401
from .runtime.kernel import trace_decorator as trace  # noqa: E402,F401  (legacy nki.trace)

kernel = jit
from .version import __version__  # noqa: E402,F401

from .lower import cost as _cost  # noqa: E402,F401  (registers the engine model's "cost" rules)
from .runtime.profile import benchmark, estimate, profile  # noqa: E402,F401
from .runtime.compare import compare_targets  # noqa: E402,F401
from .tuning import Autotuned, autotune  # noqa: E402,F401

# llvmlite (~25 ms of start-up) is not imported here: it loads with the first JIT compile or disk-cache
# load (lower/llvm/target.py), so `import nki_lite` stays cheap for interpreter-only and tooling use.
