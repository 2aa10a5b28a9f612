"""Shared pieces of the llvm rules: compute domains, ALU ops in IR, the elementwise emitter, lanes.

Every helper mirrors the numpy definition in runtime/interpret_rules*.py and numerics/alu.py:
fp32 ALU steps (fadd/fsub/fmul/fdiv, llvm.maximum/minimum for IEEE max/min, comparisons to 1.0/0.0),
int64 steps on the integer path, the 16-lane reduction order, NaN canonicalisation at the end.
"""
from __future__ import annotations

import contextlib

from ...lang import dtypes as D
from ...numerics import alu
from .. import ir
from ..affine import Affine, axis_var
from .irbuilder import f32

LANES = alu.REDUCE_LANES


def domain(em, operands, outs) -> str:
    dts = [em.dtype(o) for o in operands] + [em.dtype(o) for o in outs]
    return "i64" if all(D.INFO[d].is_int for d in dts) else "f32"


_FCMP = {"equal": "oeq", "not_equal": "une", "greater": "ogt", "greater_equal": "oge", "less": "olt",
         "less_equal": "ole"}
_IARITH = {"add": "add", "subtract": "sub", "multiply": "mul"}
_FARITH = {"add": "fadd", "subtract": "fsub", "multiply": "fmul", "divide": "fdiv"}
_LOGIC = {"logical_and": "and", "logical_or": "or", "logical_xor": "xor"}
_ICMP = {"equal": "eq", "not_equal": "ne", "greater": "sgt", "greater_equal": "sge", "less": "slt",
         "less_equal": "sle"}


def alu_op(em, op: str, a: str, b_: str, dom: str, width: int = 64) -> str:
    """One ALU step `op(a, b)` in the given domain (f32 or i64). `width` is the output dtype's bit
    width: right_shift is logical at that width (NKI has no arithmetic right shift)."""
    B = em.b
    if dom == "i64":
        if op in ("add", "subtract", "multiply"):
            return B.op(f"{_IARITH[op]} i64 {a}, {b_}")
        if op in ("maximum", "minimum"):
            em.declare(f"declare i64 @llvm.s{op[:3]}.i64(i64, i64)")
            return B.op(f"call i64 @llvm.s{op[:3]}.i64(i64 {a}, i64 {b_})")
        if op in _ICMP:
            c = B.op(f"icmp {_ICMP[op]} i64 {a}, {b_}")
            return B.op(f"zext i1 {c} to i64")
        if op.startswith("logical_"):
            ca = B.op(f"icmp ne i64 {a}, 0")
            cb = B.op(f"icmp ne i64 {b_}, 0")
            c = B.op(f"{_LOGIC[op]} i1 {ca}, {cb}")
            return B.op(f"zext i1 {c} to i64")
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            return B.op(f"{op[8:]} i64 {a}, {b_}")
        if op in ("left_shift", "right_shift"):
            em.declare("declare i64 @llvm.smax.i64(i64, i64)")
            em.declare("declare i64 @llvm.smin.i64(i64, i64)")
            lo = B.op(f"call i64 @llvm.smax.i64(i64 {b_}, i64 0)")
            s = B.op(f"call i64 @llvm.smin.i64(i64 {lo}, i64 63)")
            if op == "right_shift" and width < 64:
                a = B.op(f"and i64 {a}, {(1 << width) - 1}")
            return B.op(f"{'shl' if op == 'left_shift' else 'ashr'} i64 {a}, {s}")
        raise NotImplementedError(f"integer ALU op {op}")
    if op in ("add", "subtract", "multiply", "divide"):
        return B.op(f"{_FARITH[op]} float {a}, {b_}")
    if op in ("maximum", "minimum"):
        em.declare(f"declare float @llvm.{op}.f32(float, float)")
        return B.op(f"call float @llvm.{op}.f32(float {a}, float {b_})")
    if op in _FCMP:
        c = B.op(f"fcmp {_FCMP[op]} float {a}, {b_}")
        return B.op(f"uitofp i1 {c} to float")
    if op.startswith("logical_"):
        ca = B.op(f"fcmp une float {a}, 0.0")
        cb = B.op(f"fcmp une float {b_}, 0.0")
        c = B.op(f"{_LOGIC[op]} i1 {ca}, {cb}")
        return B.op(f"uitofp i1 {c} to float")
    raise NotImplementedError(f"fp32 ALU op {op}")


def alu_rev(em, op: str, x: str, y: str, dom: str, reverse: bool, width: int = 64) -> str:
    """The interpreter's `_alu(op, x, y, reverse)`: op(x, y), or op(y, x) when reversed."""
    return alu_op(em, op, y, x, dom, width) if reverse else alu_op(em, op, x, y, dom, width)


def identity(op: str, dom: str) -> str:
    if dom == "i64":
        return {"add": "0", "multiply": "1", "logical_and": "1", "logical_or": "0",
                "maximum": str(-2 ** 63), "minimum": str(2 ** 63 - 1)}[op]
    return f32(alu.REDUCE_IDENTITY[op])


# ---------------------------------------------------------------- lanes (the fixed reduction order)

class Lanes:
    """16 fp32 accumulators in an entry-block alloca, combined by the halving tree."""

    def __init__(self, em, op: str, hint: str = "lanes"):
        self.em, self.op = em, op
        self.ptr = em.entry_alloca(f"[{LANES} x float]", hint)

    def reset(self) -> None:
        for j in range(LANES):
            p = self.em.b.op(f"getelementptr inbounds [{LANES} x float], ptr {self.ptr}, i64 0, i64 {j}")
            self.em.b.emit(f"store float {identity(self.op, 'f32')}, ptr {p}, align 4")

    def add(self, k: str, val: str) -> None:
        """lanes[k % 16] = op(lanes[k % 16], val)"""
        B = self.em.b
        lane = B.op(f"and i64 {k}, {LANES - 1}")
        p = B.op(f"getelementptr inbounds [{LANES} x float], ptr {self.ptr}, i64 0, i64 {lane}")
        old = B.op(f"load float, ptr {p}, align 4")
        B.emit(f"store float {alu_op(self.em, self.op, old, val, 'f32')}, ptr {p}, align 4")

    def combine(self) -> str:
        B = self.em.b
        vals = []
        for j in range(LANES):
            p = B.op(f"getelementptr inbounds [{LANES} x float], ptr {self.ptr}, i64 0, i64 {j}")
            vals.append(B.op(f"load float, ptr {p}, align 4"))
        w = LANES
        while w > 1:
            w //= 2
            vals = [alu_op(self.em, self.op, vals[i], vals[i + w], "f32") for i in range(w)]
        return vals[0]


def flat_axes(shape, start: int, env) -> Affine:
    """Row-major linear index over axes start..end of `shape` as an affine of the axis vars."""
    e, stride = Affine(0), 1
    for a in reversed(range(start, len(shape))):
        e = e + Affine.var(axis_var(a), stride)
        stride *= shape[a]
    return e


class RowAny:
    """Per-partition "did the mask select any element of this row" flag (per-partition outputs are
    written only for such rows, like tensor_reduce)."""

    def __init__(self, em, masked: bool):
        self.em = em
        self.ptr = em.entry_alloca("i1", "rowany") if masked else None

    def reset(self) -> None:
        if self.ptr:
            self.em.b.emit(f"store i1 false, ptr {self.ptr}, align 1")

    def mark(self) -> None:
        if self.ptr:
            self.em.b.emit(f"store i1 true, ptr {self.ptr}, align 1")

    def guard(self):
        if not self.ptr:
            return contextlib.nullcontext()
        return self.em.b.if_(self.em.b.op(f"load i1, ptr {self.ptr}, align 1"), "rowany")


# ---------------------------------------------------------------- the elementwise emitter

def _aliases(em, dst: ir.Access, ins) -> bool:
    """Does an input read, through a different mapping, the buffer the output writes?"""
    root = em.root(dst.buffer)
    return any(isinstance(o, ir.Access) and em.root(o.buffer) == root and o != dst for o in ins)


def scratch_bytes(kernel: ir.Kernel, instr: ir.Instr) -> int:
    bufs = kernel.buffer_map
    if instr.op == "nc_matmul":
        return instr.out.shape[0] * instr.out.shape[1] * 4
    if instr.op == "device_print":
        acc = instr.ins[0]
        n = 1
        for s in acc.shape:
            n *= s
        return n * D.itemsize(bufs[acc.buffer].dtype)
    if not instr.outs:
        return 0
    dst = instr.outs[0]
    root = bufs[dst.buffer].base or dst.buffer
    if any(isinstance(o, ir.Access) and (bufs[o.buffer].base or o.buffer) == root and o != dst for o in instr.ins):
        n = 1
        for s in dst.shape:
            n *= s
        return n * D.itemsize(bufs[dst.buffer].dtype)
    return 0


def elementwise(em, instr: ir.Instr, ctx, ins, value_fn, *, reduce_op: str | None = None,
                reduce_dom: str = "f32") -> None:
    """Emit `dst[e] = value_fn(env)` over the destination's shape, honouring mask, bounds, aliasing.

    value_fn(env) returns the *storage* value to store (already converted). With `reduce_op`, a
    second output `instr.outs[1]` ([P, 1]) receives the 16-lane reduction over the free axes of the
    fp32 values that value_fn records in `em.row_value` (masked-off elements count as identity).
    """
    B = em.b
    dst = instr.outs[0]
    shape = dst.shape
    accesses = [dst] + list(ins) + list(instr.outs[1:])
    slow = em.check_bounds(instr, ctx, accesses, None)
    two_phase = _aliases(em, dst, ins)
    ty = em.storage(dst.buffer)
    item = D.itemsize(em.dtype(dst))
    flat = flat_axes(shape, 0, None)
    lanes = Lanes(em, reduce_op) if reduce_op else None
    rows = RowAny(em, instr.mask is not None and lanes is not None)
    with B.loop(shape[0], "p") if shape[0] > 1 else contextlib.nullcontext("0") as p:
        env0 = {**ctx.env, axis_var(0): p}
        if lanes:
            lanes.reset()
            rows.reset()
        with em.elements(shape, env0, start=1) as env:
            live = em.mask_value(instr.mask, env)
            em.check_element(slow, live, ctx, env, accesses)
            ctxm = B.if_(live, "m") if live is not None else contextlib.nullcontext()
            with ctxm:
                em.row_value = None
                v = value_fn(env)
                if two_phase:
                    off = em.affine(flat, env)
                    sp = em.scratch_ptr()
                    q = B.op(f"getelementptr inbounds {ty}, ptr {sp}, i64 {off}")
                    B.emit(f"store {ty} {v}, ptr {q}, align {item}")
                else:
                    em.store_raw(dst, env, v)
                if lanes:
                    k = em.affine(flat_axes(shape, 1, None), env)
                    lanes.add(k, em.row_value)
                    rows.mark()
        if lanes:
            r = lanes.combine()
            racc = instr.outs[1]
            renv = {**ctx.env, axis_var(0): p, axis_var(1): "0"}
            rdt = em.dtype(racc)
            with rows.guard():
                em.store_raw(racc, renv, em.from_f32(em.canon(r), rdt))
    if two_phase:
        with em.elements(shape, ctx.env) as env:
            live = em.mask_value(instr.mask, env)
            with (B.if_(live, "m2") if live is not None else contextlib.nullcontext()):
                off = em.affine(flat, env)
                sp = em.scratch_ptr()
                q = B.op(f"getelementptr inbounds {ty}, ptr {sp}, i64 {off}")
                v = B.op(f"load {ty}, ptr {q}, align {item}")
                em.store_raw(dst, env, v)
