"""Interpreter rules for partition_reduce and sequence_bounds (definitions in lang/isa_partition.py).

Numerics: partition_reduce reduces each free element's column over the partitions: integer data
and result exactly in int64 (wrapping to the output width), otherwise in fp32 in numerics.alu's
reduction order (partition p is element p), then one rounding to the output dtype; masked-off
elements are the identity and a column the mask excludes entirely is not written.
sequence_bounds compares ids exactly (fp32 or int32) and writes start / end indices in the
output dtype. nonzero_with_count: per row, the positions p of src[row, p] != 0 (NaN is nonzero, -0.0 is
not) plus index_offset, then padding_val, then the count, as int32 (offset + position wraps as int32 adds).
"""
from __future__ import annotations

import numpy as np

from ..core.ops import rule
from ..numerics import alu
from ..numerics.convert import round_to
from .interpret_common import F32, finish, is_int, value

INT_IDENTITY = {"add": 0, "maximum": np.iinfo(np.int64).min, "bitwise_or": 0, "bitwise_and": -1}


def reduce_columns(op: str, x: np.ndarray, as_int: bool) -> np.ndarray:
    """Reduce a [P, F] array over axis 0."""
    cols = np.ascontiguousarray(x.T)
    if not as_int:
        return alu.reduce_fp32(op, cols.astype(F32))
    if op == "bitwise_or":
        return np.bitwise_or.reduce(cols, axis=-1)
    if op == "bitwise_and":
        return np.bitwise_and.reduce(cols, axis=-1)
    return alu.reduce_int(op, cols)


@rule("interpret", "partition_reduce")
def _partition_reduce(m, instr, env):
    dst, src = instr.out, instr.ins[0]
    op = instr.attr("op")
    as_int = is_int(m, (src,), dst)
    mask = m.eval_mask(instr, env, src.shape)
    x = value(m, src, env, instr, as_int, mask)
    if mask is not None:
        x = np.where(mask, x, INT_IDENTITY[op] if as_int else F32(alu.REDUCE_IDENTITY[op]))
    r = reduce_columns(op, x.reshape(src.shape[0], -1), as_int).reshape(dst.shape)
    wmask = None if mask is None else np.broadcast_to(mask, src.shape).any(axis=0, keepdims=True)
    m.write(dst, env, round_to(r, m.dtype_of(dst)) if as_int else finish(r, m.dtype_of(dst)), instr, wmask)


def bounds(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) per element of a 1-D id array (lang/isa_partition.py's definition)."""
    n = ids.shape[0]
    start = np.empty(n, np.int64)
    end = np.empty(n, np.int64)
    for i in range(n):
        start[i] = n if ids[i] == 0 else (start[i - 1] if i > 0 and ids[i] == ids[i - 1] else i)
    for i in range(n - 1, -1, -1):
        end[i] = -1 if ids[i] == 0 else (end[i + 1] if i < n - 1 and ids[i] == ids[i + 1] else i + 1)
    return start, end


@rule("interpret", "sequence_bounds")
def _sequence_bounds(m, instr, env):
    dst, src = instr.out, instr.ins[0]
    ids = m.read(src, env, instr).reshape(-1)
    start, end = bounds(ids)
    out = np.stack([start, end]).reshape(dst.shape)
    m.write(dst, env, round_to(out, m.dtype_of(dst)), instr, None)


def nonzero_rows(x: np.ndarray, offset: int, pad: int) -> np.ndarray:
    """[Q, T] -> [Q, T + 1] int32: each row's nonzero positions + offset, padding, the count."""
    q, t = x.shape
    out = np.full((q, t + 1), pad, np.int64)
    for r in range(q):
        pos = np.flatnonzero(x[r] != 0)
        out[r, :pos.size] = pos + offset
        out[r, t] = pos.size
    return ((out + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)      # int32 wrap-around


@rule("interpret", "nonzero_with_count")
def _nonzero_with_count(m, instr, env):
    dst, src = instr.out, instr.ins[0]
    x = m.read(src, env, instr).reshape(src.shape)
    out = nonzero_rows(x, instr.attr("index_offset"), instr.attr("padding_val"))
    m.write(dst, env, out.reshape(dst.shape), instr, None)

