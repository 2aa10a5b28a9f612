"""Legacy-dialect APIs that the public corpus uses, expressed in existing IR ops.

Contract:
- `loop_reduce(x, op, loop_indices, *, dtype=None, mask=None)` (legacy nl.loop_reduce: "the
  destination tile is also the rhs input to op"): assigned into a view, `dst[...] =
  nl.loop_reduce(x, op=np.add, loop_indices=[i])` is `dst = op(x, dst)` on the Vector Engine, cast to
  `dtype` (default: x's dtype), masked-off positions unwritten. loop_indices only tells the compiler
  which loops it may optimise across; it changes nothing here. The result has no value of its own:
  using it other than by assigning it into a tile is an error naming the line.
"""
from __future__ import annotations

from .. import errors
from ..loc import capture_loc


class LoopReduce:
    """A pending loop_reduce: applied when assigned into its destination (ops_memory.assign)."""

    def __init__(self, x, op: str, dtype, mask, loc):
        self.x, self.op, self.dtype, self.mask, self.loc = x, op, dtype, mask, loc

    def apply_into(self, view) -> None:
        from .memory import resolve_dtype
        from .ops_math import elementwise
        want = resolve_dtype(self.dtype, self.loc) if self.dtype is not None else self.x.dtype_name
        if want != view.dtype_name:
            raise errors.make("dtype", f"nl.loop_reduce(dtype={want}) is assigned into '{view.name}' of dtype "
                              f"{view.dtype_name}: the destination is also the reduction's input",
                              loc=self.loc, hint="give the destination tile the reduction's dtype")
        elementwise(self.op, self.x, view, None, self.mask, out=view, loc=self.loc)

    def __getattr__(self, name):
        raise errors.make("unsupported", "the result of nl.loop_reduce has no value of its own: assign it into "
                          "its destination (dst[...] = nl.loop_reduce(x, op=..., loop_indices=[i]))",
                          loc=self.__dict__.get("loc"))


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None) -> LoopReduce:
    from .opnames import alu_name
    from .tile import Tile
    loc = capture_loc(2)
    if not isinstance(x, Tile):
        raise errors.make("argument", f"nl.loop_reduce needs a tile, got {type(x).__name__}", loc=loc)
    return LoopReduce(x, alu_name(op, loc), dtype, mask, loc)
