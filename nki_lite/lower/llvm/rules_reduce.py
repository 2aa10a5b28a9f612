"""llvm rules for reductions and per-partition statistics: tensor_reduce, bn_stats, bn_aggr, max8,
find_index8 (mirrors runtime/interpret_*.py; masked-off elements are skipped = identity)."""
from __future__ import annotations

import contextlib

from ...numerics import alu
from ...core import ir
from ...core.affine import Affine, axis_var
from ...core.ops import rule
from ...core.bits import CANON_NAN
from .irbuilder import f32_bits
from .rules_common import LANES, Lanes, RowAny, alu_op, domain, flat_axes, identity


def _finish(em, dst, val, dom):
    dt = em.dtype(dst)
    return em.from_i64(val, dt) if dom == "i64" else em.from_f32(em.canon(val), dt)


def _unflatten(em, flat: str, shape, start: int, env: dict) -> dict:
    """env with axis vars start.. of `shape` set from a row-major linear index (udiv/urem)."""
    out = dict(env)
    rem = flat
    for a in range(start, len(shape)):
        stride = 1
        for s in shape[a + 1:]:
            stride *= s
        if stride == 1:
            out[axis_var(a)] = rem
        else:
            out[axis_var(a)] = em.b.op(f"udiv i64 {rem}, {stride}")
            rem = em.b.op(f"urem i64 {rem}, {stride}")
    return out


@contextlib.contextmanager
def _per_partition(em, P: int, env: dict):
    with em.partitions(P, "rp") as p:
        yield {**env, axis_var(0): p}


def _vector_reduce_ok(em, instr, src: ir.Access, axes, lanes) -> bool:
    """One reduced axis, the innermost, contiguous: 16-element chunks are exactly the lanes."""
    if not em.vectorize or lanes is None or len(axes) != 1 or axes[0] != len(src.shape) - 1:
        return False
    vax = axis_var(axes[0])
    if src.shape[-1] < LANES or em.flat_index(src).coeff(vax) != 1:
        return False
    return instr.mask is None or vax not in instr.mask.vars()


def _chunk_loop(em, src: ir.Access, env: dict, vax: str, nv: int, ways: int, state: list, step) -> list:
    """Fold the `nv` 16-element chunks of `src` (in order) into `ways` interleaved copies of a
    register state: copy w takes chunks w, w + ways, ... and then the chunks the unrolled loop left
    over go to copy 0. `state` is [(llvm type, initial value)]; `step(values, x)` returns the new
    values for one chunk x (an f32 vector). Returns the final values of every copy."""
    B = em.b
    pre = B.block_name
    head, body, done = B.new_label("vrh"), B.new_label("vrb"), B.new_label("vrx")
    B.br(head)
    B.block(head)
    c, c_next = B.tmp("c"), B.tmp("cn")
    cur = [[B.tmp("acc") for _ in state] for _ in range(ways)]
    phis = len(B.lines)
    B.lines += [""] * (1 + ways * len(state))
    B.cond_br(B.op(f"icmp slt i64 {c}, {nv // ways}"), body, done)
    B.block(body)
    nexts = []
    with em.context(W=LANES, vaxis=vax):
        for w in range(ways):
            chunk = B.op(f"add nsw i64 {B.op(f'mul nsw i64 {c}, {ways}')}, {w}")
            x = em.operand(src, {**env, vax: B.op(f"mul nsw i64 {chunk}, {LANES}")}, "f32")
            nexts.append(step(cur[w], x))
    B.emit(f"{c_next} = add nsw i64 {c}, 1")
    latch = B.block_name
    B.br(head)
    B.lines[phis] = f"  {c} = phi i64 [ 0, %{pre} ], [ {c_next}, %{latch} ]"
    k = phis + 1
    for w in range(ways):                                   # every copy starts from the same state
        for (ty, init), now, nxt in zip(state, cur[w], nexts[w]):
            B.lines[k] = f"  {now} = phi {ty} [ {init}, %{pre} ], [ {nxt}, %{latch} ]"
            k += 1
    B.block(done)
    with em.context(W=LANES, vaxis=vax):
        for k in range(nv // ways * ways, nv):
            x = em.operand(src, {**env, vax: str(k * LANES)}, "f32")
            cur[0] = step(cur[0], x)
    return cur


def _exact_lanes(em, src, env, vax, nv, lanes: Lanes, init: str) -> str:
    """The 16 lanes folded with the op's own ALU step (one copy for add/multiply, which must keep
    each lane's order; four for maximum/minimum, exactly associative and commutative)."""
    VT = f"<{LANES} x float>"
    ways = 4 if lanes.op in ("maximum", "minimum") and nv >= 8 else 1
    copies = _chunk_loop(em, src, env, vax, nv, ways, [(VT, init)],
                         lambda v, x: [alu_op(em, lanes.op, v[0], x, "f32")])
    total = copies[0][0]
    with em.context(W=LANES):
        for c in copies[1:]:
            total = alu_op(em, lanes.op, total, c[0], "f32")
    return total


def _fast_extreme_lanes(em, src, env, vax, nv, lanes: Lanes, init: str) -> str:
    """maximum/minimum lanes with one compare+select per chunk (x86 maxps/minps) and a NaN flag,
    instead of the IEEE maximum expansion. The two differ only when a lane saw a NaN (the flag makes
    that lane the canonical NaN) or when a lane's result is a zero (+0 vs -0 then depends on the
    order): then the exact loop runs again for this row. Same bits as `_exact_lanes`, by cases."""
    B = em.b
    VT, MT = f"<{LANES} x float>", f"<{LANES} x i1>"
    cmp = "ogt" if lanes.op == "maximum" else "olt"

    def step(v, x):
        better = B.op(f"fcmp {cmp} {VT} {v[0]}, {x}")
        nan = B.op(f"fcmp uno {VT} {x}, zeroinitializer")
        return [B.op(f"select {MT} {better}, {VT} {v[0]}, {VT} {x}"), B.op(f"or {MT} {v[1]}, {nan}")]

    nan0 = B.op(f"fcmp uno {VT} {init}, zeroinitializer")
    ways = 4 if nv >= 8 else 1
    copies = _chunk_loop(em, src, env, vax, nv, ways, [(VT, init), (MT, nan0)], step)
    total, nan = copies[0]
    for c in copies[1:]:
        total, nan = step([total, nan], c[0])
        nan = B.op(f"or {MT} {nan}, {c[1]}")
    zero = B.op(f"fcmp oeq {VT} {total}, zeroinitializer")
    anyzero = B.op(f"icmp ne i16 {B.op(f'bitcast {MT} {zero} to i16')}, 0")
    exact_b, join = B.new_label("vrz"), B.new_label("vrj")
    fast_b = B.new_label("vrf")
    B.cond_br(anyzero, exact_b, fast_b)
    B.block(exact_b)
    exact = _exact_lanes(em, src, env, vax, nv, lanes, init)
    exact_end = B.block_name
    B.br(join)
    B.block(fast_b)
    canon = f"splat (float {f32_bits(CANON_NAN)})"
    fast = B.op(f"select {MT} {nan}, {VT} {canon}, {VT} {total}")
    fast_end = B.block_name
    B.br(join)
    B.block(join)
    return B.op(f"phi {VT} [ {fast}, %{fast_end} ], [ {exact}, %{exact_end} ]")


def _vector_lanes(em, instr, src: ir.Access, axis: int, env: dict, lanes: Lanes, anyl) -> None:
    B = em.b
    vax = axis_var(axis)
    n = src.shape[axis]
    nv = n // LANES
    VT = f"<{LANES} x float>"
    live = em.mask_value(instr.mask, env)
    with (B.if_(live, "vrm") if live is not None else contextlib.nullcontext()):
        if anyl:
            B.emit(f"store i1 true, ptr {anyl}, align 1")
        # The 16 lanes live in registers across the chunk loop (phis), not in memory.
        init = B.op(f"load {VT}, ptr {lanes.ptr}, align 64")
        fold = _fast_extreme_lanes if lanes.op in ("maximum", "minimum") else _exact_lanes
        total = fold(em, src, env, vax, nv, lanes, init)
        B.emit(f"store {VT} {total}, ptr {lanes.ptr}, align 64")
        if n % LANES:
            with B.loop(n - nv * LANES, "vrt") as t:
                k = B.op(f"add nsw i64 {t}, {nv * LANES}")
                lanes.add(k, em.operand(src, {**env, vax: k}, "f32"))


@rule("llvm", "tensor_reduce")
def _tensor_reduce(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    op, axes = instr.attr("op"), instr.attr("axes")
    dom = domain(em, (src,), (dst,)) if op in alu.INT else "f32"
    slow = em.check_bounds(instr, ctx, (dst, src), None)
    kept = [a for a in range(len(src.shape)) if a not in axes]
    lanes = Lanes(em, op) if dom == "f32" else None
    iacc = em.entry_alloca("i64", "racc") if dom == "i64" else None
    anyl = em.entry_alloca("i1", "any") if instr.mask is not None else None
    # reduced elements in row-major order over the reduced axes
    red_shape = [src.shape[a] for a in axes]
    k_expr, stride = Affine(0), 1
    for a in reversed(axes):
        k_expr = k_expr + Affine.var(axis_var(a), stride)
        stride *= src.shape[a]
    with contextlib.ExitStack() as outer:
        env = dict(ctx.env)
        for a in kept:
            if a == 0:
                env[axis_var(a)] = outer.enter_context(em.partitions(src.shape[0], "rk0_"))
            else:
                env[axis_var(a)] = outer.enter_context(B.loop(src.shape[a], f"rk{a}_")) if src.shape[a] > 1 else "0"
        if lanes:
            lanes.reset()
        else:
            B.emit(f"store i64 {identity(op, 'i64')}, ptr {iacc}, align 8")
        if anyl:
            B.emit(f"store i1 false, ptr {anyl}, align 1")
        def scalar_path():
            with contextlib.ExitStack() as inner:
                ienv = dict(env)
                for a, n in zip(axes, red_shape):
                    ienv[axis_var(a)] = inner.enter_context(B.loop(n, f"rr{a}_")) if n > 1 else "0"
                live = em.mask_value(instr.mask, ienv)
                em.check_element(slow, live, ctx, ienv, (src,))
                with (B.if_(live, "rm") if live is not None else contextlib.nullcontext()):
                    x = em.operand(src, ienv, dom)
                    if lanes:
                        lanes.add(em.affine(k_expr, ienv), x)
                    else:
                        old = B.op(f"load i64, ptr {iacc}, align 8")
                        B.emit(f"store i64 {alu_op(em, op, old, x, 'i64')}, ptr {iacc}, align 8")
                    if anyl:
                        B.emit(f"store i1 true, ptr {anyl}, align 1")

        if not _vector_reduce_ok(em, instr, src, axes, lanes):
            scalar_path()
        elif slow is None:
            _vector_lanes(em, instr, src, axes[0], env, lanes, anyl)
        else:                               # masked and possibly out of bounds: per-element checks
            fast, slow_b, done = B.new_label("rf"), B.new_label("rs"), B.new_label("rd")
            B.cond_br(B.op(f"xor i1 {slow}, true"), fast, slow_b)
            B.block(fast)
            _vector_lanes(em, instr, src, axes[0], env, lanes, anyl)
            B.br(done)
            B.block(slow_b)
            scalar_path()
            B.br(done)
            B.block(done)
        r = lanes.combine() if lanes else B.op(f"load i64, ptr {iacc}, align 8")
        if instr.attr("negate"):
            r = B.op(f"fneg float {r}") if lanes else B.op(f"sub i64 0, {r}")
        denv = {**env, **{axis_var(a): "0" for a in axes}}
        write = B.op(f"load i1, ptr {anyl}, align 1") if anyl else None
        with (B.if_(write, "rw") if write is not None else contextlib.nullcontext()):
            em.store_raw(dst, denv, _finish(em, dst, r, dom))


def _free_elements(em, src: ir.Access, env: dict):
    """Loop over the free elements of a partition row in row-major order; yields (flat, env)."""
    n = 1
    for s in src.shape[1:]:
        n *= s
    return n


@rule("llvm", "bn_stats")
def _bn_stats(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    slow = em.check_bounds(instr, ctx, (dst, src), None)
    lanes = [Lanes(em, "add", "bn0"), Lanes(em, "add", "bn1")]
    cnt = [em.entry_alloca("float", "cnt0"), em.entry_alloca("float", "cnt1")]
    flat_e = flat_axes(src.shape, 1, None)

    vec = _bn_vectorizable(em, instr, src)

    def sweep(penv, body, vstep=None, count=False):
        if vec:
            _bn_vector_sweep(em, src, penv, lanes, cnt if count else (), vstep, body)
            return
        with em.elements(src.shape, penv, start=1) as env:
            live = em.mask_value(instr.mask, env)
            em.check_element(slow, live, ctx, env, (src,))
            with (B.if_(live, "bm") if live is not None else contextlib.nullcontext()):
                f = em.affine(flat_e, env)
                par = B.op(f"and i64 {f}, 1")
                g = B.op(f"lshr i64 {f}, 1")
                odd = B.op(f"icmp ne i64 {par}, 0")
                body(env, odd, g)

    def add_lane(odd, g, val):
        lane = B.op(f"and i64 {g}, {LANES - 1}")
        base = B.op(f"select i1 {odd}, ptr {lanes[1].ptr}, ptr {lanes[0].ptr}")
        p = B.op(f"getelementptr inbounds [{LANES} x float], ptr {base}, i64 0, i64 {lane}")
        old = B.op(f"load float, ptr {p}, align 4")
        B.emit(f"store float {B.op(f'fadd float {old}, {val}')}, ptr {p}, align 4")

    rows = RowAny(em, instr.mask is not None)
    with _per_partition(em, src.shape[0], ctx.env) as penv:
        rows.reset()
        for L, c in zip(lanes, cnt):
            L.reset()
            B.emit(f"store float 0.0, ptr {c}, align 4")

        def pass1(env, odd, g):
            rows.mark()
            add_lane(odd, g, em.operand(src, env, "f32"))
            cp = B.op(f"select i1 {odd}, ptr {cnt[1]}, ptr {cnt[0]}")
            old = B.op(f"load float, ptr {cp}, align 4")
            B.emit(f"store float {B.op(f'fadd float {old}, 1.0')}, ptr {cp}, align 4")
        sweep(penv, pass1, lambda ev, od: (ev, od), count=True)
        counts = [B.op(f"load float, ptr {c}, align 4") for c in cnt]
        means = []
        for L, c in zip(lanes, counts):
            s = L.combine()
            q = B.op(f"fdiv float {s}, {c}")
            pos = B.op(f"fcmp ogt float {c}, 0.0")
            means.append(B.op(f"select i1 {pos}, float {q}, float 0.0"))
        for L in lanes:
            L.reset()

        def pass2(env, odd, g):
            mu = B.op(f"select i1 {odd}, float {means[1]}, float {means[0]}")
            d = B.op(f"fsub float {em.operand(src, env, 'f32')}, {mu}")
            add_lane(odd, g, B.op(f"fmul float {d}, {d}"))
        sweep(penv, pass2, lambda ev, od: _centred_squares(em, (ev, od), means))
        outs = []
        for L, c, mu in zip(lanes, counts, means):
            m2 = L.combine()
            pos = B.op(f"fcmp ogt float {c}, 0.0")
            outs += [c, mu, B.op(f"select i1 {pos}, float {m2}, float 0.0")]
        with rows.guard():
            for j, v in enumerate(outs):
                em.store_raw(dst, {**penv, axis_var(1): str(j)}, _finish(em, dst, v, "f32"))


def _bn_vectorizable(em, instr, src: ir.Access) -> bool:
    """bn_stats over an unmasked, contiguous 2-D row of at least 32 elements: 32-element chunks,
    split into their 16 even and 16 odd elements, are exactly the 16 lanes of each parity."""
    return (em.vectorize and instr.mask is None and len(src.shape) == 2 and src.shape[1] >= 2 * LANES
            and em.flat_index(src).coeff(axis_var(1)) == 1)


_EVENS = ", ".join(f"i32 {2 * k}" for k in range(LANES))
_ODDS = ", ".join(f"i32 {2 * k + 1}" for k in range(LANES))


def _bn_vector_sweep(em, src: ir.Access, penv: dict, lanes, counts, vstep, body) -> None:
    """One bn_stats pass over a partition row: element f goes to lane (f >> 1) % 16 of the even or odd
    accumulator, in order of f. Chunks of 32 elements: their evens (f = 32k + 2i, lane i) and odds
    in two vector adds; then the ragged tail through the scalar `body`. `counts` (pass 1): each
    parity's element count is exact in fp32, so the vector part adds its 16 per chunk at once."""
    B = em.b
    VT = f"<{LANES} x float>"
    vax = axis_var(1)
    n = src.shape[1]
    nv = n // (2 * LANES)
    with B.loop(nv, "bv") as k, em.context(W=LANES, vaxis=vax):
        c0 = B.op(f"mul nsw i64 {k}, {2 * LANES}")
        x0 = em.operand(src, {**penv, vax: c0}, "f32")
        x1 = em.operand(src, {**penv, vax: B.op(f"add nsw i64 {c0}, {LANES}")}, "f32")
        ev = B.op(f"shufflevector {VT} {x0}, {VT} {x1}, <{LANES} x i32> <{_EVENS}>")
        od = B.op(f"shufflevector {VT} {x0}, {VT} {x1}, <{LANES} x i32> <{_ODDS}>")
        for L, v in zip(lanes, vstep(ev, od)):
            L.add_chunk(v)
    for c in counts:
        B.emit(f"store float {float(nv * LANES)}, ptr {c}, align 4")
    with B.loop(n - nv * 2 * LANES, "bt") as t:
        f = B.op(f"add nsw i64 {t}, {nv * 2 * LANES}")
        odd = B.op(f"icmp ne i64 {B.op(f'and i64 {f}, 1')}, 0")
        body({**penv, vax: f}, odd, B.op(f"lshr i64 {f}, 1"))


def _centred_squares(em, vals, means):
    """(x - mean)^2 per parity, 16 lanes wide (pass 2 of bn_stats)."""
    B = em.b
    VT = f"<{LANES} x float>"
    out = []
    for v, mu in zip(vals, means):
        d = B.op(f"fsub {VT} {v}, {em.broadcast(mu, 'float')}")
        out.append(B.op(f"fmul {VT} {d}, {d}"))
    return out


def _masked_operand(em, instr, ctx, slow, src: ir.Access, env: dict, rows: RowAny, default: str) -> str:
    """src's f32 value at env, or `default` (an LLVM float constant) where the instruction's mask
    is off; a masked-in element marks its row (per-partition outputs are written only for those)."""
    B = em.b
    live = em.mask_value(instr.mask, env)
    em.check_element(slow, live, ctx, env, (src,))
    if live is None:
        return em.operand(src, env, "f32")
    cell = em.entry_alloca("float", "mv")
    B.emit(f"store float {default}, ptr {cell}, align 4")
    with B.if_(live, "mvl"):
        rows.mark()
        B.emit(f"store float {em.operand(src, env, 'f32')}, ptr {cell}, align 4")
    return B.op(f"load float, ptr {cell}, align 4")


@rule("llvm", "bn_aggr")
def _bn_aggr(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    slow = em.check_bounds(instr, ctx, (dst, src), None)
    n_free = _free_elements(em, src, ctx.env)
    st = {k: em.entry_alloca("float", k) for k in ("na", "ma", "m2a")}
    rows = RowAny(em, instr.mask is not None)
    with _per_partition(em, src.shape[0], ctx.env) as penv:
        rows.reset()
        for k in st:
            B.emit(f"store float 0.0, ptr {st[k]}, align 4")
        with B.loop(n_free // 3, "ba") as t:
            vals = []
            for j in range(3):
                f = B.op(f"add nsw i64 {B.op(f'mul nsw i64 {t}, 3')}, {j}")
                env = _unflatten(em, f, src.shape, 1, penv)
                vals.append(_masked_operand(em, instr, ctx, slow, src, env, rows, "0.0"))
            nb, mb, m2b = vals
            na, ma, m2a = (B.op(f"load float, ptr {st[k]}, align 4") for k in st)
            n = B.op(f"fadd float {na}, {nb}")
            d = B.op(f"fsub float {mb}, {ma}")
            take = B.op(f"fcmp ogt float {nb}, 0.0")
            frac = B.op(f"fdiv float {nb}, {n}")
            w = B.op(f"fdiv float {B.op(f'fmul float {na}, {nb}')}, {n}")
            ma2 = B.op(f"fadd float {ma}, {B.op(f'fmul float {d}, {frac}')}")
            dd = B.op(f"fmul float {d}, {d}")
            m2n = B.op(f"fadd float {B.op(f'fadd float {m2a}, {m2b}')}, {B.op(f'fmul float {dd}, {w}')}")
            for key, new, old in (("ma", ma2, ma), ("m2a", m2n, m2a), ("na", n, na)):
                B.emit(f"store float {B.op(f'select i1 {take}, float {new}, float {old}')}, ptr {st[key]}, align 4")
        na, ma, m2a = (B.op(f"load float, ptr {st[k]}, align 4") for k in st)
        pos = B.op(f"fcmp ogt float {na}, 0.0")
        var = B.op(f"select i1 {pos}, float {B.op(f'fdiv float {m2a}, {na}')}, float 0x7FF8000000000000")
        with rows.guard():
            for j, v in enumerate((ma, var)):
                em.store_raw(dst, {**penv, axis_var(1): str(j)}, _finish(em, dst, v, "f32"))


@rule("llvm", "max8")
def _max8(em, instr, ctx):
    """Stable insertion into a descending top-8 by key (NaN keys as +inf); masked-off = -inf."""
    B = em.b
    dst, src = instr.out, instr.ins[0]
    slow = em.check_bounds(instr, ctx, (dst, src), None)
    keys = em.entry_alloca("[8 x float]", "k8")
    vals = em.entry_alloca("[8 x float]", "v8")
    filled = em.entry_alloca("i64", "n8")
    rows = RowAny(em, instr.mask is not None)

    def cell(arr, i):
        return B.op(f"getelementptr inbounds [8 x float], ptr {arr}, i64 0, i64 {i}")

    with _per_partition(em, src.shape[0], ctx.env) as penv:
        B.emit(f"store i64 0, ptr {filled}, align 8")
        rows.reset()
        with em.elements(src.shape, penv, start=1) as env:
            x = _masked_operand(em, instr, ctx, slow, src, env, rows, "0xFFF0000000000000")     # -inf
            isnan = B.op(f"fcmp uno float {x}, 0.0")
            ck = B.op(f"select i1 {isnan}, float 0x7FF0000000000000, float {x}")
            cv = x
            nf = B.op(f"load i64, ptr {filled}, align 8")
            # the new element passes only strictly smaller keys (it comes after equal ones); once it
            # has displaced one, the carried element came *before* every equal key below it, so it
            # displaces those too (a stable shift down; +0 and -0 are equal keys, NaN keys are +inf)
            displaced = "false"
            for i in range(8):
                pk, pv = cell(keys, i), cell(vals, i)
                ok_, ov = B.op(f"load float, ptr {pk}, align 4"), B.op(f"load float, ptr {pv}, align 4")
                empty = B.op(f"icmp sle i64 {nf}, {i}")
                less = B.op(f"fcmp olt float {ok_}, {ck}")
                tie = B.op(f"fcmp oeq float {ok_}, {ck}")
                carried_tie = B.op(f"and i1 {displaced}, {tie}")
                sw = B.op(f"or i1 {B.op(f'or i1 {empty}, {less}')}, {carried_tie}")
                displaced = B.op(f"or i1 {displaced}, {sw}")
                B.emit(f"store float {B.op(f'select i1 {sw}, float {ck}, float {ok_}')}, ptr {pk}, align 4")
                B.emit(f"store float {B.op(f'select i1 {sw}, float {cv}, float {ov}')}, ptr {pv}, align 4")
                ck = B.op(f"select i1 {sw}, float {ok_}, float {ck}")
                cv = B.op(f"select i1 {sw}, float {ov}, float {cv}")
            B.emit(f"store i64 {B.op(f'add nsw i64 {nf}, 1')}, ptr {filled}, align 8")
        with rows.guard():
            for i in range(8):
                v = B.op(f"load float, ptr {cell(vals, i)}, align 4")
                em.store_raw(dst, {**penv, axis_var(1): str(i)}, _finish(em, dst, v, "f32"))


@rule("llvm", "find_index8")
def _find_index8(em, instr, ctx):
    B = em.b
    dst = instr.out
    src, vacc = instr.ins
    slow = em.check_bounds(instr, ctx, (dst, src, vacc), None)
    res = em.entry_alloca("[8 x i64]", "fi")
    flat_e = flat_axes(src.shape, 1, None)
    rows = RowAny(em, instr.mask is not None)
    with _per_partition(em, src.shape[0], ctx.env) as penv:
        rows.reset()
        wanted = []
        for j in range(8):
            venv = _unflatten(em, str(j), vacc.shape, 1, penv)
            wanted.append(em.operand(vacc, venv, "f32"))
            p = B.op(f"getelementptr inbounds [8 x i64], ptr {res}, i64 0, i64 {j}")
            B.emit(f"store i64 {0xFFFFFFFF}, ptr {p}, align 8")
        with em.elements(src.shape, penv, start=1) as env:
            live = em.mask_value(instr.mask, env)
            em.check_element(slow, live, ctx, env, (src,))
            with (B.if_(live, "fm") if live is not None else contextlib.nullcontext()):
                rows.mark()
                x = em.operand(src, env, "f32")
                f = em.affine(flat_e, env)
                for j in range(8):
                    p = B.op(f"getelementptr inbounds [8 x i64], ptr {res}, i64 0, i64 {j}")
                    old = B.op(f"load i64, ptr {p}, align 8")
                    eq = B.op(f"fcmp oeq float {x}, {wanted[j]}")
                    unset = B.op(f"icmp eq i64 {old}, {0xFFFFFFFF}")
                    take = B.op(f"and i1 {eq}, {unset}")
                    B.emit(f"store i64 {B.op(f'select i1 {take}, i64 {f}, i64 {old}')}, ptr {p}, align 8")
        with rows.guard():
            for j in range(8):
                p = B.op(f"getelementptr inbounds [8 x i64], ptr {res}, i64 0, i64 {j}")
                v = B.op(f"load i64, ptr {p}, align 8")
                em.store_raw(dst, {**penv, axis_var(1): str(j)}, em.from_i64(v, em.dtype(dst)))
