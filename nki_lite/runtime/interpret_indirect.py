"""Interpreter rules of indirect data movement: dma_indirect and copy_dynamic (lang/ops_indirect.py).

Semantics (docs/numerics.md, "Indirect DMA"): element e of the instruction's tile shape moves
src[e] -> dst[e], where the indirect side's index on buffer dimension `dim` is its affine part plus
the index tile's value at e (read as an integer). Elements are visited in row-major order of the
tile; masked-off elements are not moved and their indices are not read.
- An index outside [0, size) of that dimension: oob=error raises NL-E503 naming the first such
  element's value (row-major) and the kernel line; oob=skip leaves that element untransferred.
- rmw=add: dst[e] = round(dst[e] + src[e]) computed in fp32 (NaN canonicalised, as every
  arithmetic result), applied element by element in row-major order, so repeated destination
  indices accumulate (an atomic add per element).
- Otherwise a plain copy with the data-movement conversion (bits when dtypes agree); when several
  elements land on one destination element the last in row-major order wins.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import errors
from ..core import ir
from ..core.affine import Affine
from ..core.ops import rule
from .interpret_common import convert, finish as _finish
from .machine import Machine

F32 = np.float32


def where_text(env: dict) -> str:
    return ", ".join(f"{k}={val}" for k, val in sorted(env.items()))


def oob_message(buf: ir.Buffer, dim: int, value: int, element: tuple, where: str) -> str:
    """The NL-E503 message (shared with the JIT, runtime/native.py, so both modes say the same);
    `element` is the tile coordinate whose index is out of range."""
    at = ", ".join(map(str, element))
    return (f"indirect index {value} on dimension {dim} of '{buf.name}' (shape {buf.shape}) is outside "
            f"[0, {buf.shape[dim] - 1}] (oob_mode=error), at tile element [{at}]"
            + (f" when {where}" if where else ""))


@dataclass(frozen=True, eq=False)
class Resolved(ir.Access):
    """An indirect access with its per-dimension index arrays computed: Machine.read / write (and the
    debug checks hooked there) take it like any access and use `resolved` as its indices."""
    resolved: tuple = ()


def _indirect_indices(m: Machine, instr: ir.Instr, acc: ir.Access, env, live):
    """The indirect access resolved (index tile added, range checked), and the elements to move."""
    dim = instr.attr("dim")
    static = ir.Access(acc.buffer, acc.index[:dim] + (Affine(0),) + acc.index[dim + 1:], acc.shape)
    idx = list(m._indices(static, env, live, instr))
    off = m.read(instr.ins[1], env, instr, live).astype(np.int64)
    v = np.broadcast_to(np.asarray(acc.index[dim].evaluate(env, acc.shape), dtype=np.int64), acc.shape) + off
    buf = m.buffers[acc.buffer]
    ok = (v >= 0) & (v < buf.shape[dim])
    bad = ~ok if live is None else (~ok & live)
    if bad.any() and instr.attr("oob") != "skip":
        k = int(np.flatnonzero(bad)[0])                      # the first in row-major order
        el = tuple(int(x) for x in np.unravel_index(k, acc.shape))
        msg = oob_message(buf, dim, int(v.reshape(-1)[k]), el, where_text(env))
        raise errors.make("indirect_out_of_bounds", msg, loc=instr.loc)
    keep = ok if live is None else (ok & live)
    idx[dim] = np.where(keep, v, 0)
    idx = tuple(np.where(keep, i, 0) for i in idx)
    return Resolved(acc.buffer, acc.index, acc.shape, idx), keep


@rule("interpret", "dma_indirect", "copy_dynamic")
def _move(m: Machine, instr: ir.Instr, env) -> None:
    dst, src = instr.out, instr.ins[0]
    mask = m.eval_mask(instr, env, dst.shape)
    side = instr.attr("dyn")
    keep = mask
    if side == "in":
        src, keep = _indirect_indices(m, instr, src, env, mask)
    values = m.read(src, env, instr, keep)
    if side == "out":
        dst, keep = _indirect_indices(m, instr, dst, env, mask)
    sdt, ddt = m.dtype_of(src), m.dtype_of(dst)
    if instr.attr("rmw"):
        old = m.read(dst, env, instr, keep)
        values = _rmw(m, dst, env, instr, keep, old, values, ddt)
    else:
        values = convert(values, sdt, ddt)
    m.write(dst, env, values, instr, keep)


def _rmw(m: Machine, dst, env, instr, keep, old: np.ndarray, vals: np.ndarray, ddt: str) -> np.ndarray:
    """dst + value per element, in row-major order: repeated destinations accumulate (every
    occurrence gets the final sum, so the write's "last one wins" stores it)."""
    new = _finish(old.astype(F32) + np.broadcast_to(vals, old.shape).astype(F32), ddt)
    idx = m._indices(dst, env, keep, instr)
    live = np.ones(old.shape, bool) if keep is None else np.broadcast_to(keep, old.shape)
    flat = np.ravel_multi_index(tuple(i[live] for i in idx), m.buffers[dst.buffer].shape)
    if np.unique(flat).size == flat.size:            # no repeated destination: one vector step
        return new
    cur: dict[int, object] = {}
    order = np.flatnonzero(live.reshape(-1))
    o, v = old.reshape(-1), np.broadcast_to(vals, old.shape).reshape(-1).astype(F32)
    for k, e in zip(flat.tolist(), order.tolist()):
        start = cur.get(k, o[e])
        cur[k] = _finish(np.array([F32(start) + v[e]], F32), ddt)[0]
    out = new.copy().reshape(-1)
    for k, e in zip(flat.tolist(), order.tolist()):
        out[e] = cur[k]
    return out.reshape(old.shape)
