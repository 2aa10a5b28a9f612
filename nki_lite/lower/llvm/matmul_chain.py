"""PSUM accumulation chains: consecutive `nc_matmul`s into one PSUM tile, emitted as one fused
register-blocked loop (the accumulators stay in registers across instructions, not one C round trip
per 128-deep matmul).

Contract (bit-identical to the instructions one by one, runtime/interpret_compute.py `_nc_matmul`):
- `group(em, items) -> items`: in a body's schedule (codegen `Emitter.schedule`), a run of
  consecutive items that are each an `nc_matmul`, or a loop whose whole body
  is one `nc_matmul`, all writing the identical fp32 PSUM access (not indexed by those loops), all
  but the first with `accumulate=True` (a non-accumulating first one not inside a loop), and none
  reading the buffer it writes, becomes one `Chain`. A `Chain` is a list of its instructions, so the
  arena's live ranges (arena.py) see it as one unit; `Chain.segments` keeps the loops.
- `emit(em, chain, ctx)`: every member's bounds are checked first (each access, every loop value;
  a failure names the first failing member, and nothing was stored, as the interpreter stops there
  too); then the chain runs in groups of at most `KC` contraction rows (whole instructions): each
  group's operands that are not contiguous fp32 rows are widened once into the thread's scratch,
  then one call of matmul_kernel.py's micro-kernel adds the group's products to the PSUM tile in k
  order, instruction after instruction. Between groups the fp32 accumulator round-trips through
  the PSUM tile unrounded (only NaNs are canonicalised, and a NaN stays NaN through every later
  multiply-add), so the result is the instructions' one by one.
- Multiply-adds are fused (`llvm.fma`) when an operand is fp32 — the contract — and also when both
  operand formats have exact, finite fp32 products (fp8, fp16: `exact_products`), where a fused and
  an unfused multiply-add round the same exact value once.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ...core import dtypes as D
from ...core import ir
from ...core.affine import axis_var
from .context import LoopEnv
from . import matmul_kernel as MK

KC = 512              # contraction rows per fused group (LLVM_NOTES §1b: TK = 512 reaches numpy parity)


@dataclass(frozen=True)
class Segment:
    instr: ir.Instr
    loop: ir.Loop | None          # the loop whose whole body the instruction is, or None

    @property
    def trip(self) -> int:
        return self.loop.trip if self.loop is not None else 1

    @property
    def K(self) -> int:
        return self.instr.ins[0].shape[0]


class Chain(list):
    """The member instructions (one liveness unit); `segments` in program order."""

    def __init__(self, segments):
        super().__init__(s.instr for s in segments)
        self.segments = list(segments)


def exact_products(da: str, db: str) -> bool:
    """Every product of a da value and a db value is an fp32 number (no rounding, no overflow)."""
    ia, ib = D.INFO[da], D.INFO[db]
    if not (ia.is_float and ib.is_float) or "float32" in (da, db) or da == "tfloat32" or db == "tfloat32":
        return False
    if ia.man_bits + ib.man_bits + 2 > 24:
        return False
    bias_a, bias_b = 2 ** (ia.exp_bits - 1) - 1, 2 ** (ib.exp_bits - 1) - 1
    lowest = (1 - bias_a - ia.man_bits) + (1 - bias_b - ib.man_bits)     # log2 of the smallest subnormals' product
    highest = (bias_a + 2) + (bias_b + 2)                                 # bounds log2 of the largest product
    return lowest >= -149 and highest <= 127


def uses_fma(em, instr: ir.Instr) -> bool:
    da, db = em.dtype(instr.ins[0]), em.dtype(instr.ins[1])
    return "float32" in (da, db) or exact_products(da, db)


def chainable(em, instr) -> bool:
    """An nc_matmul the fused path handles: fp32 destination with contiguous, non-overlapping rows,
    no empty dimension, operands not in the destination's buffer."""
    if not isinstance(instr, ir.Instr) or instr.op != "nc_matmul" or not em.vectorize:
        return False
    dst, (s, m) = instr.out, instr.ins
    if em.dtype(dst) != "float32" or 0 in s.shape or 0 in m.shape:
        return False
    flat = em.flat_index(dst)
    if flat.coeff(axis_var(1)) != 1 or (dst.shape[0] > 1 and flat.coeff(axis_var(0)) < dst.shape[1]):
        return False
    return all(isinstance(o, ir.Access) and em.root(o.buffer) != em.root(dst.buffer) for o in (s, m))


def _segment(em, node) -> Segment | None:
    if isinstance(node, ir.Instr):
        return Segment(node, None) if chainable(em, node) else None
    # (such a loop is never a parallel region: every iteration accumulates into a tile from outside it)
    if (isinstance(node, ir.Loop) and len(node.body) == 1 and node.trip >= 1
            and chainable(em, node.body[0]) and node.body[0].attr("accumulate")
            and node.var not in node.body[0].out.vars()):
        return Segment(node.body[0], node)
    return None


def group(em, items) -> list:
    out: list = []
    cur: list[Segment] = []

    def flush():
        if cur:
            out.append(Chain(cur))
            cur.clear()
    for it in items:
        seg = _segment(em, it) if not isinstance(it, list) else None
        if seg is None:
            flush()
            out.append(it)
            continue
        if cur and seg.instr.out == cur[0].instr.out and seg.instr.attr("accumulate"):
            cur.append(seg)
            continue
        flush()
        if seg.loop is None or seg.instr.attr("accumulate"):
            cur.append(seg)
        else:
            out.append(it)
    flush()
    return out


# ---------------------------------------------------------------- emission

def _env(ctx, seg: Segment, it) -> dict:
    return {**ctx.env, seg.loop.var: it} if seg.loop is not None else dict(ctx.env)


def _check(em, ctx, seg: Segment) -> None:
    instr = seg.instr
    accesses = (instr.out,) + tuple(instr.ins)
    if seg.loop is None:
        em.check_bounds(instr, ctx, accesses, None)
        return
    with em.b.loop(seg.trip, "cb") as i:
        em.check_bounds(instr, LoopEnv(_env(ctx, seg, i), ctx.names + [seg.loop.var]), accesses, None)


def _plan(segs) -> list:
    """Groups: ("loop", seg, G, n) runs n groups of G iterations of a loop segment (starting at 0),
    ("group", [(seg, first iteration, count)...]) one group of whole instructions."""
    out, pending, depth = [], [], 0

    def flush():
        nonlocal pending, depth
        if pending:
            out.append(("group", pending))
        pending, depth = [], 0
    for seg in segs:
        kd, t = seg.K, seg.trip
        if depth + kd * t <= KC or (not pending and seg.loop is None):
            pending.append((seg, 0, t))
            depth += kd * t
            continue
        flush()
        if seg.loop is None:
            pending, depth = [(seg, 0, 1)], kd
            continue
        g = max(1, KC // kd)
        if t // g:
            out.append(("loop", seg, g, t // g))
        if t % g:
            pending, depth = [(seg, t // g * g, t % g)], kd * (t % g)
    flush()
    return out


def emit(em, chain: Chain, ctx) -> None:
    segs = chain.segments
    for seg in segs:
        _check(em, ctx, seg)
    first = segs[0].instr
    dst = first.out
    init = "psum" if first.attr("accumulate") else "product"
    C = em.elem_ptr(dst, {**ctx.env, axis_var(0): "0", axis_var(1): "0"})
    ldc = em.flat_index(dst).coeff(axis_var(0))
    for g in _plan(segs):
        if g[0] == "loop":
            _, seg, G, n = g
            with em.b.loop(n, "kg") as gi:
                lo = em.b.op(f"mul nsw i64 {gi}, {G}")
                _call(em, ctx, C, ldc, [(seg, lo, G)], init)
        else:
            _call(em, ctx, C, ldc, g[1], init)
        init = "psum"


def _view(em, acc: ir.Access, env: dict, var: str | None, count: int, cursor: list):
    """(pointer at the first iteration, elements per iteration, row stride) of an operand as fp32
    rows: the tile itself when it already is contiguous fp32, else widened once per iteration into
    the scratch at `cursor` (bytes, advanced)."""
    from .rules_matmul import to_scratch_f32
    flat = em.flat_index(acc)
    R, Cn = acc.shape
    row = flat.coeff(axis_var(0))
    zero = {axis_var(0): "0", axis_var(1): "0"}
    if em.dtype(acc) == "float32" and flat.coeff(axis_var(1)) == 1 and (row >= Cn or R == 1):
        return em.elem_ptr(acc, {**env, **zero}), (flat.coeff(var) if var else 0), row
    base = em.scratch_ptr(cursor[0])
    cursor[0] += count * R * Cn * 4
    b = em.b
    with (b.loop(count, "dq") if count > 1 else contextlib.nullcontext(0)) as j:
        it_env = dict(env)
        if var is not None and count > 1:
            it_env[var] = b.op(f"add nsw i64 {env[var]}, {j}")
        dst = b.op(f"getelementptr inbounds float, ptr {base}, i64 {b.op(f'mul nsw i64 {j}, {R * Cn}')}") \
            if count > 1 else base
        to_scratch_f32(em, acc, it_env, dst)
    return base, R * Cn, Cn


def _call(em, ctx, C: str, ldc: int, pieces, init: str) -> None:
    cursor = [0]
    args, sig_pieces = [f"ptr {C}", f"i64 {ldc}"], []
    for p, (seg, lo, count) in enumerate(pieces):
        var = seg.loop.var if seg.loop is not None else None
        env = _env(ctx, seg, str(lo))
        s, m = seg.instr.ins
        for acc in (s, m):
            ptr, step, ld = _view(em, acc, env, var, count, cursor)
            args += [f"ptr {ptr}", f"i64 {step}", f"i64 {ld}"]
        start = 1 if (p == 0 and init == "product") else 0
        sig_pieces.append(MK.Piece(seg.K, count, start, uses_fma(em, seg.instr)))
    first = pieces[0][0].instr.out
    sig = MK.Sig(first.shape[0], first.shape[1], init, tuple(sig_pieces))
    name = em.use(MK.function(sig))
    em.b.emit(f"call void @{name}({', '.join(args)})")


def scratch_bytes(K: int, M: int, N: int) -> int:
    """Scratch a group may need for widened operands (groups hold at most max(KC, K) rows)."""
    return max(KC, K) * (M + N) * 4
