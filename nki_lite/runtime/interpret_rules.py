"""Interpreter rules: the numpy definition of every IR op (registered as the "interpret" backend).

Numerics (shared/DESIGN.md, docs/numerics.md):
- Arithmetic computes in fp32 with one rounding per ALU step, then NaNs are canonicalised to
  +qNaN (0x7FC00000) and the result is rounded once to the output dtype (numerics.convert).
  When every input and the output are integers and the op exists on the integer path, it computes
  exactly in int64 and wraps to the output width. right_shift is logical (NKI has no arithmetic
  right shift): the left operand's bit pattern is zero-extended at the output width first.
- Pure data movement (DMA, copy, transpose) of the same dtype copies bits; with a dtype change it
  converts through fp32 (exact widening, then `round_to`), or int64 for int -> int.
- Matmul: per output element, acc starts as the first product (or the PSUM value when
  accumulating) and adds products in k order, each step rounded to fp32; with fp32 inputs each
  step is an exactly-rounded FMA. Products of narrower formats are exact in fp32.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics import alu
from ..numerics.convert import round_to
from .interpreter import Machine, fill_uninit

F32 = np.float32


def _finish(x: np.ndarray, dtype: str) -> np.ndarray:
    if x.dtype == np.float32:
        x = np.where(np.isnan(x), F32("nan"), x)
    return round_to(x, dtype)


def convert(values: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == dst:
        return values
    if D.INFO[src].is_int and D.INFO[dst].is_int:
        return round_to(values.astype(np.int64), dst)
    return round_to(values.astype(F32), dst)


def _is_int(m: Machine, operands, out: ir.Access) -> bool:
    dts = [m.dtype_of(o) if isinstance(o, ir.Access) else o.dtype for o in operands] + [m.dtype_of(out)]
    return all(D.INFO[d].is_int for d in dts)


def _value(m: Machine, o, env, instr, as_int: bool, mask=None):
    if isinstance(o, ir.Imm):
        return np.int64(o.value) if as_int else F32(o.value)
    v = m.read(o, env, instr, mask)
    return v.astype(np.int64) if as_int else v.astype(F32)


@rule("interpret", "alloc")
def _alloc(m: Machine, instr: ir.Instr, env) -> None:
    fill_uninit(m.mem[instr.out.buffer], m.dtype_of(instr.out))


def _move(m: Machine, instr: ir.Instr, env, transform=None) -> None:
    dst, src = instr.out, instr.ins[0]
    mask = m.eval_mask(instr, env, dst.shape)
    v = m.read(src, env, instr, mask if transform is None else None)
    if transform is not None:
        v = transform(v)
    m.write(dst, env, convert(v, m.dtype_of(src), m.dtype_of(dst)), instr, mask)


@rule("interpret", "dma_copy")
def _dma(m, instr, env):
    _move(m, instr, env)


@rule("interpret", "tensor_copy")
def _copy(m, instr, env):
    _move(m, instr, env)


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


def _act_functions():
    from ..numerics import fp32math
    funcs = dict(fp32math.FUNCTIONS)
    funcs.setdefault("copy", lambda x: x)
    funcs.setdefault("negative", lambda x: (-x).astype(F32))
    return funcs


_ACT = None


@rule("interpret", "activation")
def _activation(m, instr, env):
    global _ACT
    if _ACT is None:
        _ACT = _act_functions()
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    ins = list(instr.ins)
    x = m.read(ins.pop(0), env, instr, mask).astype(F32)
    with np.errstate(all="ignore"):
        scale = instr.attr("scale")
        if scale == "tile":
            x = (x * m.read(ins.pop(0), env, instr, mask).astype(F32)).astype(F32)
        elif scale is not None:
            x = (x * F32(scale)).astype(F32)
        if instr.attr("bias") == "tile":
            x = (x + m.read(ins.pop(0), env, instr, mask).astype(F32)).astype(F32)
        y = np.asarray(_ACT[instr.attr("func")](x), dtype=F32)
        y = np.where(np.isnan(y), F32("nan"), y)
    m.write(dst, env, _finish(y, m.dtype_of(dst)), instr, mask)
    if len(instr.outs) > 1:
        from .interpret_rules_ext import write_reduction
        write_reduction(m, instr, env, y, mask)


def _alu(name: str, a, b, as_int: bool, reverse: bool = False, width: int = 64):
    if reverse:
        a, b = b, a
    with np.errstate(all="ignore"):
        if as_int:
            if name == "right_shift" and width < 64:
                # logical shift (NKI has no arithmetic right shift): zero-extend the bit pattern at the
                # output width first, else negative values would shift in ones
                a = np.asarray(a, dtype=np.int64) & np.int64((1 << width) - 1)
            return np.asarray(alu.INT[name](a, b), dtype=np.int64)
        return np.asarray(alu.FP32[name](a, b), dtype=F32)


@rule("interpret", "tensor_tensor")
def _tensor_tensor(m, instr, env):
    dst = instr.out
    op = instr.attr("op")
    as_int = _is_int(m, instr.ins, dst) and op in alu.INT
    mask = m.eval_mask(instr, env, dst.shape)
    a = _value(m, instr.ins[0], env, instr, as_int, mask)
    b = _value(m, instr.ins[1], env, instr, as_int, mask)
    width = D.INFO[m.dtype_of(dst)].bits
    m.write(dst, env, _finish(_alu(op, a, b, as_int, width=width), m.dtype_of(dst)), instr, mask)


@rule("interpret", "tensor_scalar")
def _tensor_scalar(m, instr, env):
    dst = instr.out
    ops = [instr.attr("op0")] + ([instr.attr("op1")] if instr.attr("op1") else [])
    as_int = _is_int(m, instr.ins, dst) and all(o in alu.INT for o in ops)
    mask = m.eval_mask(instr, env, dst.shape)
    x = _value(m, instr.ins[0], env, instr, as_int, mask)
    for k, op in enumerate(ops):
        s = _value(m, instr.ins[1 + k], env, instr, as_int, mask)
        x = _alu(op, x, s, as_int, bool(instr.attr(f"reverse{k}")), D.INFO[m.dtype_of(dst)].bits)
    m.write(dst, env, _finish(x, m.dtype_of(dst)), instr, mask)
    if len(instr.outs) > 1:
        from .interpret_rules_ext import write_reduction
        write_reduction(m, instr, env, np.broadcast_to(x, dst.shape).astype(F32), mask)


@rule("interpret", "select")
def _select(m, instr, env):
    dst = instr.out
    as_int = _is_int(m, instr.ins[1:], dst)
    mask = m.eval_mask(instr, env, dst.shape)
    c = m.read(instr.ins[0], env, instr, mask).astype(F32) != 0
    a = _value(m, instr.ins[1], env, instr, as_int, mask)
    b = _value(m, instr.ins[2], env, instr, as_int, mask)
    m.write(dst, env, _finish(np.where(c, a, b), m.dtype_of(dst)), instr, mask)


@rule("interpret", "tensor_reduce")
def _tensor_reduce(m, instr, env):
    dst, src = instr.out, instr.ins[0]
    op, axes = instr.attr("op"), instr.attr("axes")
    as_int = _is_int(m, (src,), dst) and op in alu.INT
    mask = m.eval_mask(instr, env, src.shape)
    x = _value(m, src, env, instr, as_int, mask)
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
    m.write(dst, env, _finish(r, m.dtype_of(dst)), instr, wmask)


@rule("interpret", "nc_matmul")
def _nc_matmul(m, instr, env):
    dst = instr.out
    s_acc, mv_acc = instr.ins
    s = m.read(s_acc, env, instr).astype(F32)      # [K, M]
    mv = m.read(mv_acc, env, instr).astype(F32)    # [K, N]
    fused = m.dtype_of(s_acc) == "float32" or m.dtype_of(mv_acc) == "float32"
    K = s.shape[0]
    with np.errstate(all="ignore"):
        if fused:
            from ..numerics.fma import fma_f32
        if instr.attr("accumulate"):
            acc = m.read(dst, env, instr).astype(F32)
            start = 0
        else:
            acc = (s[0][:, None] * mv[0][None, :]).astype(F32)
            start = 1
        for k in range(start, K):
            if fused:
                acc = fma_f32(s[k][:, None], mv[k][None, :], acc)
            else:
                acc = (acc + s[k][:, None] * mv[k][None, :]).astype(F32)
    m.write(dst, env, _finish(acc, m.dtype_of(dst)), instr)
