"""Shared pieces of the llvm rules: compute domains, ALU ops in IR, the elementwise emitter, lanes.

Every helper mirrors the numpy definition in runtime/interpret_*.py and numerics/alu.py:
fp32 ALU steps (fadd/fsub/fmul/fdiv, llvm.maximum/minimum for IEEE max/min, comparisons to 1.0/0.0),
int64 steps on the integer path, the 16-lane reduction order, NaN canonicalisation at the end.
"""
from __future__ import annotations

import contextlib

from ...core import dtypes as D
from ...numerics import alu
from ...core import ir
from ...core.affine import Affine, axis_var
from ...core.ops import OPS
from .irbuilder import f32, f32_bits

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
    """One ALU step `op(a, b)` in the given domain (f32 or i64), scalar or <W x ...> (em.W). `width` is
    the output dtype's bit width: right_shift is logical at that width (NKI has no arithmetic shift)."""
    B = em.b
    if op == "abs":
        return _abs(em, a, dom)
    if dom == "i64":
        I, I1 = em.vt("i64"), em.vt("i1")
        zero = em.splat("0", "i64")
        if op in _IARITH:
            return B.op(f"{_IARITH[op]} {I} {a}, {b_}")
        if op in ("fmod", "mod"):                 # numerics/alu.py: a zero divisor gives 0
            zero_b = B.op(f"icmp eq {I} {b_}, {zero}")
            safe = B.op(f"select {em.vt('i1')} {zero_b}, {I} {em.splat('1', 'i64')}, {I} {b_}")
            r = B.op(f"srem {I} {a}, {safe}")      # truncated (the sign of a); |values| < 2^33: no overflow
            if op == "mod":                        # floored: a non-zero r with the other sign moves by b
                other = B.op(f"xor {em.vt('i1')} {B.op(f'icmp slt {I} {r}, {zero}')}, "
                             f"{B.op(f'icmp slt {I} {safe}, {zero}')}")
                fix = B.op(f"and {em.vt('i1')} {B.op(f'icmp ne {I} {r}, {zero}')}, {other}")
                r = B.op(f"select {em.vt('i1')} {fix}, {I} {B.op(f'add {I} {r}, {safe}')}, {I} {r}")
            return B.op(f"select {em.vt('i1')} {zero_b}, {I} {zero}, {I} {r}")
        if op in ("maximum", "minimum"):
            fn = f"llvm.s{op[:3]}.{em.sfx('i64')}"
            em.declare(f"declare {I} @{fn}({I}, {I})")
            return B.op(f"call {I} @{fn}({I} {a}, {I} {b_})")
        if op in _ICMP or op in _LOGIC:
            return _truth(B, op, a, b_, I, I1, "icmp", _ICMP, "ne", zero, "zext")
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            return B.op(f"{op[8:]} {I} {a}, {b_}")
        if op in ("left_shift", "right_shift"):
            mx, mn = f"llvm.smax.{em.sfx('i64')}", f"llvm.smin.{em.sfx('i64')}"
            em.declare(f"declare {I} @{mx}({I}, {I})")
            em.declare(f"declare {I} @{mn}({I}, {I})")
            lo = B.op(f"call {I} @{mx}({I} {b_}, {I} {zero})")
            sh = B.op(f"call {I} @{mn}({I} {lo}, {I} {em.splat('63', 'i64')})")
            if op == "right_shift" and width < 64:
                a = B.op(f"and {I} {a}, {em.splat(str((1 << width) - 1), 'i64')}")
            return B.op(f"{'shl' if op == 'left_shift' else 'ashr'} {I} {a}, {sh}")
        raise NotImplementedError(f"integer ALU op {op}")
    F, F1 = em.vt("float"), em.vt("i1")
    fzero = "zeroinitializer" if em.W > 1 else "0.0"
    if op in _FARITH:
        return B.op(f"{_FARITH[op]} {F} {a}, {b_}")
    if op in ("fmod", "mod"):
        r = B.op(f"frem {F} {a}, {b_}")         # C fmod: exact, so any correct fmod gives these bits
        if op == "fmod":
            return r
        # numerics/alu.py _mod: a non-zero r whose sign differs from b's becomes r + b; a zero r
        # takes b's sign
        r_neg = B.op(f"fcmp olt {F} {r}, {fzero}")
        b_neg = B.op(f"fcmp olt {F} {b_}, {fzero}")
        fix = B.op(f"and {F1} {B.op(f'fcmp une {F} {r}, {fzero}')}, {B.op(f'xor {F1} {r_neg}, {b_neg}')}")
        r = B.op(f"select {F1} {fix}, {F} {B.op(f'fadd {F} {r}, {b_}')}, {F} {r}")
        fn = f"llvm.copysign.{em.sfx('float')}"
        em.declare(f"declare {F} @{fn}({F}, {F})")
        signed_zero = B.op(f"call {F} @{fn}({F} {fzero}, {F} {b_})")
        return B.op(f"select {F1} {B.op(f'fcmp oeq {F} {r}, {fzero}')}, {F} {signed_zero}, {F} {r}")
    if op in ("maximum", "minimum"):
        # numerics/alu.py's _max/_min spelled out with compares and selects: +0 beats -0, a NaN
        # operand gives the canonical NaN. Not llvm.maximum/minimum: after optimisation its x86
        # lowering let a signalling-NaN operand through as the other value (tests/test_jit_regressions.py).
        I = em.vt("i32")
        first, second = ("ogt", "olt") if op == "maximum" else ("olt", "ogt")
        pick_a = B.op(f"fcmp {first} {F} {a}, {b_}")
        pick_b = B.op(f"fcmp {second} {F} {a}, {b_}")
        neg_a = B.op(f"icmp slt {I} {B.op(f'bitcast {F} {a} to {I}')}, {em.splat('0', 'i32')}")
        tie = (B.op(f"select {F1} {neg_a}, {F} {b_}, {F} {a}") if op == "maximum"
               else B.op(f"select {F1} {neg_a}, {F} {a}, {F} {b_}"))       # equal: only +-0 differ
        r = B.op(f"select {F1} {pick_b}, {F} {b_}, {F} {tie}")
        r = B.op(f"select {F1} {pick_a}, {F} {a}, {F} {r}")
        nan = B.op(f"fcmp uno {F} {a}, {b_}")
        return B.op(f"select {F1} {nan}, {F} {em.splat(f32_bits(0x7FC00000), 'float')}, {F} {r}")
    if op in _FCMP or op in _LOGIC:
        return _truth(B, op, a, b_, F, F1, "fcmp", _FCMP, "une", fzero, "uitofp")
    raise NotImplementedError(f"fp32 ALU op {op}")


def _abs(em, a: str, dom: str) -> str:
    """numerics/alu.py's abs: |a| (fp32: the sign bit cleared; i64: llvm.abs), the second operand ignored."""
    if dom == "i64":
        I = em.vt("i64")
        fn = f"llvm.abs.{em.sfx('i64')}"
        em.declare(f"declare {I} @{fn}({I}, i1)")
        return em.b.op(f"call {I} @{fn}({I} {a}, i1 false)")
    F = em.vt("float")
    fn = f"llvm.fabs.{em.sfx('float')}"
    em.declare(f"declare {F} @{fn}({F})")
    return em.b.op(f"call {F} @{fn}({F} {a})")


def _truth(B, op: str, a: str, b_: str, T: str, T1: str, cmp: str, preds: dict, nonzero: str, zero: str,
           widen: str) -> str:
    """A comparison (`preds[op]`) or a logical op on the operands' truth (!= 0), as 1 / 0 of type T."""
    if op in preds:
        c = B.op(f"{cmp} {preds[op]} {T} {a}, {b_}")
    else:
        ca = B.op(f"{cmp} {nonzero} {T} {a}, {zero}")
        cb = B.op(f"{cmp} {nonzero} {T} {b_}, {zero}")
        c = B.op(f"{_LOGIC[op]} {T1} {ca}, {cb}")
    return B.op(f"{widen} {T1} {c} to {T}")


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

    def add_chunk(self, val: str) -> None:
        """lanes = op(lanes, val) for one <16 x float> chunk (its elements are the lanes)."""
        B, VT = self.em.b, f"<{LANES} x float>"
        old = B.op(f"load {VT}, ptr {self.ptr}, align 64")
        B.emit(f"store {VT} {alu_op(self.em, self.op, old, val, 'f32')}, ptr {self.ptr}, align 64")

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
    if instr.op == "nc_matmul":                # fp32 accumulators + fp32 copies of both operands
        from .matmul_chain import scratch_bytes as chain_bytes   # or a fused chain's widened operands
        (K, M), N = instr.ins[0].shape, instr.ins[1].shape[1]
        return max((M * N + K * M + K * N) * 4, chain_bytes(K, M, N))
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


VECTOR_WIDTH = LANES          # 16: one <16 x float> register of AVX-512, and exactly the reduction lanes


def _vectorizable(em, instr, shape, ins, two_phase: bool, lanes) -> bool:
    """Innermost axis as <16 x T> vectors: contiguous destination, operands contiguous or broadcast
    along it, a mask (if any) that does not depend on it, and for a row reduction a 2-D tile (so
    16-element chunks are exactly the reduction lanes)."""
    if not em.vectorize or not OPS[instr.op].vector or two_phase or len(shape) < 2 or shape[-1] < VECTOR_WIDTH:
        return False
    vax = axis_var(len(shape) - 1)
    if instr.mask is not None and vax in instr.mask.vars():
        return False
    if lanes is not None and len(shape) != 2:
        return False
    if em.flat_index(instr.outs[0]).coeff(vax) != 1:
        return False
    return all(em.flat_index(o).coeff(vax) in (0, 1) for o in ins if isinstance(o, ir.Access))


def elementwise(em, instr: ir.Instr, ctx, ins, value_fn, *, reduce_op: str | None = None,
                reduce_dom: str = "f32") -> None:
    """Emit `dst[e] = value_fn(env)` over the destination's shape, honouring mask, bounds, aliasing.

    value_fn(env) returns the *storage* value to store (already converted), scalar or <16 x T> when
    the innermost axis is vectorised (em.W == 16). With `reduce_op`, a second output `instr.outs[1]`
    ([P, 1]) receives the 16-lane reduction over the free axes of the fp32 values that value_fn
    records in `em.row_value` (masked-off elements count as identity); vector chunks of 16 are the
    lanes themselves, so the order is the same as the scalar loop's.
    """
    if em.capturing is not None:                    # fusion asks for the value function only
        em.capturing.append((tuple(ins), value_fn))
        return
    B = em.b
    dst = instr.outs[0]
    shape = dst.shape or (1,)          # a 0-d view (`t[i, j] = v`): one element, no axis variable
    accesses = [dst] + list(ins) + list(instr.outs[1:])
    slow = em.check_bounds(instr, ctx, accesses, None)
    two_phase = _aliases(em, dst, ins)
    ty = em.storage(dst.buffer)
    item = D.itemsize(em.dtype(dst))
    flat = flat_axes(shape, 0, None)
    lanes = Lanes(em, reduce_op) if reduce_op else None
    rows = RowAny(em, instr.mask is not None and lanes is not None)
    vec = _vectorizable(em, instr, shape, ins, two_phase, lanes)

    def scalar_body(env):
        live = em.mask_value(instr.mask, env)
        em.check_element(slow, live, ctx, env, accesses)
        with (B.if_(live, "m") if live is not None else contextlib.nullcontext()):
            em.row_value = None
            v = value_fn(env)
            if two_phase:
                off = em.affine(flat, env)
                q = B.op(f"getelementptr inbounds {ty}, ptr {em.scratch_ptr()}, i64 {off}")
                B.emit(f"store {ty} {v}, ptr {q}, align {item}")
            else:
                em.store_raw(dst, env, v)
            if lanes:
                lanes.add(em.affine(flat_axes(shape, 1, None), env), em.row_value)
                rows.mark()

    def vector_row(env):
        """The innermost axis: 16-wide chunks, then a scalar tail."""
        vax = axis_var(len(shape) - 1)
        n = shape[-1]
        nv = n // VECTOR_WIDTH
        live = em.mask_value(instr.mask, env)          # uniform along the vector axis
        with (B.if_(live, "vm") if live is not None else contextlib.nullcontext()):
            with B.loop(nv, "vc") as c:
                start = B.op(f"mul nsw i64 {c}, {VECTOR_WIDTH}")
                venv = {**env, vax: start}
                with em.context(W=VECTOR_WIDTH, vaxis=vax):
                    em.row_value = None
                    v = value_fn(venv)
                    em.store_raw(dst, venv, v)
                    if lanes:
                        lanes.add_chunk(em.row_value)
                        rows.mark()
            if n % VECTOR_WIDTH:
                with B.loop(n - nv * VECTOR_WIDTH, "vt") as t:
                    scalar_body({**env, vax: B.op(f"add nsw i64 {t}, {nv * VECTOR_WIDTH}")})

    with em.partitions(shape[0], "p") as p:
        env0 = {**ctx.env, axis_var(0): p}
        if lanes:
            lanes.reset()
            rows.reset()
        if vec:
            with em.elements(shape, env0, start=1, stop=len(shape) - 1) as env:
                _vector_or_checked(em, slow, shape, env, vector_row, scalar_body)
        else:
            with em.elements(shape, env0, start=1) as env:
                scalar_body(env)
        if lanes:
            _store_reduction(em, instr.outs[1], {**ctx.env, axis_var(0): p, axis_var(1): "0"}, lanes, rows)
    if two_phase:
        _copy_back(em, instr, ctx, flat, ty, item)


def _store_reduction(em, racc: ir.Access, renv: dict, lanes: Lanes, rows: RowAny) -> None:
    """A row reduction's result (lanes combined, canonicalised) into its [P, 1] output."""
    r = lanes.combine()
    with rows.guard():
        em.store_raw(racc, renv, em.from_f32(em.canon(r), em.dtype(racc)))


def _vector_or_checked(em, slow, shape, env, vector_row, scalar_body) -> None:
    """One row of a vectorised elementwise instruction: the vector code, or — masked with a
    possible out-of-bounds element (`slow`) — a branch to the per-element checked scalar loop."""
    if slow is None:
        vector_row(env)
        return
    B = em.b
    fast = B.op(f"xor i1 {slow}, true")
    then, other, done = B.new_label("vf"), B.new_label("vs"), B.new_label("vd")
    B.cond_br(fast, then, other)
    B.block(then)
    vector_row(env)
    B.br(done)
    B.block(other)
    with B.loop(shape[-1], "sl") as i:
        scalar_body({**env, axis_var(len(shape) - 1): i})
    B.br(done)
    B.block(done)


def _copy_back(em, instr, ctx, flat, ty: str, item: int) -> None:
    """Second phase of an aliased elementwise instruction: the scratch copy into the destination."""
    B = em.b
    dst = instr.outs[0]
    # partition by partition through em.partitions: inside a row-major body only the current row
    # (a row-private destination has the storage of one row: row_private.py)
    with em.partitions((dst.shape or (1,))[0], "p2") as p, \
            em.elements(dst.shape, {**ctx.env, axis_var(0): p}, start=1) as env:
        live = em.mask_value(instr.mask, env)
        with (B.if_(live, "m2") if live is not None else contextlib.nullcontext()):
            off = em.affine(flat, env)
            q = B.op(f"getelementptr inbounds {ty}, ptr {em.scratch_ptr()}, i64 {off}")
            v = B.op(f"load {ty}, ptr {q}, align {item}")
            em.store_raw(dst, env, v)
