"""PSUM accumulation chains: consecutive `nc_matmul`s into one PSUM tile, emitted as one fused
register-blocked loop (the accumulators stay in registers across instructions, not one C round trip
per 128-deep matmul).

Contract (bit-identical to the instructions one by one, runtime/interpret_compute.py `_nc_matmul`):
- `group(em, items) -> items`: in a body's schedule (codegen `Emitter.schedule`), a run of
  consecutive items that are each an `nc_matmul`, or a loop whose whole body
  is one `nc_matmul`, all writing the identical fp32 PSUM access (not indexed by those loops), all
  but the first with `accumulate=True` (a non-accumulating first one not inside a loop), and none
  reading the buffer it writes, becomes one `Chain`. A `Chain` is a list of its instructions, so the
  arena's live ranges (arena.py) see it as one unit; `Chain.steps` keeps the loops. A chain may
  feed up to MAX_OUTS PSUM tiles at once — a loop whose body is one accumulating nc_matmul per tile
  (the same shape, the same moving operand), then bare ones in the same pattern — as in a kernel
  that keeps several row tiles' accumulators live over one K loop: each tile's products are still
  summed in its own program order, and the shared moving operand is widened and packed once.
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

# contraction rows per fused group: the micro-kernel's B strip over a group (KC x 32 floats with
# AVX-512's 12 x 2 block) must stay in L1 while every row block reads it; 256 ran 5-8% faster than
# 512 on the Xeon host (matmul_kernel.py WIDE), 128 doubles the PSUM round trips and was slower
KC = 256


MAX_OUTS = 8          # PSUM tiles one chain may feed (each needs its packed A panel in scratch)


@dataclass(frozen=True)
class Step:
    """One item of a chain: nc_matmuls into distinct PSUM tiles with the same depth — consecutive
    bare instructions, or the whole body of a loop (run `trip` times)."""
    instrs: tuple
    loop: ir.Loop | None

    @property
    def trip(self) -> int:
        return self.loop.trip if self.loop is not None else 1

    @property
    def K(self) -> int:
        return self.instrs[0].ins[0].shape[0]

    @property
    def dsts(self) -> tuple:
        return tuple(i.out for i in self.instrs)

    def writing(self, dst) -> ir.Instr:
        return next(i for i in self.instrs if i.out == dst)


class Chain(list):
    """The member instructions (one liveness unit); `steps` in program order, `dsts` the PSUM tiles."""

    def __init__(self, steps):
        super().__init__(i for s in steps for i in s.instrs)
        self.steps = list(steps)
        self.dsts = steps[0].dsts


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


def _loop_step(em, node) -> Step | None:
    # (such a loop is never a parallel region: every iteration accumulates into tiles from outside it)
    body = node.body
    if node.dynamic or not (1 <= len(body) <= MAX_OUTS and node.trip >= 1 and all(chainable(em, i) for i in body)):
        return None
    if not all(i.attr("accumulate") and node.var not in i.out.vars() for i in body):
        return None
    step = Step(tuple(body), node)
    return step if _distinct(em, step.dsts) and len({i.ins[0].shape[0] for i in body}) == 1 else None


def _distinct(em, dsts) -> bool:
    return len({em.root(d.buffer) for d in dsts}) == len(dsts)


def _fits(em, steps, step: Step) -> bool:
    """May `step` follow `steps` in one chain (or start one, when steps is empty)?"""
    if len(step.dsts) > 1:
        # several tiles: all accumulate, same shape, one shared moving operand, nothing reads a tile
        roots = {em.root(d.buffer) for d in step.dsts}
        if (len({d.shape for d in step.dsts}) != 1 or len({i.ins[1] for i in step.instrs}) != 1
                or len({uses_fma(em, i) for i in step.instrs}) != 1
                or not all(i.attr("accumulate") for i in step.instrs)
                or any(em.root(o.buffer) in roots for i in step.instrs for o in i.ins)):
            return False
    if not steps:
        return step.loop is None or all(i.attr("accumulate") for i in step.instrs)
    return (set(step.dsts) == set(steps[0].dsts) and all(i.attr("accumulate") for i in step.instrs)
            and not any(em.root(o.buffer) in {em.root(d.buffer) for d in step.dsts}
                        for s in steps for i in s.instrs for o in i.ins))


def group(em, items) -> list:
    """Chains in a body's schedule items (the contract above); other items unchanged."""
    out: list = []
    cur: list[Step] = []
    bare: list = []                        # consecutive bare nc_matmuls not yet made a step

    def close_bare():
        if bare:
            _add(Step(tuple(bare), None), None)
            bare.clear()

    def _add(step, item):
        if not _fits(em, cur, step):
            flush()
            if not _fits(em, cur, step):
                out.extend(step.instrs if item is None else [item])
                return
        cur.append(step)

    def flush():
        if cur:
            out.append(Chain(cur))
            cur.clear()
    for it in items:
        if isinstance(it, ir.Instr) and chainable(em, it):
            if bare and (not _distinct(em, [*(b.out for b in bare), it.out]) or len(bare) == MAX_OUTS
                         or it.ins[0].shape[0] != bare[0].ins[0].shape[0]):
                close_bare()
            bare.append(it)
            continue
        close_bare()
        step = _loop_step(em, it) if isinstance(it, ir.Loop) else None
        if step is None:
            flush()
            out.append(it)
            continue
        _add(step, it)
    close_bare()
    flush()
    return out


# ---------------------------------------------------------------- emission

def _env(ctx, step: Step, it) -> dict:
    return {**ctx.env, step.loop.var: it} if step.loop is not None else dict(ctx.env)


def _check(em, ctx, step: Step) -> None:
    """Bounds of every member in program order (iterations, then the body's instructions)."""
    def each(c):
        for instr in step.instrs:
            em.check_bounds(instr, c, (instr.out,) + tuple(instr.ins), None)
    if step.loop is None:
        each(ctx)
        return
    with em.b.loop(step.trip, "cb") as i:
        each(LoopEnv(_env(ctx, step, i), ctx.names + [step.loop.var]))


def _plan(steps) -> list:
    """Groups: ("loop", step, G, n) runs n groups of G iterations of a loop step (from 0);
    ("group", [(step, first iteration, count)...]) one group of whole instructions."""
    out, pending, depth = [], [], 0

    def flush():
        nonlocal pending, depth
        if pending:
            out.append(("group", pending))
        pending, depth = [], 0
    for step in steps:
        kd, t = step.K, step.trip
        if depth + kd * t <= KC or (not pending and step.loop is None):
            pending.append((step, 0, t))
            depth += kd * t
            continue
        flush()
        if step.loop is None:
            pending, depth = [(step, 0, 1)], kd
            continue
        g = max(1, KC // kd)
        if t // g:
            out.append(("loop", step, g, t // g))
        if t % g:
            pending, depth = [(step, t // g * g, t % g)], kd * (t % g)
    flush()
    return out


def emit(em, chain: Chain, ctx) -> None:
    for step in chain.steps:
        _check(em, ctx, step)
    first = chain.steps[0].instrs[0]
    init = "psum" if first.attr("accumulate") else "product"
    outs = []
    for dst in chain.dsts:
        C = em.elem_ptr(dst, {**ctx.env, axis_var(0): "0", axis_var(1): "0"})
        outs += [f"ptr {C}", f"i64 {em.flat_index(dst).coeff(axis_var(0))}"]
    for g in _plan(chain.steps):
        if g[0] == "loop":
            _, step, G, n = g
            with em.b.loop(n, "kg") as gi:
                _call(em, ctx, chain.dsts, outs, [(step, em.b.op(f"mul nsw i64 {gi}, {G}"), G)], init)
        else:
            _call(em, ctx, chain.dsts, outs, g[1], init)
        init = "psum"


def to_scratch_f32(em, acc: ir.Access, env: dict, base: str) -> None:
    """Widen a 2-D operand tile [R, C] to a contiguous fp32 copy at `base` (decoded once per
    instruction, not once per use); 16-wide along C when the tile is contiguous there."""
    B = em.b
    R, C = acc.shape
    vec = em.vectorize and C >= MK.MAX_LANES and em.flat_index(acc).coeff(axis_var(1)) == 1
    with B.loop(R, "dr") as r:
        row = B.op(f"mul nsw i64 {r}, {C}")
        nv = C // MK.MAX_LANES if vec else 0
        if nv:
            with B.loop(nv, "dc") as c:
                start = B.op(f"mul nsw i64 {c}, {MK.MAX_LANES}")
                with em.context(W=MK.MAX_LANES, vaxis=axis_var(1)):
                    v = em.operand(acc, {**env, axis_var(0): r, axis_var(1): start}, "f32")
                q = B.op(f"getelementptr inbounds float, ptr {base}, i64 {B.op(f'add nsw i64 {row}, {start}')}")
                B.emit(f"store <{MK.MAX_LANES} x float> {v}, ptr {q}, align 4")
        if C - nv * MK.MAX_LANES:
            with B.loop(C - nv * MK.MAX_LANES, "dt") as t:
                col = B.op(f"add nsw i64 {t}, {nv * MK.MAX_LANES}")
                v = em.operand(acc, {**env, axis_var(0): r, axis_var(1): col}, "f32")
                q = B.op(f"getelementptr inbounds float, ptr {base}, i64 {B.op(f'add nsw i64 {row}, {col}')}")
                B.emit(f"store float {v}, ptr {q}, align 4")


def _view(em, acc: ir.Access, env: dict, var: str | None, count: int, cursor: list) -> list:
    """[pointer at the first iteration, elements per iteration, row stride] (typed call arguments)
    of an operand as fp32
    rows: the tile itself when it already is contiguous fp32, else widened once per iteration into
    the scratch at `cursor` (bytes, advanced)."""
    flat = em.flat_index(acc)
    R, Cn = acc.shape
    row = flat.coeff(axis_var(0))
    zero = {axis_var(0): "0", axis_var(1): "0"}
    if em.dtype(acc) == "float32" and flat.coeff(axis_var(1)) == 1 and (row >= Cn or R == 1):
        return [f"ptr {em.elem_ptr(acc, {**env, **zero})}", f"i64 {flat.coeff(var) if var else 0}", f"i64 {row}"]
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
    return [f"ptr {base}", f"i64 {R * Cn}", f"i64 {Cn}"]


def _call(em, ctx, dsts, outs: list, pieces, init: str) -> None:
    """One micro-kernel call for a group: the operands' fp32 views (B once per piece, shared by
    every PSUM tile; A per tile), the packed panels after them in the scratch."""
    cursor = [0]
    args, sig_pieces = [], []
    for p, (step, lo, count) in enumerate(pieces):
        var = step.loop.var if step.loop is not None else None
        env = _env(ctx, step, str(lo))
        args += _view(em, step.instrs[0].ins[1], env, var, count, cursor)
        for dst in dsts:
            args += _view(em, step.writing(dst).ins[0], env, var, count, cursor)
        start = 1 if (p == 0 and init == "product") else 0
        sig_pieces.append(MK.Piece(step.K, count, start, uses_fma(em, step.instrs[0])))
    M, N = dsts[0].shape
    sig = MK.Sig(M, N, init, tuple(sig_pieces), len(dsts), MK.host_geometry())
    depth = sum(q.K * q.count for q in sig_pieces)
    pa = _align(cursor[0])
    packed = [f"ptr {em.scratch_ptr(pa)}", f"ptr {em.scratch_ptr(_align(pa + len(dsts) * depth * M * 4))}"]
    name = em.use(MK.function(sig))
    em.b.emit(f"call void @{name}({', '.join(outs + packed + args)})")


def _align(n: int) -> int:
    return (n + 63) // 64 * 64


def scratch_bytes(K: int, M: int, N: int) -> int:
    """Scratch a group may need (groups hold at most max(KC, K) rows, at most MAX_OUTS tiles):
    widened operands, then the micro-kernel's packed panels of A (all rows) and B (one strip)."""
    depth = max(KC, K)
    return (_align(depth * (MAX_OUTS * M + N) * 4) + _align(MAX_OUTS * depth * M * 4)
            + depth * -(-N // MK.MAX_LANES) * MK.MAX_LANES * 4)
