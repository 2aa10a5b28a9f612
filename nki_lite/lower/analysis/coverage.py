"""Coverage: which elements of an output the kernel's writes reach. One analysis, two readers.

Contract:
- `fully_written(kernel, name)` is True only when one write instruction provably covers every
  element of output `name` (the JIT then skips NaN-filling it); False means "not proven". The proof
  handles the common "box" form: each output dimension's index is an affine expression of its own
  variables (loop variables, program ids, tile axes), each mask comparison involves the variables of
  a single dimension, and then the written set is the product over dimensions of the per-dimension
  value sets, each enumerated exactly.
- `uncovered(bufs, out, writes)` finds elements of output buffer `out` that no write reaches, for
  the verifier's partial-coverage warning (rule 11). `writes` are `Write`s: the access, the extents
  of its variables and its mask constraints (exact: callers pass only writes whose mask maps onto the
  access). It answers None (no gap found, or too large to decide) or `Gap(n, box, first)`: the count
  of unwritten elements, the bounding box of the gap as slice text, and the first unwritten element.
  First a cheap per-dimension test (masks ignored, so a superset of the written values: a coordinate
  no write reaches is an unwritten slab), then exact enumeration of every write within a budget.
Both enumerate with lower/analysis/ranges.py; pure functions of the IR; nothing raises.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ...core import ir
from ...core.affine import Affine, Cmp, axis_var
from ...core.ops import dynamic_access
from .accesses import flat_index
from .ranges import BUDGET, enumerate_points, holds, prod

COVER_POINTS = 1 << 18     # points enumerated in total by the exact coverage test
COVER_SIZE = 1 << 24       # outputs larger than this are not checked for gaps


def values_hit(expr: Affine, ext: Mapping[str, int], cons: Sequence[Cmp], dim: int,
               budget: int = BUDGET) -> np.ndarray | None:
    """Boolean [dim]: the values in [0, dim) that `expr` takes where `cons` hold (None: over budget)."""
    pts = enumerate_points([expr], ext, cons, budget)
    if pts is None:
        return None
    v = pts[0]
    hit = np.zeros(dim, dtype=bool)
    hit[v[(v >= 0) & (v < dim)]] = True
    return hit


# ------------------------------------------------------------------------------ fully written (JIT)

def _var_extents(instr: ir.Instr, loops, grid) -> dict[str, int]:
    ext = {f"pid{k}": g for k, g in enumerate(grid)}
    ext.update({lp.var: lp.trip for lp in loops})
    ext.update({axis_var(a): n for a, n in enumerate(instr.outs[0].shape)})
    return ext


def _per_dim_mask(instr: ir.Instr, dims_vars: list[set]) -> list[list] | None:
    """The mask's comparisons grouped by the one output dimension whose variables they use; None when
    the written set is not a box (a comparison spans dimensions, or a constant one is false)."""
    per_dim: list[list] = [[] for _ in dims_vars]
    for t in (instr.mask.terms if instr.mask is not None else ()):
        if not t.expr.vars():                      # a constant comparison
            if not holds(t.expr.const, t.op):
                return None
            continue
        owners = [d for d, vs in enumerate(dims_vars) if t.expr.vars() & vs]
        if len(owners) != 1 or not t.expr.vars() <= dims_vars[owners[0]]:
            return None
        per_dim[owners[0]].append(t)
    return per_dim


def _covers(kernel: ir.Kernel, buf: ir.Buffer, instr: ir.Instr, loops, acc: ir.Access) -> bool:
    dims_vars = [e.vars() for e in acc.index]
    if any(a & b for a, b in itertools.combinations(dims_vars, 2)):
        return False                                   # not a box: variables shared by dimensions
    per_dim = _per_dim_mask(instr, dims_vars)
    if per_dim is None:
        return False
    ext = _var_extents(instr, loops, kernel.grid or ())
    for d, e in enumerate(acc.index):
        hit = values_hit(e, ext, per_dim[d], buf.shape[d])
        if hit is None or not hit.all():
            return False
    return True


def fully_written(kernel: ir.Kernel, name: str) -> bool:
    buf = kernel.buffer(name)
    for instr, loops in ir.walk(kernel.body):
        if any(lp.trip <= 0 or lp.dynamic for lp in loops):
            continue       # (a dynamic loop may run no iteration)
        if dynamic_access(instr) is not None:
            continue       # the rows an indirect write reaches are known only at run time
        for acc in instr.outs:
            if acc.buffer == name and _covers(kernel, buf, instr, loops, acc):
                return True
    return False


# ------------------------------------------------------------------------------ gaps (verifier)

@dataclass(frozen=True)
class Write:
    acc: ir.Access
    extents: Mapping[str, int]
    cons: tuple


@dataclass(frozen=True)
class Gap:
    n: int          # elements never written
    box: str        # their bounding box, e.g. "290:300, 0:64"
    first: str      # one of them, e.g. "290, 0"


def uncovered(bufs: Mapping[str, ir.Buffer], out: ir.Buffer, writes: Sequence[Write]) -> Gap | None:
    if prod(out.shape) > COVER_SIZE:
        return None
    gap = _uncovered_slab(bufs, out, writes)
    return gap if gap is not None else _uncovered_exact(bufs, out, writes)


def _uncovered_slab(bufs, out: ir.Buffer, writes: Sequence[Write]) -> Gap | None:
    """Cheap and sound: per dimension, the values each write's index can take (masks ignored, so a
    superset); a coordinate no write reaches is an unwritten slab of the output."""
    if any(bufs[w.acc.buffer].base is not None for w in writes):
        return None
    for d, dim in enumerate(out.shape):
        hit = np.zeros(dim, dtype=bool)
        for w in writes:
            h = values_hit(w.acc.index[d], w.extents, (), dim)
            if h is None:
                return None
            hit |= h
        if not hit.all():
            miss = np.nonzero(~hit)[0]
            n = int(miss.size) * prod(out.shape) // dim
            box = ", ".join(f"{int(miss.min())}:{int(miss.max()) + 1}" if a == d else ":"
                            for a in range(len(out.shape)))
            first = ", ".join(str(int(miss[0])) if a == d else "0" for a in range(len(out.shape)))
            return Gap(n, box, first)
    return None


def _flat_written(bufs, out: ir.Buffer, w: Write):
    """Flat element offsets into `out` that write `w` reaches (in range), or None over budget."""
    b = bufs[w.acc.buffer]
    if b.base is None:
        pts = enumerate_points(list(w.acc.index), w.extents, w.cons, COVER_POINTS)
        if pts is None:
            return None
        ok = np.ones(pts[0].shape[0], dtype=bool)
        flat = np.zeros(pts[0].shape[0], dtype=np.int64)
        for d, arr in enumerate(pts):
            ok &= (arr >= 0) & (arr < out.shape[d])
            flat = flat * out.shape[d] + arr
        return flat[ok]
    pts = enumerate_points([flat_index(b.shape, w.acc.index)], w.extents, w.cons, COVER_POINTS)
    if pts is None:
        return None
    flat = pts[0]
    return flat[(flat >= 0) & (flat < prod(out.shape))]


def _uncovered_exact(bufs, out: ir.Buffer, writes: Sequence[Write]) -> Gap | None:
    size = prod(out.shape)
    if sum(prod(w.extents.values()) for w in writes) > COVER_POINTS:
        return None
    covered = np.zeros(size, dtype=bool)
    for w in writes:
        flat = _flat_written(bufs, out, w)
        if flat is None:
            return None
        covered[flat] = True
    if covered.all():
        return None
    missing = np.nonzero(~covered.reshape(out.shape))
    n = int((~covered).sum())
    box = ", ".join(f"{int(m.min())}:{int(m.max()) + 1}" for m in missing)
    first = ", ".join(str(int(m[0])) for m in missing)
    return Gap(n, box, first)
