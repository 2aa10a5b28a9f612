"""Loop nests the schedule extrapolation (periodic.py) runs as one loop: the iteration space of a loop.

Contract: `iteration(plan, loop)` returns the `Iteration` that `Periodic.loop` walks for `loop`:
its own iterations, or, for a perfect nest `for o in range(TL): for i in range(TM): body` whose
flattened sequence f = o * TM + i is *uniform* (`uniform_nest`), the TL x TM iterations of `body` as
one loop. Uniform means every dependence between two iterations of the body depends only on their
distance in f, never on where a segment of the inner loop starts: for every pair of accesses to a
buffer the body writes (one of them a write; buffers allocated inside the body are fresh in every
iteration and rotate in f), overlap and containment of their boxes must be the same for the shifts
(dO, dI) and (dO + 1, dI - TM), which are the same distance in f. Then the inner loop's steady state
continues into the next outer iteration and the extrapolation skips across outer iterations instead
of re-simulating every outer iteration's inner prefix (issue 15). Nests with hoisted loads, hoisting
breaks or masks on their variables are left alone (their body changes in some iterations), and so
are pairs whose loop coefficients differ (the test would need absolute positions).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.ir import Loop, walk

MAX_PAIR_SHIFTS = 200_000      # shifts tested per access pair; a larger nest is not flattened


@dataclass
class Iteration:
    """The iterations `Periodic.loop` runs: `trip` of `body`; `vars` the loop variables (outer first)
    and `trips` their trips (mixed radix of the flat index)."""
    loop: Loop
    vars: tuple
    trips: tuple
    body: tuple

    @property
    def trip(self) -> int:
        return int(np.prod(self.trips))

    @property
    def name(self) -> str:
        return "*".join(self.vars)

    def digits(self, f: int) -> tuple:
        out = []
        for t in reversed(self.trips):
            f, d = divmod(f, t)
            out.append(d)
        return tuple(reversed(out))

    def set(self, env, f: int) -> None:
        for v, d in zip(self.vars, self.digits(f)):
            env[v] = d

    def clear(self, env) -> None:
        for v in self.vars:
            env.pop(v, None)

    def moves(self, coef) -> bool:
        """Does an access with these coefficients move with the iteration?"""
        return any(any(coef.get(v, ())) for v in self.vars)

    def shift(self, coef, f: int, g: int) -> tuple | None:
        """Box shift from iteration f to iteration g of an access with coefficients `coef` (None: none)."""
        a, b = self.digits(f), self.digits(g)
        out = None
        for v, x, y in zip(self.vars, a, b):
            cs = coef.get(v)
            if cs and y != x:
                out = [0] * len(cs) if out is None else out
                for d, c in enumerate(cs):
                    out[d] += c * (y - x)
        return tuple(out) if out is not None else None


def iteration(plan, loop: Loop) -> Iteration:
    inner = flat_inner(plan, loop)
    if inner is None:
        return Iteration(loop, (loop.var,), (loop.trip,), loop.body)
    return Iteration(loop, (loop.var, inner.var), (loop.trip, inner.trip), inner.body)


def flat_inner(plan, loop: Loop) -> Loop | None:
    """The inner loop of a perfect, uniform two-loop nest rooted at `loop`, else None."""
    if len(loop.body) != 1 or not isinstance(loop.body[0], Loop):
        return None
    inner = loop.body[0]
    if loop.trip < 2 or inner.trip < 2:
        return None
    names = {loop.var, inner.var}
    if names & set(plan.hoist_breaks):
        return None
    items = list(walk(inner.body))
    local = {ins.out.buffer for ins, _ in items if ins.op == "alloc"}
    by_root: dict = {}
    for ins, loops in items:
        inf = plan.info[id(ins)]
        if ins.op == "alloc":
            continue
        if inf.hoist is not None or names & set(inf.mask_vars):
            return None
        for kind, accs in ((0, inf.reads), (1, inf.writes)):
            for a in accs:
                if a.buf not in local:
                    by_root.setdefault(a.root, []).append((a, kind, loops))
    for accs in by_root.values():
        if not any(kind for _, kind, _ in accs):
            continue                    # read only in the body: no dependence inside the nest
        for x in accs:
            for y in accs:
                if (x[1] or y[1]) and not uniform_pair(x, y, loop, inner):
                    return None
    return inner


def uniform_pair(x, y, outer: Loop, inner: Loop) -> bool:
    """Do accesses x and y (AccInfo, kind, inner loops) overlap, and contain each other, alike for
    the shifts (dO, dI, rest) and (dO + 1, dI - TM, rest)?"""
    a, b = x[0], y[0]
    if a.coef != b.coef or len(a.base_lo) != len(b.base_lo):
        return False
    loops = {l.var: l.trip for l in list(x[2]) + list(y[2])}
    loops[outer.var], loops[inner.var] = outer.trip, inner.trip
    names = [outer.var, inner.var] + [v for v in loops if v not in (outer.var, inner.var)]
    ranges = [np.arange(-(outer.trip - 1), outer.trip - 1), np.arange(1, inner.trip)]
    ranges += [np.arange(-(loops[v] - 1), loops[v]) for v in names[2:]]
    if np.prod([len(r) for r in ranges], dtype=float) > MAX_PAIR_SHIFTS:
        return False
    grid = list(np.meshgrid(*ranges, indexing="ij"))
    nd = len(a.base_lo)
    coef = np.array([a.coef.get(v, (0,) * nd) for v in names], dtype=np.int64)      # [vars, dims]

    def relations(shift):
        # y shifted by `shift` against x: overlap and y-contains-x, per shift
        s = np.tensordot(np.stack(shift, -1), coef, axes=([-1], [0]))            # [..., dims]
        alo, ahi = np.array(a.base_lo), np.array(a.base_hi)
        blo, bhi = np.array(b.base_lo) + s, np.array(b.base_hi) + s
        over = ((alo <= bhi) & (blo <= ahi)).all(-1)
        cont = ((blo <= alo) & (ahi <= bhi)).all(-1)
        return over, cont

    carried = [grid[0] + 1, grid[1] - inner.trip] + grid[2:]
    o1, c1 = relations(grid)
    o2, c2 = relations(carried)
    return bool((o1 == o2).all() and (c1 == c2).all())
