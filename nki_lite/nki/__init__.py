"""The current `nki` dialect (NKI 0.3+, `import nki`) as a layer over nki_lite's public API.

    import nki_lite.nki as nki                 # or: nki_lite.compat.install(dialect="nki"); import nki
    import nki_lite.nki.language as nl
    import nki_lite.nki.isa as nisa

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        ta, tb = nl.ndarray(a.shape, a.dtype), nl.ndarray(b.shape, b.dtype)
        nisa.dma_copy(ta, a); nisa.dma_copy(tb, b)
        nisa.tensor_tensor(ta, ta, tb, nl.add)
        nisa.dma_copy(out, ta)
        return out

Contract: `jit`, `simulate`, `Kernel` (launch.py), the submodules `language`, `isa`, `typing`,
`simulator`, `collectives`; beyond the reference, `dtype` (annotations) and `compiler` (nki_lite.compiler),
which the NKI Library uses. Kernels trace into nki_lite's one IR; nothing here patches nki_lite.
What is built is docs/compat_nki.md (generated: `python -m nki_lite.nki.compat_table`); every
reference name that is not built is importable and raises NL-E913 when used.
"""
from numpy import dtype  # noqa: F401  (`nki.dtype` in the NKI Library's annotations: the dtypes are numpy's)

from .. import compiler  # noqa: F401  (nki.compiler.skip_middle_end_transformations / no_reorder: as legacy)
from . import collectives, isa, language, simulator, typing  # noqa: F401
from .launch import Kernel, jit, simulate  # noqa: F401
from .surface import fill as _fill

NOT_BUILT = _fill(globals(), "nki")
