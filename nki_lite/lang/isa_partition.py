"""nisa instructions across partitions or along segments (GpSimd Engine): tensor_partition_reduce and
sequence_bounds.

Contract: each call checks its operands against NKI's documented constraints and emits one IR
instruction writing a fresh tile.
- tensor_partition_reduce(op, data): [1, free...] = op over the partition axis; op is add, max,
  bitwise_or or bitwise_and. Arithmetic in fp32 in numerics.alu's reduction order (partition p is
  element p of the reduced row); bitwise ops on integer tiles exactly.
- sequence_bounds(segment_ids): [1, 2, N] = for each element of a [1, N] tile its segment's
  [start, end) (consecutive equal ids form a segment); id 0 is padding: start N, end -1.
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
