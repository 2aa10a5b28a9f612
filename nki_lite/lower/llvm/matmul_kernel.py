"""The register-blocked fp32 matmul micro-kernel behind a PSUM accumulation chain (matmul_chain.py).

Contract: `function(sig) -> (name, text)` is one internal LLVM function

    void @<name>({ptr C_t, i64 ldc_t} per output t, ptr PA, ptr PB,
                 { ptr B, i64 b_step, i64 b_ld, { ptr A_t, i64 a_step_t, i64 a_ld_t } per output } per piece)

that adds, for every output t (`sig.outs` PSUM tiles that share the moving operand) and element
C_t[m, n] (m < sig.M, n < sig.N, row stride ldc_t), the products of each piece in order: piece p
runs `count` iterations j, iteration j reads the fp32 operands A_j = A_t + j*a_step_t ([K, M], row
stride a_ld_t) and B_j = B + j*b_step ([K, N], row stride b_ld), and
for k in [start, K) does acc = acc + A_j[k, m] * B_j[k, n] — one fused multiply-add when the
piece's `fma` flag is set, else a multiply then an add. The accumulator starts at C's value
(init "psum") or at the first piece's k = 0 product (init "product", that piece then starts at
k = 1), and is stored back once, NaN canonicalised. So every element is summed in exactly the order
of the instructions one by one (runtime/interpret_compute.py `_nc_matmul`), whatever the blocking.

Packing: the operands are copied, in chain order, into contiguous panels in the caller's scratch:
PB (depth x N rounded up to L floats: each column strip's columns contiguous) once, shared by every
output, then, output after output, PA (depth x M floats: each row block's rows contiguous) just
before that output's blocks read it — so the inner loop streams both from cache in order
(LLVM_NOTES §1b: packing) and the panel of A is read while it is still in L2.

Blocking: the output is cut into MR x (NR*L) register blocks of `sig.geom` (`Geometry`: L-lane
vectors, chosen for the host by `host_geometry()` — 12 x 2 zmm with AVX-512, 6 x 2 ymm with AVX2
only — and part of the function's name). The accumulators are <L x float> values that stay in
registers across every piece and k (an alloca with constant indices that LLVM promotes),
MR*NR + NR + 1 <= the register count so nothing spills (LLVM_NOTES §1) — column strips outside,
row blocks inside (a strip of B is reused from cache by every row block), one output after
another; a ragged row tail is a block with fewer rows, a ragged column tail a strip of fewer
vectors whose last vector is loaded and stored with a lane mask (the masked-off lanes are never
stored). The geometry changes the speed only: every element's sum runs in the same k order.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ...core.bits import CANON_NAN
from .irbuilder import FnBuilder, f32_bits

MAX_LANES = 16        # the widest vector any geometry uses (scratch sizes round N up to it)
UNROLL = 4            # contraction rows per trip of a register block's k loop


@dataclass(frozen=True)
class Geometry:
    """Vector width and register block: MR rows x NR vectors of `lanes` floats. MR*NR accumulators +
    NR B vectors + 1 broadcast must fit the vector register file, or LLVM spills and the kernel runs
    at half speed or worse (LLVM_NOTES §1: 33 live zmm ran 2x slower)."""
    lanes: int
    mr: int
    nr: int

    @property
    def vt(self) -> str:
        return f"<{self.lanes} x float>"


# AVX-512: 32 zmm -> 12 x 2 zmm (24 + 2 + 1 = 27). Two vectors wide, a strip is 32 columns, which
# divides the 512-column PSUM tile (8 x 3 left a 2-vector tail strip per tile), and the strip of B
# over a KC = 256 group (256 x 32 floats, 32 KiB) stays in a 48 KiB L1 while every row block of the
# tile reads it (8 x 3: 48 KiB, from L2). Measured on the Xeon host (family 6 model 167, loaded
# machine, stdlib.matmul fp32 2048^3, one thread, in-process interleaved): 8 x 3 / KC 512 117-131
# GFLOP/s, 12 x 2 / 256 129-141, 14 x 2 / 256 the same within noise, 6 x 4 and 4 x 6 slower.
# AVX2 only (16 ymm: e.g. a Zen 3 or a VM that hides AVX-512): <16 x float> would be split into ymm
# pairs and 12 x 2 of them need 48 accumulators; 6 x 2 ymm (12 + 2 + 1 = 15) is the classic Haswell
# sgemm block
WIDE = Geometry(16, 12, 2)
NARROW = Geometry(8, 6, 2)


@functools.lru_cache(maxsize=None)
def host_geometry() -> Geometry:
    from .target import has_feature
    return WIDE if has_feature("avx512f") else NARROW


@dataclass(frozen=True)
class Piece:
    K: int            # contraction depth of one iteration
    count: int        # iterations (consecutive instructions of one loop, or 1)
    start: int        # first k (1 for the product-initialised first piece)
    fma: bool


@dataclass(frozen=True)
class Sig:
    M: int
    N: int
    init: str                      # "psum" | "product"
    pieces: tuple[Piece, ...]
    outs: int = 1                  # PSUM tiles sharing the moving operand B (each its own A)
    geom: Geometry = field(default_factory=lambda: host_geometry())   # (looked up per call: tests patch it)

    @property
    def name(self) -> str:
        p = "_".join(f"{q.K}x{q.count}{'s' if q.start else ''}{'f' if q.fma else 'm'}" for q in self.pieces)
        g = self.geom
        return (f"nkl_mmk_{self.M}x{self.N}x{self.outs}_{'c' if self.init == 'psum' else 'x'}_{p}"
                f"_g{g.lanes}x{g.mr}x{g.nr}")


def _strips(N: int, g: Geometry) -> list[tuple[int, int, int, int]]:
    """Column strips (first column, count of repeats, vectors per strip, lanes of its last vector)."""
    L = g.lanes
    nv = -(-N // L)
    part = N % L or L
    full, rest = divmod(nv, g.nr)
    out = []
    if rest == 0 and part < L:             # the last full strip holds the partial vector
        full, rest = full - 1, g.nr
    if full:
        out.append((0, full, g.nr, L))
    if rest:
        out.append((full * g.nr * L, 1, rest, part))
    return out


def _rows(M: int, g: Geometry) -> list[tuple[int, int, int]]:
    """Row blocks (first row, count of repeats, rows per block)."""
    full, rest = divmod(M, g.mr)
    return ([(0, full, g.mr)] if full else []) + ([(full * g.mr, 1, rest)] if rest else [])


class _Writer:
    def __init__(self, sig: Sig):
        self.sig, self.g = sig, sig.geom
        self.L, self.VT = sig.geom.lanes, sig.geom.vt
        self.b = FnBuilder()
        self.allocas: list[str] = []
        self.declares = {f"declare {self.VT} @llvm.fma.v{self.L}f32({self.VT}, {self.VT}, {self.VT})",
                         f"declare {self.VT} @llvm.masked.load.v{self.L}f32.p0(ptr, <{self.L} x i1>, {self.VT})",
                         f"declare void @llvm.masked.store.v{self.L}f32.p0({self.VT}, ptr, <{self.L} x i1>)"}

    def gep(self, base: str, *terms) -> str:
        """base + sum of (value, multiplier) terms (ints fold)."""
        b, off, const = self.b, None, 0
        for v, mul in terms:
            if isinstance(v, int) and isinstance(mul, int):
                const += v * mul
                continue
            if v == 0 or mul == 0:
                continue
            t = v if mul == 1 else mul if v == 1 else b.op(f"mul nsw i64 {v}, {mul}")
            off = t if off is None else b.op(f"add nsw i64 {off}, {t}")
        if const:
            off = str(const) if off is None else b.op(f"add nsw i64 {off}, {const}")
        return base if off is None else b.op(f"getelementptr inbounds float, ptr {base}, i64 {off}")

    def gep_i64(self, base: str, idx) -> str:
        return self.b.op(f"getelementptr inbounds i64, ptr {base}, i64 {idx}")

    def mask(self, lanes: int) -> str:
        return "<" + ", ".join(f"i1 {'true' if k < lanes else 'false'}" for k in range(self.L)) + ">"

    def vload(self, p: str, lanes: int) -> str:
        if lanes == self.L:
            return self.b.op(f"load {self.VT}, ptr {p}, align 4")
        return self.b.op(f"call {self.VT} @llvm.masked.load.v{self.L}f32.p0(ptr align 4 {p}, <{self.L} x i1> "
                         f"{self.mask(lanes)}, {self.VT} zeroinitializer)")

    def vstore(self, v: str, p: str, lanes: int) -> None:
        if lanes == self.L:
            self.b.emit(f"store {self.VT} {v}, ptr {p}, align 4")
        else:
            self.b.emit(f"call void @llvm.masked.store.v{self.L}f32.p0({self.VT} {v}, ptr align 4 {p}, <{self.L} x i1> "
                        f"{self.mask(lanes)})")

    def splat(self, s: str) -> str:
        v = self.b.op(f"insertelement {self.VT} poison, float {s}, i64 0")
        return self.b.op(f"shufflevector {self.VT} {v}, {self.VT} poison, <{self.L} x i32> zeroinitializer")

    def mac(self, a: str, bv: str, acc: str, fma: bool) -> str:
        if fma:
            return self.b.op(f"call {self.VT} @llvm.fma.v{self.L}f32({self.VT} {a}, {self.VT} {bv}, {self.VT} {acc})")
        return self.b.op(f"fadd {self.VT} {acc}, {self.b.op(f'fmul {self.VT} {a}, {bv}')}")

    def offsets(self):
        """(piece, its first packed row) for every piece: the packed panels hold every piece's rows
        one after the other, in chain order."""
        out, off = [], 0
        for p, piece in enumerate(self.sig.pieces):
            out.append((p, off))
            off += piece.K * piece.count
        return out, off

    def each_row(self, body) -> None:
        """body(p, jj, k, kk): every contraction row of every piece iteration, kk its packed row."""
        b = self.b
        for p, off in self.offsets()[0]:
            piece = self.sig.pieces[p]
            with b.loop(piece.count, f"qj{p}_") if piece.count > 1 else _const(0) as jj:
                with b.loop(piece.K, f"qk{p}_") as k:
                    kk = self.add(self.add(k, off), self.mul(jj, piece.K))
                    body(p, jj, k, kk)

    def add(self, x, y):
        if isinstance(x, int) and isinstance(y, int):
            return x + y
        if y == 0 or x == 0:
            return y if x == 0 else x
        return self.b.op(f"add nsw i64 {x}, {y}")

    def mul(self, x, c: int):
        if isinstance(x, int):
            return x * c
        return x if c == 1 else self.b.op(f"mul nsw i64 {x}, {c}")

    def pack_a(self, depth: int, a_args: list) -> None:
        """One output's PA: each row block's [depth, mr] slice of A contiguous at PA + r0*depth.
        a_args[p] = (pointer, step, row stride) of the output's A in piece p (SSA values)."""
        b, M = self.b, self.sig.M

        def body(p, jj, k, kk):
            ap, astep, ald = a_args[p]
            src = self.gep(ap, (jj, astep), (k, ald))
            for r0, nrow, mr in _rows(M, self.g):
                vt = f"<{mr} x float>"
                with b.loop(nrow, "pa") if nrow > 1 else _const(0) as rb:
                    r = self.add(self.mul(rb, mr), r0)
                    v = b.op(f"load {vt}, ptr {self.gep(src, (r, 1))}, align 4")
                    dst = self.gep("%PA", (r, depth), (kk, mr))
                    b.emit(f"store {vt} {v}, ptr {dst}, align 4")
        self.each_row(body)

    def pack_b(self, c0, nr: int, last: int, depth: int) -> None:
        """The strip's [depth, nr*16] slice of B contiguous at PB + c0*depth (a partial last vector
        zero-filled)."""
        b = self.b

        def body(p, jj, k, kk):
            src = self.gep(f"%B{p}", (jj, f"%bs{p}"), (k, f"%bld{p}"), (c0, 1))
            for v in range(nr):
                x = self.vload(self.gep(src, (v * self.L, 1)), last if v == nr - 1 else self.L)
                dst = self.gep("%PB", (c0, depth), (kk, nr * self.L), (v * self.L, 1))
                b.emit(f"store {self.VT} {x}, ptr {dst}, align 4")
        self.each_row(body)

    def block(self, r0, c0, mr: int, nr: int, last: int, depth: int, t) -> None:
        """One mr x nr*16 register block at rows r0.., columns c0.. (SSA values or ints), reading
        the packed panels."""
        b, sig = self.b, self.sig
        lanes = [self.L] * (nr - 1) + [last]
        slots = f"%uk{len(self.allocas)}"
        self.allocas.append(f"  {slots} = alloca [{mr * nr} x {self.VT}], align 64")

        def slot(i, j):
            return b.op(f"getelementptr inbounds [{mr * nr} x {self.VT}], ptr {slots}, i64 0, i64 {i * nr + j}")
        C, ldc, pa_t = t                      # this output's C, row stride, packed A
        crow = [self.gep(C, (r0, ldc), (i, ldc)) for i in range(mr)]
        cptr = [[self.gep(crow[i], (c0, 1), (j * self.L, 1)) for j in range(nr)] for i in range(mr)]
        if sig.init == "psum":
            for i in range(mr):
                for j in range(nr):
                    b.emit(f"store {self.VT} {self.vload(cptr[i][j], lanes[j])}, ptr {slot(i, j)}, align 64")
        pa = self.gep(pa_t, (r0, depth))
        pb = self.gep("%PB", (c0, depth))
        for p, off in self.offsets()[0]:
            piece = sig.pieces[p]
            with b.loop(piece.count, f"pj{p}_") if piece.count > 1 else _const(0) as jj:
                row0 = self.add(self.mul(jj, piece.K), off)
                if p == 0 and sig.init == "product":
                    self._step(pa, pb, p, row0, mr, nr, slot, first=True)
                # UNROLL rows per loop trip (the loop's counter and pointer steps once per UNROLL
                # rows), then the remainder; the rows still run in k order
                n = piece.K - piece.start
                with b.loop(n // UNROLL, f"k{p}_") as k0:
                    for u in range(UNROLL):
                        kk = self.add(self.add(self.mul(k0, UNROLL), piece.start + u), row0)
                        self._step(pa, pb, p, kk, mr, nr, slot, first=False)
                for u in range(n // UNROLL * UNROLL, n):
                    self._step(pa, pb, p, self.add(piece.start + u, row0), mr, nr, slot, first=False)
        canon = f32_bits(CANON_NAN)
        for i in range(mr):
            for j in range(nr):
                v = b.op(f"load {self.VT}, ptr {slot(i, j)}, align 64")
                nan = b.op(f"fcmp uno {self.VT} {v}, zeroinitializer")
                v = b.op(f"select <{self.L} x i1> {nan}, {self.VT} splat (float {canon}), {self.VT} {v}")
                self.vstore(v, cptr[i][j], lanes[j])

    def _step(self, pa, pb, p, kk, mr, nr, slot, first: bool) -> None:
        """One packed row kk: nr vectors of B, mr broadcasts of A, mr*nr multiply-adds (or, for the
        product-initialised first row, products)."""
        b, fma = self.b, self.sig.pieces[p].fma
        brow = self.gep(pb, (kk, nr * self.L))
        bv = [b.op(f"load {self.VT}, ptr {self.gep(brow, (j * self.L, 1))}, align 4") for j in range(nr)]
        arow = self.gep(pa, (kk, mr))
        for i in range(mr):
            a = self.splat(b.op(f"load float, ptr {self.gep(arow, (i, 1))}, align 4"))
            for j in range(nr):
                q = slot(i, j)
                if first:
                    v = b.op(f"fmul {self.VT} {a}, {bv[j]}")
                else:
                    v = self.mac(a, bv[j], b.op(f"load {self.VT}, ptr {q}, align 64"), fma)
                b.emit(f"store {self.VT} {v}, ptr {q}, align 64")

    def strips(self, body) -> None:
        b = self.b
        for c0, nc, nr, last in _strips(self.sig.N, self.g):
            with b.loop(nc, "cs") if nc > 1 else _const(0) as cs:
                body(self.add(self.mul(cs, nr * self.L), c0), nr, last)

    def row_blocks(self, cexpr, nr: int, last: int, depth: int, t) -> None:
        b = self.b
        for r0, nrow, mr in _rows(self.sig.M, self.g):
            with b.loop(nrow, "rb") if nrow > 1 else _const(0) as rb:
                self.block(self.add(self.mul(rb, mr), r0), cexpr, mr, nr, last, depth, t)

    def table(self, values: list[str]) -> str:
        """An entry alloca of i64s holding `values` (pointers converted), for a run-time loop to index."""
        b = self.b
        name = f"%tab{len(self.allocas)}"
        self.allocas.append(f"  {name} = alloca [{len(values)} x i64], align 8")
        for k, v in enumerate(values):
            if v.startswith("ptr "):
                v = b.op(f"ptrtoint ptr {v[4:]} to i64")
            b.emit(f"store i64 {v}, ptr {self.gep_i64(name, k)}, align 8")
        return name

    def entry(self, table: str, idx, as_ptr: bool):
        v = self.b.op(f"load i64, ptr {self.gep_i64(table, idx)}, align 8")
        return self.b.op(f"inttoptr i64 {v} to ptr") if as_ptr else v

    def text(self) -> str:
        sig, b = self.sig, self.b
        depth = self.offsets()[1]
        self.strips(lambda cexpr, nr, last: self.pack_b(cexpr, nr, last, depth))
        # one output at a time: its A packed right before its blocks (so the packed panel is hot in
        # L2, not written for every output first and evicted by the others' before it is read) and
        # its C; a run-time loop over the outputs (their pointers and strides from small tables), so
        # the code is one copy whatever sig.outs is
        T, P = sig.outs, len(sig.pieces)
        ctab = self.table([v for t in range(T) for v in (f"ptr %C{t}", f"%ldc{t}")])
        atab = self.table([v for t in range(T) for p in range(P)
                           for v in (f"ptr %A{p}_{t}", f"%as{p}_{t}", f"%ald{p}_{t}")])
        with b.loop(T, "to") if T > 1 else _const(0) as t:
            two = self.mul(t, 2)
            C, ldc = self.entry(ctab, two, True), self.entry(ctab, self.add(two, 1), False)
            a_args = []
            for p in range(P):
                at = self.add(self.mul(t, 3 * P), 3 * p)
                a_args.append((self.entry(atab, at, True), self.entry(atab, self.add(at, 1), False),
                               self.entry(atab, self.add(at, 2), False)))
            self.pack_a(depth, a_args)
            self.strips(lambda cexpr, nr, last: self.row_blocks(cexpr, nr, last, depth, (C, ldc, "%PA")))
        b.emit("ret void")
        params = ", ".join(f"ptr %C{t}, i64 %ldc{t}" for t in range(sig.outs)) + ", ptr noalias %PA, ptr noalias %PB"
        for p in range(len(sig.pieces)):
            params += f", ptr %B{p}, i64 %bs{p}, i64 %bld{p}" + "".join(
                f", ptr %A{p}_{t}, i64 %as{p}_{t}, i64 %ald{p}_{t}" for t in range(sig.outs))
        body = [b.lines[0]] + self.allocas + b.lines[1:]
        return ("\n".join(sorted(self.declares)) + "\n"
                + f"define internal void @{sig.name}({params}) nounwind {{\n" + "\n".join(body) + "\n}\n")


class _const:
    """A stand-in for a loop of one iteration: yields the constant index."""

    def __init__(self, v: int):
        self.v = v

    def __enter__(self):
        return self.v

    def __exit__(self, *exc):
        return False


def function(sig: Sig) -> tuple[str, str]:
    return sig.name, _Writer(sig).text()
