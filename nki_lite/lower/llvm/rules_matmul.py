"""llvm rule for nc_matmul (mirrors runtime/interpret_compute.py `_nc_matmul` step for step).

An fp32 destination goes through the fused path (matmul_chain.py, matmul_kernel.py): one
instruction is a chain of one; consecutive instructions into the same PSUM tile are grouped by the
code generator's schedule and emitted together. Other destinations (bf16/fp16 PSUM tiles, operands
inside the destination's buffer, the unvectorised mode) use `_Matmul`: fp32 accumulators in scratch,
operands widened once per instruction, a register-blocked micro-kernel for the bulk.
"""
from __future__ import annotations

from ...core import ir
from ...core.affine import axis_var
from ...core.ops import rule
from .matmul_chain import Chain, Step, chainable, to_scratch_f32
from .matmul_chain import emit as emit_chain
from .rules_common import LANES


def _finish(em, dst, val):
    """Canonicalise and convert to the destination's storage."""
    return em.from_f32(em.canon(val), em.dtype(dst))


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
    to_scratch_f32(em, acc, env, scratch)
    return scratch, C


@rule("llvm", "nc_matmul")
def _matmul(em, instr, ctx):
    """acc[m,n] starts at the PSUM value (accumulate) or the first product, then adds products in
    k order (fused multiply-add for fp32 inputs); finally canonicalise and store. The fused path
    (matmul_chain.py: a chain of one) handles fp32 destinations; `_Matmul` the rest."""
    if chainable(em, instr):
        emit_chain(em, Chain([Step((instr,), None)]), ctx)
        return
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
                                 _finish(em, self.dst, v))
            self.over_n(fin, self.dst_vec)


def _splat(em, scalar: str) -> str:
    with em.context(W=LANES):
        return em.broadcast(scalar, "float")
