"""Interpreter rules for range_select, select_reduce and match_replace8 (definitions in
lang/isa_select.py and docs/numerics.md).

Numerics: selects compute in fp32 (inputs widened exactly), canonicalise NaN and round once to the
output dtype; their optional second output is the max of the fp32 results over the free axes in
numerics.alu's order (masked-off elements are the identity), written for the partitions the mask
selects. match_replace8 compares fp32 values (vals against the not-yet-replaced data), replaces
with imm in fp32, and rounds once to the output dtype.
"""
from __future__ import annotations

import numpy as np

from ..core import ir
from ..core.ops import rule
from ..numerics.convert import round_to
from .interpret_common import F32, finish, rows_of, write_reduction

COMPARE = {"equal": np.equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
           "greater_equal": np.greater_equal}


def _f32(m, o, env, instr, mask, shape) -> np.ndarray:
    if isinstance(o, ir.Imm):
        return np.full(shape, F32(o.value), dtype=F32)
    return np.broadcast_to(m.read(o, env, instr, mask).astype(F32), shape)


def free_index(shape) -> np.ndarray:
    """Each element's row-major index among its partition's elements, broadcast over partitions."""
    n = int(np.prod(shape[1:]))
    return np.broadcast_to(np.arange(n, dtype=np.int64).reshape((1,) + tuple(shape[1:])), shape)


@rule("interpret", "range_select")
def _range_select(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    x, b0, b1 = (_f32(m, o, env, instr, mask, dst.shape) for o in instr.ins)
    i = (free_index(dst.shape) + int(instr.attr("range_start"))).astype(F32)
    keep = COMPARE[instr.attr("comp_op0")](i, b0) & COMPARE[instr.attr("comp_op1")](i, b1)
    y = np.where(keep, x, F32(instr.attr("on_false"))).astype(F32)
    m.write(dst, env, finish(y, m.dtype_of(dst)), instr, mask)
    write_reduction(m, instr, env, y, mask)


@rule("interpret", "select_reduce")
def _select_reduce(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    pred, t, f = instr.ins
    p = m.read(pred, env, instr, mask).astype(np.int64) != 0
    if instr.attr("reverse_pred"):
        p = ~p
    y = np.where(p, _f32(m, t, env, instr, mask, dst.shape), _f32(m, f, env, instr, mask, dst.shape)).astype(F32)
    m.write(dst, env, finish(y, m.dtype_of(dst)), instr, mask)
    write_reduction(m, instr, env, y, mask)


@rule("interpret", "match_replace8")
def _match_replace8(m, instr, env):
    dst = instr.out
    data, vals = instr.ins
    mask = m.eval_mask(instr, env, data.shape)
    P = data.shape[0]
    work = m.read(data, env, instr, mask).astype(F32).reshape(P, -1).copy()
    live = np.ones(work.shape, bool) if mask is None else np.broadcast_to(mask, data.shape).reshape(P, -1)
    v = m.read(vals, env, instr).astype(F32).reshape(P, 8)
    idx = np.zeros((P, 8), dtype=np.int64)
    rows = np.arange(P)
    for j in range(8):
        eq = (work == v[:, j:j + 1]) & live
        found = eq.any(axis=1)
        first = eq.argmax(axis=1)
        work[rows[found], first[found]] = F32(instr.attr("imm"))
        idx[found, j] = first[found]
    m.write(dst, env, finish(work.reshape(data.shape), m.dtype_of(dst)), instr, mask)
    if len(instr.outs) > 1:
        out_idx = instr.outs[1]
        m.write(out_idx, env, round_to(idx.reshape(out_idx.shape), m.dtype_of(out_idx)), instr,
                rows_of(mask, out_idx.shape))
