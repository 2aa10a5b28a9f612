"""Interpreter rules for the completeness ops (scan, selects, statistics, top-8, printing).

Numerics follow runtime/interpret_rules.py: fp32 steps, NaN canonicalisation, one rounding to the
output dtype. Definitions specific to these ops (docs/numerics.md):
- tensor_tensor_scan: strictly sequential along the free axis, each op rounded to fp32; the carry
  is the fp32 value (not the rounded output); masked-off positions pass the carry through.
- bn_stats: for the even and the odd free elements separately: count; mean = sum / count (sum in
  numerics.alu's reduction order); var*count = sum((x - mean)^2) in the same order.
- bn_aggr: Chan's pairwise combination over the triples in order, in fp32:
  n = na + nb; d = mb - ma; ma += d * (nb / n); M2a += M2b + d*d*(na*nb/n); var = M2 / n.
- max8: the 8 largest fp32 values, descending (NaN sorts first); find_index8: index of the first
  element equal (fp32 compare) to each value, or 0xFFFFFFFF if absent.
- Reductions attached to activation / tensor_scalar reduce the fp32 results (before the output
  rounding) in numerics.alu's order.
- Per-partition outputs (bn_stats, bn_aggr, max8, find_index8, reduce_res) are written only for
  the partitions where the instruction's mask selects at least one element (like tensor_reduce).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics import alu
from ..numerics.convert import round_to
from .interpret_rules import F32, _alu, _finish, _is_int, _value
from .interpreter import Machine


def _rows_of(mask, shape) -> np.ndarray | None:
    """Write mask of a per-partition output: a partition is written iff the instruction's mask
    selects at least one of its elements (as tensor_reduce does); partitions the mask excludes
    keep their old contents. `shape` is the output's shape."""
    if mask is None:
        return None
    rows = np.asarray(mask).reshape(mask.shape[0], -1).any(axis=1)
    return np.broadcast_to(rows.reshape((-1,) + (1,) * (len(shape) - 1)), shape)


def write_reduction(m: Machine, instr: ir.Instr, env, y: np.ndarray, mask) -> None:
    """Second output of activation / tensor_scalar: reduce_op of the fp32 result over free axes."""
    if len(instr.outs) < 2:
        return
    op = instr.attr("reduce_op")
    racc = instr.outs[1]
    y = np.asarray(y, dtype=F32)
    if mask is not None:
        y = np.where(mask, y, F32(alu.REDUCE_IDENTITY[op]))
    flat = y.reshape(y.shape[0], -1)
    r = alu.reduce_fp32(op, flat).reshape(racc.shape)
    m.write(racc, env, _finish(r, m.dtype_of(racc)), instr,
            None if mask is None else _rows_of(np.broadcast_to(mask, y.shape), racc.shape))


@rule("interpret", "scalar_tensor_tensor")
def _stt(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    as_int = _is_int(m, instr.ins, dst) and instr.attr("op0") in alu.INT and instr.attr("op1") in alu.INT
    x = _value(m, instr.ins[0], env, instr, as_int, mask)
    s0 = _value(m, instr.ins[1], env, instr, as_int, mask)
    t1 = _value(m, instr.ins[2], env, instr, as_int, mask)
    width = D.INFO[m.dtype_of(dst)].bits
    x = _alu(instr.attr("op0"), x, s0, as_int, bool(instr.attr("reverse0")), width=width)
    x = _alu(instr.attr("op1"), x, t1, as_int, bool(instr.attr("reverse1")), width=width)
    m.write(dst, env, _finish(x, m.dtype_of(dst)), instr, mask)


@rule("interpret", "tensor_tensor_scan")
def _scan(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    a = _value(m, instr.ins[0], env, instr, False, mask)
    b = _value(m, instr.ins[1], env, instr, False, mask)
    init = instr.ins[2]
    prev = (np.full((dst.shape[0],), F32(init.value), dtype=F32) if isinstance(init, ir.Imm)
            else m.read(init, env, instr).astype(F32).reshape(-1))
    out = np.empty(dst.shape, dtype=F32)
    op0, op1 = instr.attr("op0"), instr.attr("op1")
    r0, r1 = bool(instr.attr("reverse0")), bool(instr.attr("reverse1"))
    live = np.ones(dst.shape, dtype=bool) if mask is None else np.broadcast_to(mask, dst.shape)
    for j in range(dst.shape[1]):
        nxt = _alu(op1, _alu(op0, a[:, j], prev, False, r0), b[:, j], False, r1)
        prev = np.where(live[:, j], nxt, prev)        # masked-off positions pass the carry through
        out[:, j] = prev
    m.write(dst, env, _finish(out, m.dtype_of(dst)), instr, mask)


@rule("interpret", "affine_select")
def _affine_select(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    x = _value(m, instr.ins[0], env, instr, False, mask)
    pred = instr.attr("pred").evaluate(env, dst.shape)
    y = np.where(pred, x, F32(instr.ins[1].value))
    m.write(dst, env, _finish(y.astype(F32), m.dtype_of(dst)), instr, mask)


@rule("interpret", "copy_predicated")
def _copy_predicated(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    src, pred_acc, old_acc = instr.ins
    pred = m.read(pred_acc, env, instr, mask).astype(F32) != 0
    if instr.attr("reverse_pred"):
        pred = ~pred
    old = m.read(old_acc, env, instr, mask)
    if isinstance(src, ir.Imm):
        new = round_to(np.full(dst.shape, src.value, dtype=np.int64 if isinstance(src.value, int) else F32),
                       m.dtype_of(dst))
    else:
        new = m.read(src, env, instr, mask)
        if m.dtype_of(src) != m.dtype_of(dst):
            new = round_to(new.astype(F32), m.dtype_of(dst))
    m.write(dst, env, np.where(pred, new, old), instr, mask)


def _masked_free(m, instr, env, acc) -> tuple[np.ndarray, np.ndarray | None]:
    mask = m.eval_mask(instr, env, acc.shape)
    x = m.read(acc, env, instr, mask).astype(F32)
    x = x.reshape(x.shape[0], -1)
    if mask is not None:
        mask = np.broadcast_to(mask, acc.shape).reshape(acc.shape[0], -1)
    return x, mask


def _group_stats(x: np.ndarray, valid: np.ndarray):
    """(count, mean, M2) per row over the valid elements, fp32, in alu's reduction order."""
    count = valid.sum(axis=1).astype(F32)
    s = alu.reduce_fp32("add", np.where(valid, x, F32(-0.0)))
    with np.errstate(all="ignore"):
        mean = np.where(count > 0, (s / count).astype(F32), F32(0))
        d = (x - mean[:, None]).astype(F32)
        m2 = alu.reduce_fp32("add", np.where(valid, (d * d).astype(F32), F32(-0.0)))
    return count, mean.astype(F32), np.where(count > 0, m2, F32(0)).astype(F32)


@rule("interpret", "bn_stats")
def _bn_stats(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0])
    valid = np.ones(x.shape, dtype=bool) if mask is None else mask
    cols = np.arange(x.shape[1])
    out = []
    for parity in (0, 1):
        sel = cols % 2 == parity
        out.extend(_group_stats(x[:, sel], valid[:, sel]))
    m.write(dst, env, _finish(np.stack(out, axis=1).astype(F32), m.dtype_of(dst)), instr,
            _rows_of(mask, dst.shape))


@rule("interpret", "bn_aggr")
def _bn_aggr(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0])
    if mask is not None:
        x = np.where(mask, x, F32(0))                  # masked-off elements read as 0 (count 0: skipped)
    P = x.shape[0]
    n_a = np.zeros(P, F32)
    mean_a = np.zeros(P, F32)
    m2_a = np.zeros(P, F32)
    with np.errstate(all="ignore"):
        for k in range(0, x.shape[1], 3):
            n_b, mean_b, m2_b = x[:, k], x[:, k + 1], x[:, k + 2]
            n = (n_a + n_b).astype(F32)
            d = (mean_b - mean_a).astype(F32)
            take = n_b > 0
            frac = np.where(take, (n_b / n).astype(F32), F32(0))
            w = np.where(take, ((n_a * n_b).astype(F32) / n).astype(F32), F32(0))
            mean_a = np.where(take, (mean_a + (d * frac).astype(F32)).astype(F32), mean_a)
            m2_a = np.where(take, ((m2_a + m2_b).astype(F32) + ((d * d).astype(F32) * w).astype(F32)).astype(F32),
                            m2_a)
            n_a = np.where(take, n, n_a)
        var = np.where(n_a > 0, (m2_a / n_a).astype(F32), F32("nan"))
    m.write(dst, env, _finish(np.stack([mean_a, var], axis=1).astype(F32), m.dtype_of(dst)), instr,
            _rows_of(mask, dst.shape))


@rule("interpret", "max8")
def _max8(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0])
    if mask is not None:
        x = np.where(mask, x, F32(-np.inf))
    key = np.where(np.isnan(x), F32(np.inf), x)          # NaN sorts as the largest
    order = np.argsort(-key, axis=1, kind="stable")[:, :8]
    top = np.take_along_axis(x, order, axis=1)
    m.write(dst, env, _finish(top.astype(F32), m.dtype_of(dst)), instr, _rows_of(mask, dst.shape))


@rule("interpret", "find_index8")
def _find_index8(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0])
    vals = m.read(instr.ins[1], env, instr).astype(F32).reshape(x.shape[0], 8)
    eq = x[:, None, :] == vals[:, :, None]
    if mask is not None:
        eq &= mask[:, None, :]
    found = eq.any(axis=2)
    idx = np.where(found, eq.argmax(axis=2), 0xFFFFFFFF).astype(np.int64)
    m.write(dst, env, round_to(idx, m.dtype_of(dst)), instr, _rows_of(mask, dst.shape))


@rule("interpret", "device_print")
def _device_print(m, instr, env):
    src = instr.ins[0]
    mask = m.eval_mask(instr, env, src.shape)
    v = m.read(src, env, instr, mask)
    where = ", ".join(f"{k}={val}" for k, val in sorted(env.items()))
    print(f"{instr.attr('prefix')}{' [' + where + ']' if where else ''}\n{v if mask is None else np.where(mask, v, 0)}")
