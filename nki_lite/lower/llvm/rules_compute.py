"""llvm rules for arithmetic: activation, tensor_tensor, tensor_scalar, scalar_tensor_tensor, select,
affine_select, tensor_tensor_scan, nc_matmul (mirrors runtime/interpret_*.py step for step)."""
from __future__ import annotations

import contextlib

from ...core import ir
from ...core.affine import axis_var
from ...core.ops import rule
from . import mathlib as ML
from .irbuilder import f32
from .rules_common import LANES, alu_op, alu_rev, domain, elementwise


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


def _to_scratch_f32(em, acc: ir.Access, env: dict, base: str) -> None:
    """Widen a 2-D operand tile [R, C] to a contiguous fp32 copy at `base` (decoded once per
    instruction, not once per use); 16-wide along C when the tile is contiguous there."""
    B = em.b
    R, C = acc.shape
    vec = em.vectorize and C >= LANES and em.flat_index(acc).coeff(axis_var(1)) == 1
    with B.loop(R, "dr") as r:
        row = B.op(f"mul nsw i64 {r}, {C}")
        nv = C // LANES if vec else 0
        if nv:
            with B.loop(nv, "dc") as c:
                start = B.op(f"mul nsw i64 {c}, {LANES}")
                with em.context(W=LANES, vaxis=axis_var(1)):
                    v = em.operand(acc, {**env, axis_var(0): r, axis_var(1): start}, "f32")
                q = B.op(f"getelementptr inbounds float, ptr {base}, i64 {B.op(f'add nsw i64 {row}, {start}')}")
                B.emit(f"store <{LANES} x float> {v}, ptr {q}, align 4")
        if C - nv * LANES:
            with B.loop(C - nv * LANES, "dt") as t:
                col = B.op(f"add nsw i64 {t}, {nv * LANES}")
                v = em.operand(acc, {**env, axis_var(0): r, axis_var(1): col}, "f32")
                q = B.op(f"getelementptr inbounds float, ptr {base}, i64 {B.op(f'add nsw i64 {row}, {col}')}")
                B.emit(f"store float {v}, ptr {q}, align 4")


# register blocks (rows x 16-column vectors) that fit 32 zmm: MR*NR accumulators + NR B vectors + 1
# broadcast (LLVM_NOTES: 33 live registers spill and run 2x slower)
_BLOCKS = ((8, 3), (6, 4), (8, 2), (4, 4), (4, 2), (2, 2), (1, 1))


def _block_shape(M: int, N: int) -> tuple[int, int]:
    """The block covering most of the M x N tile (the rest runs in the slower generic loop), larger
    blocks first on ties; (0, 0) when no block fits."""
    best, best_key = (0, 0), (0, 0)
    for mr, nr in _BLOCKS:
        if M < mr or N < nr * LANES:
            continue
        covered = (M // mr * mr) * (N // (nr * LANES) * nr * LANES)
        key = (covered, mr * nr)
        if key > best_key:
            best, best_key = (mr, nr), key
    return best


def _f32_view(em, acc: ir.Access, env: dict, scratch: str) -> tuple[str, int]:
    """(pointer to element [0, 0], row stride) of a 2-D operand as contiguous-row fp32: the operand
    itself when it already is (no copy), else a widened copy in `scratch`."""
    flat = em.flat_index(acc)
    R, C = acc.shape
    row = flat.coeff(axis_var(0))
    if em.dtype(acc) == "float32" and flat.coeff(axis_var(1)) == 1 and row >= C:
        return em.elem_ptr(acc, {**env, axis_var(0): "0", axis_var(1): "0"}), row
    _to_scratch_f32(em, acc, env, scratch)
    return scratch, C


@rule("llvm", "nc_matmul")
def _matmul(em, instr, ctx):
    """acc[m,n] starts at the PSUM value (accumulate) or the first product, then adds products in
    k order (fused multiply-add for fp32 inputs); finally canonicalise and store. Operands are
    widened to fp32 once; the n loop runs 16 columns at a time (each element's k order unchanged)."""
    mm = _Matmul(em, instr, ctx)
    mm.init_rows()
    if mm.K > mm.start:
        MR, NR = _block_shape(mm.M, mm.N)
        if em.vectorize and MR:
            mb, nb = mm.micro_kernel(MR, NR)
            mm.generic((0, mb), (nb, mm.N))      # right edge of the blocked rows
            mm.generic((mb, mm.M), (0, mm.N))    # bottom rows
        else:
            mm.generic((0, mm.M), (0, mm.N))
    mm.finish_rows()


class _Matmul:
    """The pieces of one nc_matmul's code: fp32 accumulators in scratch (`acc_base`, M x N), fp32
    views of both operands, the 16-wide column loops."""

    def __init__(self, em, instr, ctx):
        self.em, self.B, self.ctx = em, em.b, ctx
        self.dst = dst = instr.out
        s_acc, m_acc = instr.ins
        self.K, self.M = K, M = s_acc.shape
        self.N = N = m_acc.shape[1]
        em.check_bounds(instr, ctx, (dst, s_acc, m_acc), None)
        self.fma = em.dtype(s_acc) == "float32" or em.dtype(m_acc) == "float32"
        self.acc_base = em.scratch_ptr()
        self.s_base, self.s_stride = _f32_view(em, s_acc, ctx.env, em.scratch_ptr(M * N * 4))
        self.m_base, self.m_stride = _f32_view(em, m_acc, ctx.env, em.scratch_ptr(M * N * 4 + K * M * 4))
        self.nv = N // LANES if em.vectorize else 0
        VT = f"<{LANES} x float>"
        if self.fma:
            em.declare("declare float @llvm.fma.f32(float, float, float)")
            em.declare(f"declare {VT} @llvm.fma.v{LANES}f32({VT}, {VT}, {VT})")
        self.dst_vec = em.flat_index(dst).coeff(axis_var(1)) == 1     # PSUM row contiguous: vector init/finish
        self.accumulate = bool(instr.attr("accumulate"))
        self.start = 0 if self.accumulate else 1

    def at(self, base, row, ncols, col):
        B = self.B
        off = B.op(f"add nsw i64 {B.op(f'mul nsw i64 {row}, {ncols}')}, {col}")
        return B.op(f"getelementptr inbounds float, ptr {base}, i64 {off}")

    @staticmethod
    def ty(w):
        return f"<{LANES} x float>" if w > 1 else "float"

    def over_n(self, body, vec=True):
        """body(col, width) for 16-wide chunks then the scalar tail."""
        B, N = self.B, self.N
        n16 = self.nv if vec else 0
        if n16:
            with B.loop(n16, "mv") as c:
                body(B.op(f"mul nsw i64 {c}, {LANES}"), LANES)
        if N - n16 * LANES:
            with B.loop(N - n16 * LANES, "mt") as t:
                body(B.op(f"add nsw i64 {t}, {n16 * LANES}"), 1)

    def mac(self, sv, mv, old, w):
        """old + sv*mv: one fused multiply-add for fp32 inputs, else multiply then add (both exact
        per the contract: narrower inputs have exact fp32 products)."""
        B, ty = self.B, self.ty
        if self.fma:
            fn = "llvm.fma.f32" if w == 1 else f"llvm.fma.v{LANES}f32"
            return B.op(f"call {ty(w)} @{fn}({ty(w)} {sv}, {ty(w)} {mv}, {ty(w)} {old})")
        return B.op(f"fadd {ty(w)} {old}, {B.op(f'fmul {ty(w)} {sv}, {mv}')}")

    def init_rows(self):
        """The accumulators start at the PSUM value (accumulate) or the k = 0 product."""
        em, B, ty, at, N = self.em, self.B, self.ty, self.at, self.N
        with B.loop(self.M, "mm") as m:
            if self.accumulate:
                def init(col, w):
                    with em.context(W=w, vaxis=(axis_var(1) if w > 1 else None)):
                        v = em.operand(self.dst, {**self.ctx.env, axis_var(0): m, axis_var(1): col}, "f32")
                    B.emit(f"store {ty(w)} {v}, ptr {at(self.acc_base, m, N, col)}, align 4")
                self.over_n(init, self.dst_vec)
            else:
                s0 = B.op(f"load float, ptr {at(self.s_base, '0', self.s_stride, m)}, align 4")

                def init(col, w):
                    sv = s0 if w == 1 else _splat(em, s0)
                    mv = B.op(f"load {ty(w)}, ptr {at(self.m_base, '0', self.m_stride, col)}, align 4")
                    B.emit(f"store {ty(w)} {B.op(f'fmul {ty(w)} {sv}, {mv}')}, ptr {at(self.acc_base, m, N, col)}, "
                           "align 4")
                self.over_n(init)

    def generic(self, rows: tuple[int, int], cols: tuple[int, int]):
        """acc[rows, cols] += over k, accumulators in memory (16-wide along n, scalar tail)."""
        em, B, ty, at, N = self.em, self.B, self.ty, self.at, self.N
        (r0, r1), (c0, c1) = rows, cols
        if r1 <= r0 or c1 <= c0:
            return
        n16 = (c1 - c0) // LANES if em.vectorize else 0
        with B.loop(self.K - self.start, "mk") as k0:
            k = B.op(f"add nsw i64 {k0}, {self.start}")
            with B.loop(r1 - r0, "mm") as mi:
                m = B.op(f"add nsw i64 {mi}, {r0}")
                s1 = B.op(f"load float, ptr {at(self.s_base, k, self.s_stride, m)}, align 4")
                s16 = _splat(em, s1) if n16 else None

                def step(col, w):
                    q = at(self.acc_base, m, N, col)
                    old = B.op(f"load {ty(w)}, ptr {q}, align 4")
                    mv = B.op(f"load {ty(w)}, ptr {at(self.m_base, k, self.m_stride, col)}, align 4")
                    B.emit(f"store {ty(w)} {self.mac(s1 if w == 1 else s16, mv, old, w)}, ptr {q}, align 4")
                if n16:
                    with B.loop(n16, "gv") as c:
                        step(B.op(f"add nsw i64 {B.op(f'mul nsw i64 {c}, {LANES}')}, {c0}"), LANES)
                if (c1 - c0) - n16 * LANES:
                    with B.loop((c1 - c0) - n16 * LANES, "gt") as t:
                        step(B.op(f"add nsw i64 {t}, {c0 + n16 * LANES}"), 1)

    def micro_kernel(self, MR: int, NR: int):
        """Register-blocked MR x (NR*16) blocks: accumulators stay in registers across the whole k
        loop (an alloca with constant indices that LLVM promotes), each element still summed in k order."""
        em, B, at, M, N = self.em, self.B, self.at, self.M, self.N
        VT = f"<{LANES} x float>"
        nbm, nbn = M // MR, N // (NR * LANES)
        accs = em.entry_alloca(f"[{MR * NR} x {VT}]", "uk")

        def slot(i, j):
            return B.op(f"getelementptr inbounds [{MR * NR} x {VT}], ptr {accs}, i64 0, i64 {i * NR + j}")
        with B.loop(nbm, "bm") as bm:
            m0 = B.op(f"mul nsw i64 {bm}, {MR}")
            with B.loop(nbn, "bn") as bn:
                n0 = B.op(f"mul nsw i64 {bn}, {NR * LANES}")
                rows = [B.op(f"add nsw i64 {m0}, {i}") for i in range(MR)]
                cols = [B.op(f"add nsw i64 {n0}, {j * LANES}") for j in range(NR)]
                for i in range(MR):
                    for j in range(NR):
                        v = B.op(f"load {VT}, ptr {at(self.acc_base, rows[i], N, cols[j])}, align 4")
                        B.emit(f"store {VT} {v}, ptr {slot(i, j)}, align 64")
                with B.loop(self.K - self.start, "uk") as k0:
                    k = B.op(f"add nsw i64 {k0}, {self.start}")
                    bv = [B.op(f"load {VT}, ptr {at(self.m_base, k, self.m_stride, cols[j])}, align 4")
                          for j in range(NR)]
                    for i in range(MR):
                        a = _splat(em, B.op(f"load float, ptr {at(self.s_base, k, self.s_stride, rows[i])}, align 4"))
                        for j in range(NR):
                            q = slot(i, j)
                            old = B.op(f"load {VT}, ptr {q}, align 64")
                            B.emit(f"store {VT} {self.mac(a, bv[j], old, LANES)}, ptr {q}, align 64")
                for i in range(MR):
                    for j in range(NR):
                        v = B.op(f"load {VT}, ptr {slot(i, j)}, align 64")
                        B.emit(f"store {VT} {v}, ptr {at(self.acc_base, rows[i], N, cols[j])}, align 4")
        return nbm * MR, nbn * NR * LANES

    def finish_rows(self):
        """Canonicalise each accumulator and store it to the destination's dtype."""
        em, B = self.em, self.B
        with B.loop(self.M, "mm") as m:
            def fin(col, w):
                v = B.op(f"load {self.ty(w)}, ptr {self.at(self.acc_base, m, self.N, col)}, align 4")
                with em.context(W=w, vaxis=(axis_var(1) if w > 1 else None)):
                    em.store_raw(self.dst, {**self.ctx.env, axis_var(0): m, axis_var(1): col},
                                 _finish(em, self.dst, v, "f32"))
            self.over_n(fin, self.dst_vec)


def _splat(em, scalar: str) -> str:
    with em.context(W=LANES):
        return em.broadcast(scalar, "float")
