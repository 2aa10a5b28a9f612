"""Legacy-dialect APIs that the public corpus uses, expressed in existing IR ops.

Contract:
- `loop_reduce(x, op, loop_indices, *, dtype=None, mask=None)` (legacy nl.loop_reduce: "the
  destination tile is also the rhs input to op"): assigned into a view, `dst[...] =
  nl.loop_reduce(x, op=np.add, loop_indices=[i])` is `dst = op(x, dst)` on the Vector Engine, cast to
  `dtype` (default: x's dtype), masked-off positions unwritten. loop_indices only tells the compiler
  which loops it may optimise across; it changes nothing here. The result has no value of its own:
  using it other than by assigning it into a tile is an error naming the line.
- `dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None)` (legacy
  nisa.dma_copy: "both src and dst can be in HBM or SBUF"): one DMA of src into dst (the IR's
  dma_copy, as nl.load/nl.store), shapes equal, masked-off elements unwritten. oob_mode concerns
  indirect (tile-valued) indices; with affine indices an out-of-bounds access is a verification
  error whatever the mode, so error/skip are accepted. dst_rmw_op (accumulating DMA) is not built:
  NL-E904 names the line. dge_mode is a descriptor-generation hint.
"""
from __future__ import annotations

from .. import errors
from ..loc import capture_loc
from .api import api, isa


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


@api("nl.loop_reduce")
def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None) -> LoopReduce:
    from .opnames import alu_name
    from .tile import Tile
    loc = capture_loc(2)
    if not isinstance(x, Tile):
        raise errors.make("argument", f"nl.loop_reduce needs a tile, got {type(x).__name__}", loc=loc)
    return LoopReduce(x, alu_name(op, loc), dtype, mask, loc)


class oob_mode:  # noqa: N801 - NKI's spelling
    """nisa.oob_mode: what an indirect DMA does with an out-of-bounds index."""
    error = "error"
    skip = "skip"


class dge_mode:  # noqa: N801
    """nisa.dge_mode: descriptor generation (a performance hint here)."""
    unknown, none, swdge, hwdge = "unknown", "none", "swdge", "hwdge"


@isa("nisa.dma_copy")
def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None) -> None:
    from ..core import ir
    from .masks import to_mask
    from .tile import Tile, broadcast_access
    from .tracer import attrs, current
    loc = capture_loc(2)
    for what, t in (("dst", dst), ("src", src)):
        if not isinstance(t, Tile):
            raise errors.make("argument", f"nisa.dma_copy {what}= must be a tensor or tile, got {type(t).__name__}",
                              loc=loc)
    if dst_rmw_op is not None:
        raise errors.make("unsupported", "nisa.dma_copy(dst_rmw_op=...) (an accumulating DMA) is not built yet",
                          loc=loc, hint="load dst, combine with nl.add / nisa.tensor_tensor, store it back")
    if tuple(dst.shape) != tuple(src.shape):
        raise errors.make("shape_mismatch", f"nisa.dma_copy: dst shape {tuple(dst.shape)} differs from src shape "
                          f"{tuple(src.shape)}", loc=loc)
    acc = broadcast_access(src.access, dst.shape, "src")
    current().emit(ir.Instr("dma_copy", (dst.access,), (acc,), attrs(engine="dma"), to_mask(mask, dst.shape, loc),
                            loc))
