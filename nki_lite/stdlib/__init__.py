"""nki_lite.stdlib: production-style kernels written in the DSL itself, callable on numpy arrays.

    from nki_lite.stdlib import matmul, matmul_fp8, quantize_fp8, softmax, attention, rmsnorm, layernorm

Every entry point takes arrays of any size (ragged tails masked inside the kernels, leading batch
axes where they make sense), runs an @nki.jit kernel on nki_lite's default backend, and has
`fn.estimate(*args, target="trn2")` for the engine model's estimate of the same call. Layout, tiling
and numerics are in each function's docstring and in docs/stdlib.md. The tutorial-sized kernels
(`elementwise.spmd_add`, `matmul.tiled_matmul`, `softmax.row_softmax`, `norms.rmsnorm_tutorial`)
stay as examples.
"""
from .attention_kernels import attention  # noqa: F401
from .matmul_kernels import matmul, matmul_fp8, quantize_fp8  # noqa: F401
from .norm_kernels import layernorm, rmsnorm  # noqa: F401
from .softmax_kernels import softmax  # noqa: F401

__all__ = ["attention", "layernorm", "matmul", "matmul_fp8", "quantize_fp8", "rmsnorm", "softmax"]
