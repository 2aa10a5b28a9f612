"""Interpreter rules for data movement and bookkeeping ops: alloc, dma_copy, dma_compute, tensor_copy,
transpose, memset, iota, copy_predicated, device_print, bitcast (mirrored by lower/llvm/rules_data.py).

Same dtype: bits are copied; a dtype change converts (interpret_common.convert). New tiles are
filled with NaN / the uninitialised sentinel (runtime/machine.py `fill_uninit`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics.convert import round_to
from .interpret_common import F32, alu_step, convert, finish, value
from .machine import fill_uninit

if TYPE_CHECKING:
    from .machine import Machine


@rule("interpret", "alloc")
def _alloc(m: Machine, instr: ir.Instr, env) -> None:
    name = instr.out.buffer
    if name in m.mem:          # a live tile allocated again: its old contents become uninitialised
        fill_uninit(m.mem[name], m.dtype_of(instr.out))
    else:                      # first touch creates it already filled (Machine.new_array): not twice
        m.mem[name]


@rule("interpret", "dma_copy", "tensor_copy")
def _move(m: Machine, instr: ir.Instr, env, transform=None) -> None:
    dst, src = instr.out, instr.ins[0]
    mask = m.eval_mask(instr, env, dst.shape)
    v = m.read(src, env, instr, mask if transform is None else None)
    if transform is not None:
        v = transform(v)
    m.write(dst, env, convert(v, m.dtype_of(src), m.dtype_of(dst)), instr, mask)




@rule("interpret", "dma_compute")
def _dma_compute(m: Machine, instr: ir.Instr, env) -> None:
    """dst = srcs[0] + srcs[1] + ...: each source converted to fp32, added in source order with each
    sum rounded to fp32 (the DMA engines compute in fp32), the total cast to dst's dtype once."""
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    acc = value(m, instr.ins[0], env, instr, False, mask)
    for src in instr.ins[1:]:
        acc = alu_step("add", acc, value(m, src, env, instr, False, mask), False)
    m.write(dst, env, finish(np.asarray(acc, dtype=F32), m.dtype_of(dst)), instr, mask)


@rule("interpret", "transpose")
def _transpose(m, instr, env):
    _move(m, instr, env, transform=lambda v: v.T)


@rule("interpret", "memset")
def _memset(m, instr, env):
    dst, imm = instr.out, instr.ins[0]
    dt = m.dtype_of(dst)
    src = np.array(imm.value, dtype=np.int64 if D.INFO[imm.dtype].is_int else F32)
    val = round_to(src.reshape(1), dt)
    m.write(dst, env, np.broadcast_to(val.reshape((1,) * len(dst.shape)), dst.shape), instr,
            m.eval_mask(instr, env, dst.shape))


@rule("interpret", "iota")
def _iota(m, instr, env):
    dst = instr.out
    expr = instr.attr("expr")
    v = np.broadcast_to(np.asarray(expr.evaluate(env, dst.shape), dtype=np.int64), dst.shape)
    m.write(dst, env, round_to(v, m.dtype_of(dst)), instr, m.eval_mask(instr, env, dst.shape))


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


@rule("interpret", "device_print")
def _device_print(m, instr, env):
    src = instr.ins[0]
    mask = m.eval_mask(instr, env, src.shape)
    v = m.read(src, env, instr, mask)
    where = ", ".join(f"{k}={val}" for k, val in sorted(env.items()))
    print(f"{instr.attr('prefix')}{' [' + where + ']' if where else ''}\n{v if mask is None else np.where(mask, v, 0)}")


@rule("interpret", "bitcast")
def _bitcast(m: Machine, instr: ir.Instr, env) -> None:
    """The source tile's bytes, partition by partition, as the destination's dtype (lang/views_bitcast.py)."""
    src, dst = instr.ins[0], instr.out
    raw = np.ascontiguousarray(m.read(src, env, instr)).reshape(src.shape[0], -1)
    m.write(dst, env, raw.view(D.storage(m.dtype_of(dst))).reshape(dst.shape), instr)
