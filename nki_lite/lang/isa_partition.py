"""nisa instructions across partitions or along segments (GpSimd Engine): tensor_partition_reduce and
sequence_bounds.

Contract: each call checks its operands against NKI's documented constraints and emits one IR
instruction writing a fresh tile.
- tensor_partition_reduce(op, data): [1, free...] = op over the partition axis; op is add, max,
  bitwise_or or bitwise_and. Arithmetic in fp32 in numerics.alu's reduction order (partition p is
  element p of the reduced row); bitwise ops on integer tiles exactly.
- sequence_bounds(segment_ids): [1, 2, N] = for each element of a [1, N] tile its segment's
  [start, end) (consecutive equal ids form a segment); id 0 is padding: start N, end -1.
- emit_nonzero_with_count(dst, src, index_offset, padding_val) (the current dialect's
  nisa.nonzero_with_count, nki/isa_wrappers.py): per row of a [Q, T] float32 / int32 src, the
  positions of its nonzero elements (x != 0: NaN counts, -0.0 does not) plus index_offset, then
  padding_val up to T, then the count, into the [Q, T + 1] int32 dst; written straight into dst.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import dtypes as D
from ..core import ir
from ..numerics import alu
from .api import isa
from .masks import to_mask
from .memory import resolve_dtype
from .opnames import alu_name
from .ops_math import result_access, tile_operand
from .tile import Tile
from .tracer import attrs, current

PARTITION_REDUCE_OPS = ("add", "maximum", "bitwise_or", "bitwise_and")


@isa("nisa.tensor_partition_reduce")
def tensor_partition_reduce(op, data, *, mask=None, dtype=None):
    """nisa.tensor_partition_reduce: reduce across the partitions of `data` into one partition."""
    tr = current()
    loc = capture_loc(2)
    name = alu_name(op, loc)
    if name not in PARTITION_REDUCE_OPS:
        raise errors.make("isa_operand", f"nisa.tensor_partition_reduce op={name}: expected add, max, bitwise_or or "
                          "bitwise_and", loc=loc)
    t = tile_operand(data, "data", "tensor_partition_reduce", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    if name in alu.INT_ONLY and not (D.INFO[t.dtype_name].is_int and D.INFO[dt].is_int):
        raise errors.make("dtype", f"nisa.tensor_partition_reduce {name} needs integer data and result; got "
                          f"{t.dtype_name} -> {dt}", loc=loc)
    dst = result_access((1,) + tuple(t.shape[1:]), dt, loc)
    tr.emit(ir.Instr("partition_reduce", (dst,), (t.access,), attrs(op=name, engine="gpsimd"),
                     to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.sequence_bounds")
def sequence_bounds(*, segment_ids, dtype=None):
    """nisa.sequence_bounds: each element's segment [start, end) along the free axis of a [1, N] tile."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(segment_ids, "segment_ids", "sequence_bounds", loc)
    if t.shape[0] != 1:
        raise errors.make("shape_mismatch", f"nisa.sequence_bounds segment_ids must have 1 partition; got shape "
                          f"{t.shape}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    for what, d in (("segment_ids", t.dtype_name), ("dtype", dt)):
        if d not in ("float32", "int32"):
            raise errors.make("dtype", f"nisa.sequence_bounds {what} must be float32 or int32; got {d}", loc=loc)
    n = int(np.prod(t.shape[1:]))
    dst = result_access((1, 2, n), dt, loc)
    tr.emit(ir.Instr("sequence_bounds", (dst,), (t.access,), attrs(engine="gpsimd"), None, loc))
    return Tile(tr, dst, dt)


def emit_nonzero_with_count(dst: Tile, src: Tile, index_offset: int, padding_val: int) -> None:
    tr = current()
    loc = capture_loc(3)
    for what, t, ok in (("src", src, ("float32", "int32")), ("dst", dst, ("int32",))):
        t = tile_operand(t, what, "nonzero_with_count", loc)
        if t.space != ir.Space.SBUF or t.dtype_name not in ok:
            raise errors.make("isa_operand", f"nisa.nonzero_with_count {what} must be an SBUF {' or '.join(ok)} "
                              f"tensor; got {t.dtype_name} in {t.space.value}", loc=loc)
    if len(src.shape) != 2 or tuple(dst.shape) != (src.shape[0], src.shape[1] + 1):
        raise errors.make("shape_mismatch", f"nisa.nonzero_with_count: dst must be [P, T + 1] for src [P, T]; got "
                          f"dst {tuple(dst.shape)}, src {tuple(src.shape)}", loc=loc,
                          hint="the last element of each row is the count")
    for what, v in (("index_offset", index_offset), ("padding_val", padding_val)):
        if not isinstance(v, (int, np.integer)) or not -2 ** 31 <= int(v) < 2 ** 31:
            raise errors.make("isa_operand", f"nisa.nonzero_with_count {what} must be an int32 constant; got {v!r}",
                              loc=loc)
    tr.emit(ir.Instr("nonzero_with_count", (dst.access,), (src.access,),
                     attrs(engine="gpsimd", index_offset=int(index_offset), padding_val=int(padding_val)), None, loc))

