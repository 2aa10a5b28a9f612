"""Exact integer ranges of affine expressions over boxes with affine constraints (masks).

Contract:
- `solve_range(e, extents, cons)` is the exact integer range of an affine expression over a box
  (every variable in [0, extent)) intersected with affine constraints (`Cmp`s, i.e. a mask). It
  answers a `Range` (with witness points), `EMPTY` (no point satisfies the constraints) or `None`
  (undecided within the budget). Over the budget it may answer a `Range` with `exact=False`: sound
  outer bounds from the constraints proportional to `e`, good for proving an access in bounds and
  never for raising an error.
- `enumerate_points(exprs, extents, cons)` lists the values of expressions at every point of the box
  satisfying the constraints (None over budget): the brute-force counterpart for questions the
  interval reasoning cannot answer (coverage, dependence witnesses, block sets).
Method: variables are split into independent components (union-find over shared constraints); per
component the widest variable is solved analytically (its bounds per constraint) and the others
enumerated. Pure functions of their arguments; nothing raises; no `assert`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ...core.affine import Affine, Cmp

BUDGET = 1 << 20          # points enumerated per question before giving up (never an error)

CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
       "==": np.equal, "!=": np.not_equal}
_CMP_PY = {"<": lambda a: a < 0, "<=": lambda a: a <= 0, ">": lambda a: a > 0, ">=": lambda a: a >= 0,
           "==": lambda a: a == 0, "!=": lambda a: a != 0}


def holds(value: int, op: str) -> bool:
    """Does the constant comparison `value op 0` hold?"""
    return _CMP_PY[op](value)


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


EMPTY = "empty"


@dataclass
class Range:
    lo: int
    hi: int
    at_lo: dict[str, int]
    at_hi: dict[str, int]
    exact: bool = True      # False: sound outer bounds only (lo/hi may not be attained; no witnesses)


def _proportional_bounds(e: Affine, ext: Mapping[str, int], cons: Sequence[Cmp]):
    """Sound outer bounds of `e` over the box and the constraints whose variable part is an integer
    multiple of e's (e.g. index `i*128 + ip` with mask `i*128 + ip - 1000 < 0`); other constraints
    are ignored, which only widens the bounds. EMPTY when those constraints exclude everything."""
    lo, hi = e.bounds(ext)
    terms = dict(e.terms)
    if not terms:
        return Range(lo, hi, {}, {}, exact=False)
    g = 0
    for c in terms.values():
        g = math.gcd(g, abs(c))
    first = e.terms[0][1]
    p = g if first > 0 else -g                     # e = p * w + e.const with w primitive
    w = {v: c // p for v, c in terms.items()}
    for c in cons:
        ct = dict(c.expr.terms)
        if set(ct) != set(w):
            continue
        v0 = next(iter(w))
        if ct[v0] % w[v0]:
            continue
        q = ct[v0] // w[v0]
        if any(ct[v] != q * w[v] for v in w):
            continue
        k = c.expr.const                           # constraint: q*w + k  op  0
        wlo, whi = None, None
        if c.op in ("<", "<="):
            m = -k - 1 if c.op == "<" else -k      # q*w <= m
            if q > 0:
                whi = m // q
            else:
                wlo = -(m // -q)
        elif c.op in (">", ">="):
            m = -k + 1 if c.op == ">" else -k      # q*w >= m
            if q > 0:
                wlo = -(-m // q)
            else:
                whi = -m // -q
        elif c.op == "==":
            if (-k) % q:
                return EMPTY
            wlo = whi = (-k) // q
        else:
            continue
        for bound, is_lower in ((wlo, True), (whi, False)):
            if bound is None:
                continue
            b = p * bound + e.const                # a bound on w bounds p*w + c on the side p's sign gives
            if (p > 0) == is_lower:
                lo = max(lo, b)
            else:
                hi = min(hi, b)
        if lo > hi:
            return EMPTY
    return Range(lo, hi, {}, {}, exact=False)


def _components(vs_e: set[str], cons: Sequence[Cmp]) -> list[tuple[set[str], list[Cmp], bool]]:
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    vs_e = set(vs_e)
    ev = sorted(vs_e)
    for v in ev:
        find(v)
    for a, b in zip(ev, ev[1:]):
        union(a, b)
    for c in cons:
        cv = sorted(c.expr.vars())
        for v in cv:
            find(v)
        for a, b in zip(cv, cv[1:]):
            union(a, b)
    groups: dict[str, tuple[set[str], list[Cmp]]] = {}
    for v in list(parent):
        groups.setdefault(find(v), (set(), []))[0].add(v)
    for c in cons:
        v = next(iter(c.expr.vars()))
        groups[find(v)][1].append(c)
    e_root = find(ev[0]) if ev else None
    return [(vs, cs, r == e_root) for r, (vs, cs) in groups.items()]


def _unconstrained(vs_sorted: list[str], e: Affine | None, ext: Mapping[str, int]) -> "Range":
    if e is None:
        return Range(0, 0, {v: 0 for v in vs_sorted}, {v: 0 for v in vs_sorted})
    lo, hi = e.bounds(ext)
    at_lo = {v: (0 if e.coeff(v) >= 0 else ext[v] - 1) for v in vs_sorted}
    at_hi = {v: (ext[v] - 1 if e.coeff(v) >= 0 else 0) for v in vs_sorted}
    return Range(lo, hi, at_lo, at_hi)


class _Grid:
    """Every assignment of the enumerated variables `rest` (one column each); `z` is solved."""

    def __init__(self, rest: list[str], z: str, ext: Mapping[str, int]):
        self.rest, self.z = rest, z
        if rest:
            self.grid = np.indices([ext[v] for v in rest], dtype=np.int64).reshape(len(rest), -1)
        else:
            self.grid = np.zeros((0, 1), dtype=np.int64)
        self.n = self.grid.shape[1]
        self.col = {v: i for i, v in enumerate(rest)}

    def val(self, expr: Affine) -> np.ndarray:
        """expr without its z term, at every grid point."""
        out = np.full(self.n, expr.const, dtype=np.int64)
        for v, c in expr.terms:
            if v != self.z:
                out += c * self.grid[self.col[v]]
        return out

    def assignment(self, row: int, zval: int) -> dict[str, int]:
        d = {v: int(self.grid[self.col[v], row]) for v in self.rest}
        d[self.z] = int(zval)
        return d


def _z_bounds(g: _Grid, cons: Sequence[Cmp], zext: int):
    """Per grid point: the interval [L, U] of z satisfying every constraint, and whether any does."""
    z = g.z
    L = np.zeros(g.n, dtype=np.int64)
    U = np.full(g.n, zext - 1, dtype=np.int64)
    ok = np.ones(g.n, dtype=bool)
    excl: list[np.ndarray] = []
    for c in cons:
        r = g.val(c.expr)
        a = c.expr.coeff(z)
        if a == 0:
            ok &= CMP[c.op](r, 0)
            continue
        if c.op in ("==", "!="):
            div = np.mod(-r, a) == 0
            z0 = np.floor_divide(-r, a)
            if c.op == "==":
                ok &= div
                L = np.maximum(L, z0)
                U = np.minimum(U, z0)
            else:
                excl.append(np.where(div, z0, -1))
            continue
        if c.op == "<":
            b, m = a, -r - 1
        elif c.op == "<=":
            b, m = a, -r
        elif c.op == ">":
            b, m = -a, r - 1
        else:  # ">="
            b, m = -a, r
        if b > 0:
            U = np.minimum(U, np.floor_divide(m, b))
        else:
            L = np.maximum(L, -np.floor_divide(m, -b))
    for _ in range(len(excl) + 1):          # "!=" excludes one value: shrink the ends past it
        for ex in excl:
            L = np.where(L == ex, L + 1, L)
            U = np.where(U == ex, U - 1, U)
    return L, U, ok & (L <= U)


def _solve_component(vs: set[str], cons: Sequence[Cmp], e: Affine | None, ext: Mapping[str, int],
                     budget: int):
    vs_sorted = sorted(vs)
    if not cons:
        return _unconstrained(vs_sorted, e, ext)
    z = max(vs_sorted, key=lambda v: (ext[v], v))      # the widest variable is solved, not enumerated
    rest = [v for v in vs_sorted if v != z]
    if prod(ext[v] for v in rest) > budget:
        return None
    g = _Grid(rest, z, ext)
    L, U, ok = _z_bounds(g, cons, ext[z])
    if not ok.any():
        return EMPTY
    if e is None:
        row = int(np.argmax(ok))
        w = g.assignment(row, L[row])
        return Range(0, 0, w, w)
    cz = e.coeff(z)
    s = g.val(e)
    vL, vU = s + cz * L, s + cz * U
    hi_v = np.where(ok, np.maximum(vL, vU), np.iinfo(np.int64).min)
    lo_v = np.where(ok, np.minimum(vL, vU), np.iinfo(np.int64).max)
    rh, rl = int(np.argmax(hi_v)), int(np.argmin(lo_v))
    zh = L[rh] if vL[rh] >= vU[rh] else U[rh]
    zl = L[rl] if vL[rl] <= vU[rl] else U[rl]
    return Range(int(lo_v[rl]), int(hi_v[rh]), g.assignment(rl, zl), g.assignment(rh, zh))


def solve_range(e: Affine | None, ext: Mapping[str, int], cons: Sequence[Cmp] = (), budget: int = BUDGET):
    """Exact [min, max] of `e` over integer points with every var in [0, ext) satisfying `cons`.

    `e=None` asks only whether the set is non-empty. Returns Range, EMPTY, or None (undecided).
    When the exact answer is over budget, a Range with exact=False holds sound outer bounds (from the
    constraints proportional to `e`): callers may conclude "in bounds" from it, never an error."""
    live = []
    for c in cons:
        if c.expr.is_const:
            if not _CMP_PY[c.op](c.expr.const):
                return EMPTY
        else:
            live.append(c)
    vs_e = e.vars() if e is not None else set()
    for v in vs_e | {v for c in live for v in c.expr.vars()}:
        if v not in ext:
            return None
        if ext[v] <= 0:
            return EMPTY
    result = None
    at_lo: dict[str, int] = {}
    at_hi: dict[str, int] = {}
    for vs, cs, has_e in _components(vs_e, live):
        r = _solve_component(vs, cs, e if has_e else None, ext, budget)
        if r is None and has_e and e is not None:
            return _proportional_bounds(e, ext, cs)
        if r is None or r is EMPTY:
            return r
        at_lo.update(r.at_lo)
        at_hi.update(r.at_hi)
        if has_e:
            result = r
    if e is None:
        return Range(0, 0, at_lo, at_hi)
    if result is None:          # e is a constant
        return Range(e.const, e.const, at_lo, at_hi)
    return Range(result.lo, result.hi, {**at_lo, **result.at_lo}, {**at_hi, **result.at_hi})


def enumerate_points(exprs: Sequence[Affine], ext: Mapping[str, int], cons: Sequence[Cmp] = (),
                     budget: int = BUDGET) -> list[np.ndarray] | None:
    """Values of `exprs` at every point of the box satisfying `cons` (None: over budget)."""
    vs = sorted({v for e in exprs for v in e.vars()} | {v for c in cons for v in c.expr.vars()})
    for v in vs:
        if v not in ext:
            return None
    n = prod(ext[v] for v in vs)
    if n > budget:
        return None
    if n == 0:
        return [np.zeros(0, dtype=np.int64) for _ in exprs]
    grid = (np.indices([ext[v] for v in vs], dtype=np.int64).reshape(len(vs), -1) if vs
            else np.zeros((0, 1), dtype=np.int64))
    col = {v: i for i, v in enumerate(vs)}
    N = grid.shape[1]

    def val(expr: Affine) -> np.ndarray:
        out = np.full(N, expr.const, dtype=np.int64)
        for v, c in expr.terms:
            out += c * grid[col[v]]
        return out

    keep = np.ones(N, dtype=bool)
    for c in cons:
        keep &= CMP[c.op](val(c.expr), 0)
    return [val(e)[keep] for e in exprs]
