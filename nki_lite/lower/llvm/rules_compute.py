"""llvm rules for arithmetic: activation, tensor_tensor, tensor_scalar, scalar_tensor_tensor, select,
affine_select, tensor_tensor_scan (mirrors runtime/interpret_*.py step for step; nc_matmul is in
rules_matmul.py)."""
from __future__ import annotations

import contextlib

from ...core import ir
from ...core.affine import axis_var
from ...core.ops import rule
from . import mathlib as ML
from .irbuilder import f32
from .rules_common import alu_op, alu_rev, domain, elementwise


def _width(em, instr) -> int:
    from ...core import dtypes as D
    return D.INFO[em.dtype(instr.out)].bits


def _finish(em, dst, val, dom):
    """Canonicalise (f32) and convert to the destination's storage."""
    dt = em.dtype(dst)
    return em.from_i64(val, dt) if dom == "i64" else em.from_f32(em.canon(val), dt)


@rule("llvm", "activation")
def _activation(em, instr, ctx):
    dst = instr.out
    ins = list(instr.ins)
    func = instr.attr("func")
    data = ins.pop(0)
    scale_acc = ins.pop(0) if instr.attr("scale") == "tile" else None
    bias_acc = ins.pop(0) if instr.attr("bias") == "tile" else None
    scale = instr.attr("scale")

    def value(env):
        B = em.b
        F = em.vt("float")
        x = em.operand(data, env, "f32")
        if scale_acc is not None:
            x = B.op(f"fmul {F} {x}, {em.operand(scale_acc, env, 'f32')}")
        elif scale is not None:
            x = B.op(f"fmul {F} {x}, {em.splat(f32(scale), 'float')}")
        if bias_acc is not None:
            x = B.op(f"fadd {F} {x}, {em.operand(bias_acc, env, 'f32')}")
        if func == "copy":
            y = x
        elif func == "negative":
            y = B.op(f"fneg {F} {x}")
        else:       # the canonical form: every fp32math NaN result already is +0x7FC00000
            y = B.op(f"call {F} @{em.use(ML.function(func, em.W, canonical=True))}({F} {x})")
        if func in ("copy", "negative"):
            y = em.canon(y)
        em.row_value = y
        return em.from_f32(y, em.dtype(dst))
    elementwise(em, instr, ctx, tuple(instr.ins), value, reduce_op=instr.attr("reduce_op"))


@rule("llvm", "tensor_tensor")
def _tensor_tensor(em, instr, ctx):
    from ...numerics import alu
    op = instr.attr("op")
    dom = domain(em, instr.ins, instr.outs) if op in alu.INT else "f32"
    a, b = instr.ins

    def value(env):
        r = alu_op(em, op, em.operand(a, env, dom), em.operand(b, env, dom), dom, _width(em, instr))
        return _finish(em, instr.out, r, dom)
    elementwise(em, instr, ctx, instr.ins, value)


def _chain(em, instr, ctx, n_ops: int):
    from ...numerics import alu
    ops = [instr.attr(f"op{k}") for k in range(n_ops) if instr.attr(f"op{k}")]
    dom = domain(em, instr.ins, instr.outs[:1]) if all(o in alu.INT for o in ops) else "f32"

    def value(env):
        x = em.operand(instr.ins[0], env, dom)
        for k, op in enumerate(ops):
            s = em.operand(instr.ins[1 + k], env, dom)
            x = alu_rev(em, op, x, s, dom, bool(instr.attr(f"reverse{k}")), _width(em, instr))
        em.row_value = x if dom == "f32" else em.b.op(f"sitofp {em.vt('i64')} {x} to {em.vt('float')}")
        return _finish(em, instr.out, x, dom)
    elementwise(em, instr, ctx, instr.ins, value, reduce_op=instr.attr("reduce_op"))


@rule("llvm", "tensor_scalar")
def _tensor_scalar(em, instr, ctx):
    _chain(em, instr, ctx, 2)


@rule("llvm", "scalar_tensor_tensor")
def _stt(em, instr, ctx):
    _chain(em, instr, ctx, 2)


@rule("llvm", "select")
def _select(em, instr, ctx):
    c_acc, a, b = instr.ins
    dom = domain(em, (a, b), instr.outs)

    def value(env):
        zero = "zeroinitializer" if em.W > 1 else "0.0"
        c = em.b.op(f"fcmp une {em.vt('float')} {em.operand(c_acc, env, 'f32')}, {zero}")
        ty = em.vt("i64" if dom == "i64" else "float")
        r = em.b.op(f"select {em.vt('i1')} {c}, {ty} {em.operand(a, env, dom)}, {ty} {em.operand(b, env, dom)}")
        return _finish(em, instr.out, r, dom)
    elementwise(em, instr, ctx, instr.ins, value)


@rule("llvm", "affine_select")
def _affine_select(em, instr, ctx):
    data, imm = instr.ins
    pred = instr.attr("pred")

    def value(env):
        p = em.mask_value(pred, env)
        x = em.operand(data, env, "f32")
        r = em.b.op(f"select i1 {p}, float {x}, float {f32(imm.value)}")
        return _finish(em, instr.out, r, "f32")
    elementwise(em, instr, ctx, (data,), value)


@rule("llvm", "tensor_tensor_scan")
def _scan(em, instr, ctx):
    """Sequential along the free axis per partition; masked-off positions pass the carry through."""
    B = em.b
    dst = instr.out
    a, b, init = instr.ins
    op0, op1 = instr.attr("op0"), instr.attr("op1")
    r0, r1 = bool(instr.attr("reverse0")), bool(instr.attr("reverse1"))
    accesses = (dst, a, b) + ((init,) if isinstance(init, ir.Access) else ())
    slow = em.check_bounds(instr, ctx, accesses, None)
    carry = em.entry_alloca("float", "carry")
    P, F = dst.shape
    with em.partitions(P, "sp") as p:
        env0 = {**ctx.env, axis_var(0): p}
        if isinstance(init, ir.Imm):
            iv = f32(init.value)
        else:
            iv = em.operand(init, {**env0, axis_var(1): "0"}, "f32")
        B.emit(f"store float {iv}, ptr {carry}, align 4")
        with B.loop(F, "sj") if F > 1 else contextlib.nullcontext("0") as j:
            env = {**env0, axis_var(1): j}
            live = em.mask_value(instr.mask, env)
            em.check_element(slow, live, ctx, env, (dst, a, b))
            with (B.if_(live, "sm") if live is not None else contextlib.nullcontext()):
                prev = B.op(f"load float, ptr {carry}, align 4")
                x = alu_rev(em, op0, em.operand(a, env, "f32"), prev, "f32", r0)
                x = alu_rev(em, op1, x, em.operand(b, env, "f32"), "f32", r1)
                # the carry is canonicalised: a NaN carry stays NaN through every ALU op either way
                # (outputs are canonicalised too), and LLVM's max/min lowering mishandles a
                # signalling-NaN carry after optimisation (tests/test_jit_regressions.py)
                x = em.canon(x)
                B.emit(f"store float {x}, ptr {carry}, align 4")
                em.store_raw(dst, env, _finish(em, dst, x, "f32"))
