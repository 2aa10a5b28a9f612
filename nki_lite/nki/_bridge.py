"""The few nki_lite internals the `nki` dialect layer needs, imported in one place.

Contract: everything else in nki_lite/nki/ uses nki_lite's public namespaces (nki_lite, .language,
.isa, .typing, .errors, .loc) plus the names re-exported here, so a move of nki_lite's internals
(issue #11) touches this file only.
"""
from ..lang.tile import Tile, drop_axes  # noqa: F401  (tensors and tiles seen inside a kernel; size-1 axes dropped)
from ..lang.trace import fn_loc  # noqa: F401  (a kernel function's def line)
from ..runtime.kernel import Kernel, TARGETS  # noqa: F401  (the launch machinery)


def is_tensor(x) -> bool:
    """True for a tensor or tile of the kernel being traced (HBM, SBUF or PSUM)."""
    return isinstance(x, Tile)


def is_indirect(x) -> bool:
    """True for a view indexed at run time (`.ap(scalar_offset=tile)`, a tile-valued subscript)."""
    from ..lang.ops_indirect import IndirectView
    return isinstance(x, IndirectView)


def is_whole_hbm(x) -> bool:
    """True for a whole HBM tensor (not a view of part of it): what Tile.reshape accepts."""
    from ..core import ir
    return isinstance(x, Tile) and not is_indirect(x) and x.space == ir.Space.HBM and \
        x.access == ir.Access.full(x.buf)
