"""Shared machinery of the trace-time verifier (lower/verify.py and the verify_* rule families).

Contract:
- `Ctx` is one verification run: the kernel, its `Target`, every instruction as a `Site` (program
  position + enclosing loops), the extents of loop variables and program ids, and helpers to name
  variables the way the user wrote them.
- `solve_range(e, extents, cons)` is the exact integer range of an affine expression over a box
  (every variable in [0, extent)) intersected with affine constraints (`Cmp`s, i.e. a mask). It
  answers a `Range` (with witness points), `EMPTY` (no point satisfies the constraints) or `None`
  (undecided within the budget). Over the budget it may answer a `Range` with `exact=False`: sound
  outer bounds from the constraints proportional to `e`, good for proving an access in bounds and
  never for raising an error.
- `access_space(ctx, site, role, k, acc)` maps an instruction's mask onto one of its accesses (the
  mask is over the instruction's iteration space; an access axis of extent 1 where the space has more
  is a reduction/broadcast: that mask variable becomes existential). `certain=False` when the mask
  cannot be related to the access: callers then raise nothing about it.
- Nothing here raises NkiLiteErrors; nothing uses `assert` (validation must survive `python -O`).
"""
from __future__ import annotations

import linecache
import math
import os
import re
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import numpy as np

from ..core import dtypes as D
from ..core.affine import Affine, Cmp, axis_of, is_axis_var
from ..core.targets import TARGETS, Target
from ..core.ir import Access, Buffer, Instr, Kernel, Loop, Space
from ..core.ops import input_space, mask_applies

BUDGET = 1 << 20          # points enumerated per question before giving up (never an error)

_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
        "==": np.equal, "!=": np.not_equal}
_CMP_PY = {"<": lambda a: a < 0, "<=": lambda a: a <= 0, ">": lambda a: a > 0, ">=": lambda a: a >= 0,
           "==": lambda a: a == 0, "!=": lambda a: a != 0}

# is_compute, is_dma, engine_of, mask_applies: op traits (core/ops.py)


# ------------------------------------------------------------------------------ program structure

@dataclass
class Site:
    instr: Instr
    loops: tuple[Loop, ...]
    pos: int

    @property
    def loc(self):
        return self.instr.loc

    @property
    def executes(self) -> bool:
        return all(l.trip > 0 for l in self.loops)


@dataclass
class Ctx:
    kernel: Kernel
    target: Target
    bufs: dict[str, Buffer]
    sites: list[Site]
    loop_span: dict[int, tuple[int, int]]       # id(loop) -> (first pos, last pos) in program order
    loop_name: dict[str, tuple[str, int, int, Loop]] = field(default_factory=dict)  # var -> (user name, start, step, loop)

    @staticmethod
    def build(kernel: Kernel) -> "Ctx":
        target = TARGETS.get(kernel.target) or TARGETS["trn2"]
        sites: list[Site] = []
        span: dict[int, tuple[int, int]] = {}
        names: dict[str, tuple[str, int, int, Loop]] = {}

        def walk(nodes, loops):
            for n in nodes:
                if isinstance(n, Loop):
                    first = len(sites)
                    names[n.var] = (_loop_user_name(n), n.start, n.step, n)
                    walk(n.body, loops + (n,))
                    span[id(n)] = (first, max(first, len(sites) - 1))
                else:
                    sites.append(Site(n, loops, len(sites)))
        walk(kernel.body, ())
        return Ctx(kernel, target, kernel.buffer_map, sites, span, names)

    # ---- buffers
    def buf(self, name: str) -> Buffer:
        return self.bufs[name]

    def root(self, name: str) -> Buffer:
        b = self.bufs[name]
        seen = 0
        while b.base is not None and b.base in self.bufs and seen < 64:
            b = self.bufs[b.base]
            seen += 1
        return b

    # ---- variables
    def extents(self, loops: Sequence[Loop]) -> dict[str, int]:
        ext = {f"pid{k}": g for k, g in enumerate(self.kernel.grid)}
        for l in loops:
            ext[l.var] = l.trip
        return ext

    def var_label(self, var: str) -> str:
        if var in self.loop_name:
            return self.loop_name[var][0]
        if var.startswith("pid"):
            return f"nl.program_id({var[3:]})"
        return var

    def user_value(self, var: str, value: int) -> int:
        if var in self.loop_name:
            _, start, step, _ = self.loop_name[var]
            return start + step * value
        return value


def _loop_user_name(loop: Loop) -> str:
    """The name the user gave the loop variable (`for NAME in nl.affine_range(...)`), else the IR var."""
    if loop.loc is not None and loop.loc.line > 0:
        src = linecache.getline(loop.loc.file, loop.loc.line)
        m = re.search(r"\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b", src)
        if m:
            return m.group(1)
    return loop.var


def accesses(instr: Instr) -> Iterator[tuple[str, int, Access]]:
    """('out', k, access) for every output, then ('in', k, access) for every Access input."""
    for k, a in enumerate(instr.outs):
        yield "out", k, a
    for k, a in enumerate(instr.ins):
        if isinstance(a, Access):
            yield "in", k, a


def itemsize(dtype: str) -> int:
    try:
        return D.itemsize(dtype)
    except KeyError:
        return 4


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def short(loc) -> str:
    if loc is None or getattr(loc, "line", 0) <= 0:
        return "<unknown>"
    return f"{os.path.basename(loc.file)}:{loc.line}"


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def buf_desc(b: Buffer) -> str:
    return f"{b.space.value}{fmt_shape(b.shape)} {b.dtype}"


# ------------------------------------------------------------------------------ partition axis

MULTI = -2


def partition_axis(buf: Buffer, acc: Access) -> int | None:
    """Tile axis of `acc` that carries the buffer's partition dimension: None when no axis does
    (a broadcast or fixed partition), MULTI when several do."""
    if buf.space == Space.HBM or buf.par_axis >= len(acc.index):
        return None
    axes = sorted({axis_of(v) for v in acc.index[buf.par_axis].vars() if is_axis_var(v)})
    if not axes:
        return None
    if len(axes) > 1:
        return MULTI
    return axes[0]


# ------------------------------------------------------------------------------ masks

def iteration_space(instr: Instr) -> tuple[int, ...] | None:
    if input_space(instr) or not instr.outs:
        for a in instr.ins:
            if isinstance(a, Access):
                return a.shape
        return instr.outs[0].shape if instr.outs else None
    return instr.outs[0].shape


@dataclass
class AccessSpace:
    """Everything needed to ask questions about the points an access touches."""
    extents: dict[str, int]
    cons: tuple[Cmp, ...]
    certain: bool          # False: the mask could not be mapped onto this access (never raise)


def access_space(ctx: Ctx, site: Site, role: str, k: int, acc: Access) -> AccessSpace:
    ext = ctx.extents(site.loops)
    for a, n in enumerate(acc.shape):
        ext[f"@{a}"] = n
    instr = site.instr
    if instr.mask is None or not mask_applies(instr, role, k):
        return AccessSpace(ext, (), True)
    S = iteration_space(instr)
    if S is None or len(S) != len(acc.shape):
        return AccessSpace(ext, (), False)
    mapping: dict[str, Affine] = {}
    for a, (n_acc, n_sp) in enumerate(zip(acc.shape, S)):
        if n_acc == n_sp:
            continue
        if n_acc == 1:
            ev = f"?{a}"
            mapping[f"@{a}"] = Affine.var(ev)
            ext[ev] = n_sp
        else:
            return AccessSpace(ext, (), False)
    cons = instr.mask.subst(mapping).terms if mapping else instr.mask.terms
    # a mask axis the space does not have would be a frontend bug; be conservative
    for c in cons:
        for v in c.expr.vars():
            if v not in ext:
                return AccessSpace(ext, (), False)
    return AccessSpace(ext, tuple(cons), True)


# ------------------------------------------------------------------------------ integer ranges

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
        if wlo is not None:
            b = p * wlo + e.const
            if p > 0:
                lo = max(lo, b)
            else:
                hi = min(hi, b)
        if whi is not None:
            b = p * whi + e.const
            if p > 0:
                hi = min(hi, b)
            else:
                lo = max(lo, b)
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


def _solve_component(vs: set[str], cons: Sequence[Cmp], e: Affine | None, ext: Mapping[str, int],
                     budget: int):
    vs_sorted = sorted(vs)
    if not cons:
        if e is None:
            return Range(0, 0, {v: 0 for v in vs_sorted}, {v: 0 for v in vs_sorted})
        lo, hi = e.bounds(ext)
        at_lo = {v: (0 if e.coeff(v) >= 0 else ext[v] - 1) for v in vs_sorted}
        at_hi = {v: (ext[v] - 1 if e.coeff(v) >= 0 else 0) for v in vs_sorted}
        return Range(lo, hi, at_lo, at_hi)
    z = max(vs_sorted, key=lambda v: (ext[v], v))
    rest = [v for v in vs_sorted if v != z]
    n = prod(ext[v] for v in rest)
    if n > budget:
        return None
    if rest:
        grid = np.indices([ext[v] for v in rest], dtype=np.int64).reshape(len(rest), -1)
    else:
        grid = np.zeros((0, 1), dtype=np.int64)
    N = grid.shape[1]
    col = {v: i for i, v in enumerate(rest)}

    def val(expr: Affine) -> np.ndarray:
        out = np.full(N, expr.const, dtype=np.int64)
        for v, c in expr.terms:
            if v != z:
                out += c * grid[col[v]]
        return out

    zext = ext[z]
    L = np.zeros(N, dtype=np.int64)
    U = np.full(N, zext - 1, dtype=np.int64)
    ok = np.ones(N, dtype=bool)
    excl: list[np.ndarray] = []
    for c in cons:
        r = val(c.expr)
        a = c.expr.coeff(z)
        if a == 0:
            ok &= _CMP[c.op](r, 0)
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
    for _ in range(len(excl) + 1):
        for ex in excl:
            L = np.where(L == ex, L + 1, L)
            U = np.where(U == ex, U - 1, U)
    ok &= L <= U
    if not ok.any():
        return EMPTY

    def assignment(row: int, zval: int) -> dict[str, int]:
        d = {v: int(grid[col[v], row]) for v in rest}
        d[z] = int(zval)
        return d

    if e is None:
        row = int(np.argmax(ok))
        w = assignment(row, L[row])
        return Range(0, 0, w, w)
    cz = e.coeff(z)
    s = val(e)
    vL, vU = s + cz * L, s + cz * U
    hi_v = np.where(ok, np.maximum(vL, vU), np.iinfo(np.int64).min)
    lo_v = np.where(ok, np.minimum(vL, vU), np.iinfo(np.int64).max)
    rh, rl = int(np.argmax(hi_v)), int(np.argmin(lo_v))
    zh = L[rh] if vL[rh] >= vU[rh] else U[rh]
    zl = L[rl] if vL[rl] <= vU[rl] else U[rl]
    return Range(int(lo_v[rl]), int(hi_v[rh]), assignment(rl, zl), assignment(rh, zh))


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
        keep &= _CMP[c.op](val(c.expr), 0)
    return [val(e)[keep] for e in exprs]


# ------------------------------------------------------------------------------ rendering

def axis_name(k: int, rank: int) -> str:
    if k == 0:
        return "ip"
    return "i_f" if rank == 2 else f"i_f{k}"


def arange_text(k: int, rank: int, n: int) -> str:
    lift = ", ".join(":" if a == k else "None" for a in range(rank))
    return f"nl.arange({n})[{lift}]" if rank > 1 else f"nl.arange({n})"


def render(ctx: Ctx, e: Affine, shape: tuple[int, ...]) -> tuple[str, list[str]]:
    """`e` in the user's terms (loop variables by their source names, axes as ip / i_f) + a legend."""
    rank = len(shape)
    const = e.const
    loops, pids, axes, other = [], [], [], []
    legend: list[str] = []
    for v, c in e.terms:
        if v in ctx.loop_name:
            name, start, step, _ = ctx.loop_name[v]
            if step and c % step == 0:
                k = c // step
                const -= k * start
                loops.append((v, name, k))
            else:
                loops.append((v, v, c))
                legend.append(f"{v} counts the iterations of the loop over `{name}` from 0")
        elif v.startswith("pid"):
            pids.append((v, f"nl.program_id({v[3:]})", c))
        elif is_axis_var(v):
            a = axis_of(v)
            nm = axis_name(a, rank)
            axes.append((v, nm, c))
            n = shape[a] if a < rank else 1
            legend.append(f"{nm} = {arange_text(a, rank, n)}")
        else:
            other.append((v, v, c))
    loops.sort(key=lambda t: int(t[0][1:]) if t[0][1:].isdigit() else 0)
    parts = []
    for _, name, c in loops + pids + axes + other:
        parts.append(name if c == 1 else f"-{name}" if c == -1 else f"{name} * {c}")
    if const or not parts:
        parts.append(str(const))
    text = " + ".join(parts).replace("+ -", "- ")
    return text, legend


def render_point(ctx: Ctx, point: Mapping[str, int], shape: tuple[int, ...], only: set[str] | None = None) -> str:
    items = []
    rank = len(shape)
    keys = sorted(point, key=lambda v: (0 if v in ctx.loop_name else 1 if v.startswith("pid") else 2, v))
    for v in keys:
        if only is not None and v not in only:
            continue
        if v in ctx.loop_name:
            items.append(f"{ctx.var_label(v)}={ctx.user_value(v, point[v])}")
        elif v.startswith("pid"):
            items.append(f"{ctx.var_label(v)}={point[v]}")
        elif is_axis_var(v):
            items.append(f"{axis_name(axis_of(v), rank)}={point[v]}")
    return ", ".join(items)
