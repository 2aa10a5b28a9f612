"""mask= arguments: from user predicates to IR masks over an instruction's iteration space.

Contract: `to_mask(pred, shape, loc)` accepts None/True (no mask), False (nothing executes) or an
index comparison built from nl.arange/mgrid, loop variables and program ids; axis k of the
predicate's layout is axis k of the instruction's iteration space `shape`.
"""
from __future__ import annotations

from .. import errors
from ..core.affine import Affine, Cmp, Mask
from .index import Predicate


def to_mask(pred, shape: tuple[int, ...], loc) -> Mask | None:
    if pred is None or pred is True:
        return None
    if pred is False:
        return Mask((Cmp(Affine(1), "<"),))
    if not isinstance(pred, Predicate):
        raise errors.make("bad_mask", f"mask= must be a comparison of index expressions, got {type(pred).__name__}",
                          loc=loc)
    if pred.ndim > len(shape):
        raise errors.make("bad_mask", f"mask of rank {pred.ndim} for an instruction over a tile of shape {shape}",
                          loc=loc)
    for ax, n in pred.extents.items():
        if shape[ax] != n:
            raise errors.make("bad_mask", f"mask axis {ax} has extent {n} but the instruction's tile has {shape[ax]}",
                              loc=loc, hint="build the mask from the same nl.arange expressions as the index")
    return pred.mask
