"""Interpreter rules for the reductions: tensor_reduce, bn_stats, bn_aggr, max8, find_index8
(mirrored by lower/llvm/rules_reduce.py).

Definitions (docs/numerics.md):
- bn_stats: for the even and the odd free elements separately: count; mean = sum / count (sum in
  numerics.alu's reduction order); var*count = sum((x - mean)^2) in the same order.
- bn_aggr: Chan's pairwise combination over the triples in order, in fp32:
  n = na + nb; d = mb - ma; ma += d * (nb / n); M2a += M2b + d*d*(na*nb/n); var = M2 / n.
- max8: the 8 largest fp32 values, descending (NaN sorts first); find_index8: index of the first
  element equal (fp32 compare) to each value, or 0xFFFFFFFF if absent.
- Per-partition outputs are written only for the partitions where the instruction's mask selects
  at least one element (interpret_common.rows_of).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics import alu
from ..numerics.convert import round_to
from .interpret_common import F32, finish, is_int, rows_of, value


@rule("interpret", "tensor_reduce")
def _tensor_reduce(m, instr, env):
    dst, src = instr.out, instr.ins[0]
    op, axes = instr.attr("op"), instr.attr("axes")
    as_int = is_int(m, (src,), dst) and op in alu.INT
    mask = m.eval_mask(instr, env, src.shape)
    x = value(m, src, env, instr, as_int, mask)
    if mask is not None:
        ident = alu.REDUCE_IDENTITY[op]
        if as_int:
            ident = {"add": 0, "multiply": 1, "logical_and": 1, "logical_or": 0,
                     "maximum": np.iinfo(np.int64).min, "minimum": np.iinfo(np.int64).max}[op]
        x = np.where(mask, x, ident)
    keep = [a for a in range(len(src.shape)) if a not in axes]
    xt = np.transpose(x, keep + list(axes))
    flat = xt.reshape(xt.shape[:len(keep)] + (-1,))
    r = alu.reduce_int(op, flat) if as_int else alu.reduce_fp32(op, flat)
    if instr.attr("negate"):
        r = -r
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(src.shape))
    r = np.asarray(r).reshape(out_shape)
    wmask = None
    if mask is not None:
        wmask = np.any(mask, axis=tuple(axes), keepdims=True)
    m.write(dst, env, finish(r, m.dtype_of(dst)), instr, wmask)


def _masked_free(m, instr, env, acc, fill=None) -> tuple[np.ndarray, np.ndarray | None]:
    """acc's elements as fp32 [partitions, free] and the mask in that layout (None: all valid);
    with `fill`, masked-off elements read as fill."""
    mask = m.eval_mask(instr, env, acc.shape)
    x = m.read(acc, env, instr, mask).astype(F32)
    x = x.reshape(x.shape[0], -1)
    if mask is not None:
        mask = np.broadcast_to(mask, acc.shape).reshape(acc.shape[0], -1)
        if fill is not None:
            x = np.where(mask, x, fill)
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
    m.write(dst, env, finish(np.stack(out, axis=1).astype(F32), m.dtype_of(dst)), instr,
            rows_of(mask, dst.shape))


@rule("interpret", "bn_aggr")
def _bn_aggr(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0], F32(0))   # masked-off: count 0, skipped
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
    m.write(dst, env, finish(np.stack([mean_a, var], axis=1).astype(F32), m.dtype_of(dst)), instr,
            rows_of(mask, dst.shape))


@rule("interpret", "max8")
def _max8(m, instr, env):
    dst = instr.out
    x, mask = _masked_free(m, instr, env, instr.ins[0], F32(-np.inf))
    key = np.where(np.isnan(x), F32(np.inf), x)          # NaN sorts as the largest
    order = np.argsort(-key, axis=1, kind="stable")[:, :8]
    top = np.take_along_axis(x, order, axis=1)
    m.write(dst, env, finish(top.astype(F32), m.dtype_of(dst)), instr, rows_of(mask, dst.shape))


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
    m.write(dst, env, round_to(idx, m.dtype_of(dst)), instr, rows_of(mask, dst.shape))
