"""Interpreter rules for the compute ops: activation, tensor_tensor, tensor_scalar,
scalar_tensor_tensor, select, affine_select, tensor_tensor_scan, nc_matmul (mirrored by
lower/llvm/rules_compute.py).

Numerics (docs/numerics.md) beyond interpret_common's:
- Matmul: per output element, acc starts as the first product (or the PSUM value when
  accumulating) and adds products in k order, each step rounded to fp32; with fp32 inputs each
  step is an exactly-rounded FMA (runtime/fma_kernel.py's compiled chain, bit-identical to the
  numpy definition numerics/fma.py). Products of narrower formats are exact in fp32 when they
  land in its normal range, and then round(acc + a*b) is fma(a, b, acc): such chains run in the
  compiled FMA loop too (`_products_exact` decides from the dtypes and the operands' magnitudes),
  the others in the numpy chain.
- tensor_tensor_scan: strictly sequential along the free axis, each op rounded to fp32; the carry
  is the fp32 value (not the rounded output); masked-off positions pass the carry through.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics import alu
from ..numerics.convert import round_to
from .interpret_common import F32, alu_step, finish, is_int, value, write_reduction


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
    x = m.read(ins.pop(0), env, instr, mask).astype(F32, copy=False)
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
    m.write(dst, env, finish(y, m.dtype_of(dst)), instr, mask)
    if len(instr.outs) > 1:
        write_reduction(m, instr, env, y, mask)


@rule("interpret", "tensor_tensor")
def _tensor_tensor(m, instr, env):
    dst = instr.out
    op = instr.attr("op")
    as_int = is_int(m, instr.ins, dst) and op in alu.INT
    mask = m.eval_mask(instr, env, dst.shape)
    a = value(m, instr.ins[0], env, instr, as_int, mask)
    b = value(m, instr.ins[1], env, instr, as_int, mask)
    width = D.INFO[m.dtype_of(dst)].bits
    m.write(dst, env, finish(alu_step(op, a, b, as_int, width=width), m.dtype_of(dst)), instr, mask)


@rule("interpret", "tensor_scalar")
def _tensor_scalar(m, instr, env):
    dst = instr.out
    ops = [instr.attr("op0")] + ([instr.attr("op1")] if instr.attr("op1") else [])
    as_int = is_int(m, instr.ins, dst) and all(o in alu.INT for o in ops)
    mask = m.eval_mask(instr, env, dst.shape)
    x = value(m, instr.ins[0], env, instr, as_int, mask)
    for k, op in enumerate(ops):
        s = value(m, instr.ins[1 + k], env, instr, as_int, mask)
        x = alu_step(op, x, s, as_int, bool(instr.attr(f"reverse{k}")), D.INFO[m.dtype_of(dst)].bits)
    m.write(dst, env, finish(x, m.dtype_of(dst)), instr, mask)
    if len(instr.outs) > 1:
        write_reduction(m, instr, env, np.broadcast_to(x, dst.shape).astype(F32), mask)


@rule("interpret", "scalar_tensor_tensor")
def _stt(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    as_int = is_int(m, instr.ins, dst) and instr.attr("op0") in alu.INT and instr.attr("op1") in alu.INT
    x = value(m, instr.ins[0], env, instr, as_int, mask)
    s0 = value(m, instr.ins[1], env, instr, as_int, mask)
    t1 = value(m, instr.ins[2], env, instr, as_int, mask)
    width = D.INFO[m.dtype_of(dst)].bits
    x = alu_step(instr.attr("op0"), x, s0, as_int, bool(instr.attr("reverse0")), width=width)
    x = alu_step(instr.attr("op1"), x, t1, as_int, bool(instr.attr("reverse1")), width=width)
    m.write(dst, env, finish(x, m.dtype_of(dst)), instr, mask)


@rule("interpret", "select")
def _select(m, instr, env):
    dst = instr.out
    as_int = is_int(m, instr.ins[1:], dst)
    mask = m.eval_mask(instr, env, dst.shape)
    c = m.read(instr.ins[0], env, instr, mask).astype(F32) != 0
    a = value(m, instr.ins[1], env, instr, as_int, mask)
    b = value(m, instr.ins[2], env, instr, as_int, mask)
    m.write(dst, env, finish(np.where(c, a, b), m.dtype_of(dst)), instr, mask)


@rule("interpret", "affine_select")
def _affine_select(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    x = value(m, instr.ins[0], env, instr, False, mask)
    pred = instr.attr("pred").evaluate(env, dst.shape)
    y = np.where(pred, x, F32(instr.ins[1].value))
    m.write(dst, env, finish(y.astype(F32), m.dtype_of(dst)), instr, mask)


@rule("interpret", "tensor_tensor_scan")
def _scan(m, instr, env):
    dst = instr.out
    mask = m.eval_mask(instr, env, dst.shape)
    a = value(m, instr.ins[0], env, instr, False, mask)
    b = value(m, instr.ins[1], env, instr, False, mask)
    init = instr.ins[2]
    prev = (np.full((dst.shape[0],), F32(init.value), dtype=F32) if isinstance(init, ir.Imm)
            else m.read(init, env, instr).astype(F32).reshape(-1))
    out = np.empty(dst.shape, dtype=F32)
    op0, op1 = instr.attr("op0"), instr.attr("op1")
    r0, r1 = bool(instr.attr("reverse0")), bool(instr.attr("reverse1"))
    live = np.ones(dst.shape, dtype=bool) if mask is None else np.broadcast_to(mask, dst.shape)
    for j in range(dst.shape[1]):
        nxt = alu_step(op1, alu_step(op0, a[:, j], prev, False, r0), b[:, j], False, r1)
        prev = np.where(live[:, j], nxt, prev)        # masked-off positions pass the carry through
        out[:, j] = prev
    m.write(dst, env, finish(out, m.dtype_of(dst)), instr, mask)


@rule("interpret", "nc_matmul")
def _nc_matmul(m, instr, env):
    dst = instr.out
    s_acc, mv_acc = instr.ins
    s = m.read(s_acc, env, instr).astype(F32, copy=False)      # [K, M] (reads are fresh arrays)
    mv = m.read(mv_acc, env, instr).astype(F32, copy=False)    # [K, N]
    fused = m.dtype_of(s_acc) == "float32" or m.dtype_of(mv_acc) == "float32"
    K = s.shape[0]
    with np.errstate(all="ignore"):
        if instr.attr("accumulate"):
            acc = m.read(dst, env, instr).astype(F32, copy=False)
            start = 0
        else:
            acc = (s[0][:, None] * mv[0][None, :]).astype(F32)
            start = 1
        # fp32 operands: one fused multiply-add per step (numerics/fma.py); the compiled chain
        # (runtime/fma_kernel.py, independent of the JIT) is the same bits, far faster; the numpy
        # chain is the fallback without llvmlite. Exact narrower products: the same chain.
        chain = fused or _products_exact(s, mv, m.dtype_of(s_acc), m.dtype_of(mv_acc))
        if chain:
            from .fma_kernel import fma_chain_f32
            acc = fma_chain_f32(s, mv, acc, start, overwrite=True)     # acc is this rule's own array
        for k in range(start, K) if not chain else ():
            acc = (acc + s[k][:, None] * mv[k][None, :]).astype(F32)
    m.write(dst, env, finish(acc, m.dtype_of(dst)), instr)


def _precision(dtype: str) -> int:
    """Significant bits of a value of `dtype` (integers: all their bits, a safe upper bound)."""
    info = D.INFO[dtype]
    return info.man_bits + 1 if info.kind == "f" else info.bits


_FP32 = np.finfo(np.float32)
_NORMAL_MIN, _FP32_MAX = float(_FP32.smallest_normal), float(_FP32.max)


def _magnitudes(x: np.ndarray):
    """(smallest, largest) |x| over the finite non-zero elements, or None if there are none."""
    a = np.abs(x)
    a = a[np.isfinite(a) & (a != 0)]
    return (float(a.min()), float(a.max())) if a.size else None


def _products_exact(s: np.ndarray, mv: np.ndarray, sdt: str, mdt: str) -> bool:
    """Is every product s[k, i] * mv[k, j] exact in fp32? Then the unfused step round(acc + round(a*b))
    is round(acc + a*b), which is fma(a, b, acc) bit for bit (infinities, NaN, zeros and signed zeros
    included: both follow IEEE for the same exact product). True when the significands fit in fp32's
    24 bits together (bf16 x bf16: 16, fp16 x fp16: 22, fp8, tf32) and every finite non-zero product
    is in fp32's normal range (a subnormal product would be rounded; one above fp32's largest overflows)."""
    if _precision(sdt) + _precision(mdt) > 24:
        return False
    ms, mm = _magnitudes(s), _magnitudes(mv)
    if ms is None or mm is None:         # every product is 0, inf or NaN: exact
        return True
    return ms[0] * mm[0] >= _NORMAL_MIN and ms[1] * mm[1] <= _FP32_MAX
