"""Verifier rule 9: writes that conflict between iterations of an `affine_range` loop (loop_dependency).

For every affine_range loop L (trip >= 2) and every pair of writes inside L's body (the same
instruction twice included) to one storage location set, two *different* iterations of L must never
write the same element. Per-iteration buffers are exempt (an on-chip buffer allocated inside L's
body is a fresh tile in every iteration), and so is PSUM accumulation: `nc_matmul` with
accumulate=True, and `tensor_tensor` add into a PSUM tile that is also one of its inputs
(`psum += t`). Variables of loops around L and program ids are shared by the two iterations.

Decision: first a proof of disjointness (some dimension's index, split into a*L + inner + outer,
separates the iterations: the inner range is narrower than the stride, interval test over the
iteration distance). Otherwise a search for a witness by enumerating the written elements (with the
mask) for sampled values of the outer variables; an error is raised only with a concrete witness
(two iterations and one element), so there are no false positives. Limits: outer variables are
sampled at their extreme values; writes too large to enumerate are not reported.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import errors
from ..core.affine import Affine
from ..core.ops import dynamic_access
from ..core.ir import Access, Space
from .analysis.accesses import flat_index
from .analysis.dependence import accumulation_exempt, hbm_shared_across
from .analysis.program import Site
from .analysis.ranges import BUDGET, Range, enumerate_points, prod, solve_range
from .verify_common import Ctx, access_space, short

_SAMPLE_Y = 16


class _W:
    """One write (an output access of one instruction) seen from one loop."""

    def __init__(self, ctx: Ctx, site: Site, k: int, acc: Access, depth: int, role: str = "out"):
        self.site, self.k, self.acc, self.depth = site, k, acc, depth
        self.buf = ctx.buf(acc.buffer)
        self.root = ctx.root(acc.buffer)
        self.exempt = role == "out" and accumulation_exempt(ctx.bufs, site.instr, acc)
        self.space = access_space(ctx, site, role, k, acc)

    def flat(self) -> Affine:
        """Element offset of the write within its root storage (row-major over the view's shape)."""
        return flat_index(self.buf.shape, self.acc.index)


def _split(e: Affine, v: str, outer: set[str]):
    a = e.coeff(v)
    out = {x: c for x, c in e.terms if x in outer}
    inner = Affine.make(0, {x: c for x, c in e.terms if x != v and x not in outer})
    return a, out, inner


def _dims(ctx: Ctx, w1: _W, w2: _W) -> list[tuple[Affine, Affine]]:
    if w1.acc.buffer == w2.acc.buffer:
        return list(zip(w1.acc.index, w2.acc.index))
    return [(w1.flat(), w2.flat())]


def _separated(ctx: Ctx, loop, w1: _W, w2: _W, outer: set[str]) -> bool:
    """True when some dimension provably separates the elements written by different iterations."""
    T, v = loop.trip, loop.var
    for e1, e2 in _dims(ctx, w1, w2):
        a1, o1, in1 = _split(e1, v, outer)
        a2, o2, in2 = _split(e2, v, outer)
        if o1 != o2:
            continue
        lo1, hi1 = in1.bounds(w1.space.extents)
        lo2, hi2 = in2.bounds(w2.space.extents)
        D = e1.const - e2.const
        p, q = lo2 - hi1 - D, hi2 - lo1 - D          # overlap iff a1*v1 - a2*v2 in [p, q]
        if a1 == a2:
            a = a1
            if a == 0:
                if not (p <= 0 <= q):
                    return True
                continue
            if a > 0:
                dlo, dhi = -(-p // a), q // a
            else:
                dlo, dhi = -(-q // a), p // a
            dlo, dhi = max(dlo, -(T - 1)), min(dhi, T - 1)
            if dlo > dhi or (dlo == 0 and dhi == 0):
                return True
            continue
        if T * T <= (1 << 20):
            r = np.arange(T, dtype=np.int64)
            diff = a1 * r[:, None] - a2 * r[None, :]
            hit = (diff >= p) & (diff <= q)
            np.fill_diagonal(hit, False)
            if not hit.any():
                return True
    return False


def _points(ctx: Ctx, w: _W, loop, ysub: dict, vvals, dims_of_w: list[Affine]):
    """(v values, element keys) of the elements `w` writes for iterations in `vvals` (None: too many)."""
    ext = dict(w.space.extents)
    cons = [type(c)(c.expr.subst(ysub), c.op) for c in w.space.cons]
    exprs = [e.subst(ysub) for e in dims_of_w]
    for x in ysub:
        ext.pop(x, None)
    vs, ks = [], []
    for val in vvals:
        sub = {loop.var: val}
        pts = enumerate_points([e.subst(sub) for e in exprs], {x: n for x, n in ext.items() if x != loop.var},
                               [type(c)(c.expr.subst(sub), c.op) for c in cons], BUDGET)
        if pts is None:
            return None
        ks.append(pts)
        vs.append(np.full(pts[0].shape[0] if pts else 0, val, dtype=np.int64))
    return vs, ks


def _keys(parts: list[list[np.ndarray]], shape: tuple[int, ...]):
    keys, valid = [], []
    for pts in parts:
        if len(pts) != len(shape):
            return None
        ok = np.ones(pts[0].shape[0], dtype=bool)
        for d, arr in enumerate(pts):
            ok &= (arr >= 0) & (arr < shape[d])
        k = np.zeros(pts[0].shape[0], dtype=np.int64)
        for d, arr in enumerate(pts):
            k = k * shape[d] + arr
        keys.append(k)
        valid.append(ok)
    return keys, valid


def _invariant_witness(ctx: Ctx, loop, w: _W, dims: list[Affine], shape: tuple[int, ...]):
    """Fast path: a write whose index and mask do not depend on the loop variable writes the same
    elements in every iteration; any executed point is a witness (iterations 0 and 1)."""
    v = loop.var
    if any(e.coeff(v) for e in dims) or any(c.expr.coeff(v) for c in w.space.cons):
        return None
    r = solve_range(None, w.space.extents, w.space.cons)
    if not isinstance(r, Range):
        return None
    pt = {x: r.at_lo.get(x, 0) for x in w.space.extents}
    idx = tuple(int(e.const + sum(c * pt[x] for x, c in e.terms)) for e in dims)
    if any(not 0 <= i < n for i, n in zip(idx, shape)):
        return None
    outer = {x: pt[x] for x in ctx.extents(w.site.loops[:w.depth])}
    key = 0
    for i, n in zip(idx, shape):
        key = key * n + i
    return outer, tuple(int(i) for i in np.unravel_index(key, shape)), 0, 1


def _witness(ctx: Ctx, loop, w1: _W, w2: _W, outer_vars: list[str]):
    same_buf = w1.acc.buffer == w2.acc.buffer
    if same_buf:
        d1, d2, shape = list(w1.acc.index), list(w2.acc.index), tuple(w1.buf.shape)
    else:
        d1, d2, shape = [w1.flat()], [w2.flat()], (prod(w1.root.shape),)
    if w1 is w2:
        fast = _invariant_witness(ctx, loop, w1, d1, shape)
        if fast is not None:
            return fast + (same_buf,)
    base_ext = w1.space.extents
    choices = [sorted({0, base_ext[x] - 1}) for x in outer_vars]
    T = loop.trip
    inner1 = prod(n for x, n in w1.space.extents.items() if x not in outer_vars and x != loop.var)
    inner2 = prod(n for x, n in w2.space.extents.items() if x not in outer_vars and x != loop.var)
    if T * max(inner1, inner2) <= 4 * BUDGET:
        vvals = list(range(T))
    else:
        vvals = sorted({0, 1, 2, T - 2, T - 1} & set(range(T)))
    cost = max(1, len(vvals) * max(inner1, inner2) * (1 if w1 is w2 else 2))
    samples = max(1, min(_SAMPLE_Y, (8 * BUDGET) // cost))
    for combo in itertools.islice(itertools.product(*choices), samples):
        ysub = dict(zip(outer_vars, combo))
        p1 = _points(ctx, w1, loop, ysub, vvals, d1)
        if p1 is None:
            return None
        p2 = p1 if w2 is w1 else _points(ctx, w2, loop, ysub, vvals, d2)
        if p2 is None:
            return None
        kv1, kv2 = _keys(p1[1], shape), _keys(p2[1], shape)
        if kv1 is None or kv2 is None:
            return None
        k1 = np.concatenate([k[ok] for k, ok in zip(*kv1)]) if kv1[0] else np.zeros(0, np.int64)
        v1 = np.concatenate([v[ok] for v, ok in zip(p1[0], kv1[1])]) if p1[0] else np.zeros(0, np.int64)
        k2 = np.concatenate([k[ok] for k, ok in zip(*kv2)]) if kv2[0] else np.zeros(0, np.int64)
        v2 = np.concatenate([v[ok] for v, ok in zip(p2[0], kv2[1])]) if p2[0] else np.zeros(0, np.int64)
        hit = _find(k1, v1, k2, v2, w1 is w2)
        if hit is not None:
            key, va, vb = hit
            idx = np.unravel_index(key, shape)
            return ysub, tuple(int(i) for i in idx), va, vb, same_buf
    return None


def _find(k1, v1, k2, v2, same: bool):
    if k1.size == 0 or k2.size == 0:
        return None
    if same:
        order = np.lexsort((v1, k1))
        k, v = k1[order], v1[order]
        i = np.nonzero((k[1:] == k[:-1]) & (v[1:] != v[:-1]))[0]
        if i.size:
            j = int(i[0])
            return int(k[j]), int(v[j]), int(v[j + 1])
        return None

    def minmax(k, v):
        order = np.lexsort((v, k))
        k, v = k[order], v[order]
        uk, start = np.unique(k, return_index=True)
        end = np.append(start[1:], k.size) - 1
        return uk, v[start], v[end]

    u1, lo1, hi1 = minmax(k1, v1)
    u2, lo2, hi2 = minmax(k2, v2)
    common, i1, i2 = np.intersect1d(u1, u2, assume_unique=True, return_indices=True)
    if common.size == 0:
        return None
    single = (lo1[i1] == hi1[i1]) & (lo2[i2] == hi2[i2]) & (lo1[i1] == lo2[i2])
    bad = np.nonzero(~single)[0]
    if bad.size == 0:
        return None
    j = int(bad[0])
    a, b = int(lo1[i1[j]]), int(lo2[i2[j]])
    if a == b:
        b = int(hi2[i2[j]]) if int(hi2[i2[j]]) != a else int(hi1[i1[j]])
    return int(common[j]), a, b


def check_dependencies(ctx: Ctx) -> None:
    alloc_loops: dict[str, set[int]] = {}
    for s in ctx.sites:
        if s.instr.op == "alloc" and s.instr.outs and s.instr.out.buffer not in alloc_loops:
            alloc_loops[s.instr.out.buffer] = {id(l) for l in s.loops}
    per_loop: dict[int, tuple[object, list[_W]]] = {}
    hbm_reads: dict[int, list[_W]] = {}
    order: list[int] = []
    for s in ctx.sites:
        if s.instr.op == "alloc" or not s.executes:
            continue
        for depth, loop in enumerate(s.loops):
            if loop.kind != "affine" or loop.trip < 2:
                continue
            dyn = dynamic_access(s.instr)          # run-time indices: no static witness either way
            for k, acc in enumerate(s.instr.outs):
                if dyn is not None and dyn[:2] == ("out", k):
                    continue
                b = ctx.buf(acc.buffer)
                if b.space != Space.HBM and id(loop) in alloc_loops.get(acc.buffer, set()):
                    continue                       # a fresh tile in every iteration
                if b.space == Space.HBM and not hbm_shared_across(ctx.root(acc.buffer), loop):
                    continue
                if id(loop) not in per_loop:
                    per_loop[id(loop)] = (loop, [])
                    order.append(id(loop))
                per_loop[id(loop)][1].append(_W(ctx, s, k, acc, depth))
            for k, acc in enumerate(s.instr.ins):
                if dyn is not None and dyn[:2] == ("in", k):
                    continue
                if (isinstance(acc, Access) and ctx.buf(acc.buffer).space == Space.HBM
                        and hbm_shared_across(ctx.root(acc.buffer), loop)):
                    hbm_reads.setdefault(id(loop), []).append(_W(ctx, s, k, acc, depth, role="in"))
    for lid in order:
        loop, writes = per_loop[lid]
        groups: dict[str, list[_W]] = {}
        for w in writes:
            groups.setdefault(w.root.name, []).append(w)
        for ws in groups.values():
            for i, w1 in enumerate(ws):
                for w2 in ws[i:]:
                    if w1.exempt and w2.exempt:
                        continue
                    hit = _conflict(ctx, loop, w1, w2, w1)
                    if hit is not None:
                        _raise(ctx, loop, w1, w2, hit)
        _check_hbm_reads(ctx, loop, groups, hbm_reads.get(lid, ()))


def _conflict(ctx: Ctx, loop, a: _W, b: _W, inner: _W):
    """The witness of a and b touching one element in two iterations of `loop` (the loops enclosing
    it up to `inner`'s depth held fixed), or None: unknown spaces or provably separated."""
    if not (a.space.certain and b.space.certain):
        return None
    outer = list(ctx.extents(inner.site.loops[:inner.depth]).keys())
    if _separated(ctx, loop, a, b, set(outer)):
        return None
    return _witness(ctx, loop, a, b, outer)


def _check_hbm_reads(ctx: Ctx, loop, writes: dict[str, list[_W]], reads) -> None:
    """Read-after-write (and write-after-read) through HBM across iterations: iteration v1 writes an
    element that iteration v2 != v1 reads. Iterations of an affine_range may run in any order or in
    parallel, so the value the read sees is not defined. Each iteration reading only what it writes
    itself (or what no iteration writes) is fine."""
    for r in reads:
        for w in writes.get(r.root.name, ()):
            hit = _conflict(ctx, loop, w, r, r)
            if hit is not None:
                _raise_read(ctx, loop, w, r, hit)


def _described(ctx: Ctx, loop, w: _W, hit):
    """A witness in the user's terms: (loop variable's name, the two iterations in order, the
    element `buffer[i, ...]` written by w, the other loop variables' values or "")."""
    ysub, idx, va, vb, same_buf = hit
    name = ctx.var_label(loop.var)
    ua, ub = sorted((ctx.user_value(loop.var, va), ctx.user_value(loop.var, vb)))
    target = w.acc.buffer if same_buf else w.root.name
    where = f"{target}[{', '.join(map(str, idx))}]"
    ctxt = ", ".join(f"{ctx.var_label(x)}={ctx.user_value(x, val)}" for x, val in ysub.items())
    return name, ua, ub, where, ctxt


def _raise_read(ctx: Ctx, loop, w: _W, r: _W, hit) -> None:
    name, ua, ub, where, ctxt = _described(ctx, loop, w, hit)
    raise errors.make(
        "loop_dependency",
        f"Unexpected read-after-write through HBM: this {r.site.instr.op} reads {where}, which the "
        f"{w.site.instr.op} at {short(w.site.loc)} writes, in different iterations ({name}={ua} and {name}={ub}) "
        f"of the affine_range loop over `{name}` (at {short(loop.loc)})" + (f" (with {ctxt})" if ctxt else "")
        + f"; affine_range iterations may run in any order or in parallel, so which value the read sees "
          f"is not defined",
        loc=r.site.loc,
        hint=(f"use nl.sequential_range if iteration {name} needs what an earlier iteration stored, or keep the "
              f"value on chip (a tile allocated before the loop) and index reads and writes so each iteration "
              f"reads only what it writes"))


def _raise(ctx: Ctx, loop, w1: _W, w2: _W, hit) -> None:
    name, ua, ub, where, ctxt = _described(ctx, loop, w1, hit)
    if w1 is w2:
        what = f"this {w1.site.instr.op} writes {where} in iterations {name}={ua} and {name}={ub}"
    else:
        what = (f"the {w1.site.instr.op} at {short(w1.site.loc)} and this {w2.site.instr.op} both write {where}, "
                f"in iterations {name}={ua} and {name}={ub}")
    b = w1.root
    decl = ("declared outside the loop" if b.space == Space.HBM else
            f"allocated outside the loop (at {short(ctx.buf(w1.acc.buffer).loc)})")
    raise errors.make(
        "loop_dependency",
        f"Unexpected output dependencies: different iterations of the affine_range loop over `{name}` "
        f"(at {short(loop.loc)}) write the same location: {what}"
        + (f" (with {ctxt})" if ctxt else "") + f"; '{b.name}' is {decl}",
        loc=w2.site.loc,
        hint=(f"index the write by the loop variable (e.g. {b.name}[{name} * T + ip, ...]), allocate the tile "
              f"inside the loop, or use nl.sequential_range if the iterations must run in order"))
