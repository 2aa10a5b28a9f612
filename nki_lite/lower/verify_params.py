"""Verifier rules 10 and 11: writes to immutable parameters, outputs that are never written.

Rule 10 (immutable_parameter): an instruction whose output is a kernel input (or an HBM view of
one) that is not annotated nt.mutable_tensor.
Rule 11 (output_not_written): a returned HBM output (created in the kernel) that no executed
instruction writes: no write at all, writes only inside loops with zero iterations, or only
writes whose mask is never true. Partial coverage is a warning (OutputCoverageWarning, re-exported by verify) when
it is cheap to prove: every write to the output is enumerated exactly (masks, loops and the launch
grid included) when that takes at most a few million points.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import errors
from ..core.ir import Space
from .analysis.accesses import flat_index
from .analysis.ranges import BUDGET, EMPTY, enumerate_points, prod, solve_range
from .verify_common import Ctx, access_space, short

class OutputCoverageWarning(UserWarning):
    """A returned output is provably only partly written (the rest keeps uninitialised memory)."""


_COVER_POINTS = 1 << 18
_COVER_SIZE = 1 << 24


def check_immutable(ctx: Ctx, site) -> None:
    instr = site.instr
    for acc in instr.outs:
        b = ctx.buf(acc.buffer)
        if b.space != Space.HBM:
            continue
        root = ctx.root(acc.buffer)
        if root.kind == "input" and not root.mutable:
            via = f" (through the view '{b.name}')" if b.name != root.name else ""
            raise errors.make(
                "immutable_parameter",
                f"'{instr.op}' writes kernel parameter '{root.name}'{via}, which is immutable: kernel inputs are "
                "read-only unless annotated nt.mutable_tensor",
                loc=instr.loc,
                hint=f"write a new output instead (out = nl.ndarray({root.name}.shape, dtype={root.name}.dtype, "
                     f"buffer=nl.shared_hbm) ... return out), or annotate the parameter "
                     f"`{root.name}: nt.mutable_tensor` and return it")


def check_outputs(ctx: Ctx) -> None:
    for name in ctx.kernel.outputs:
        out = ctx.buf(name)
        if out.space != Space.HBM or out.kind != "output":
            continue
        if 0 in out.shape:              # an empty output has no element left unwritten
            continue
        writes, dead = [], []
        for s in ctx.sites:
            for k, acc in enumerate(s.instr.outs):
                if ctx.root(acc.buffer).name != name:
                    continue
                if not s.executes:
                    dead.append(s)
                    continue
                sp = access_space(ctx, s, "out", k, acc)
                if sp.certain and sp.cons and solve_range(None, sp.extents, sp.cons) is EMPTY:
                    dead.append(s)
                    continue
                writes.append((s, k, acc, sp))
        if not writes:
            if dead:
                s = dead[0]
                zero = next((l for l in s.loops if l.trip <= 0), None)
                if zero is not None:
                    lname = ctx.var_label(zero.var)
                    raise errors.make(
                        "output_not_written",
                        f"output '{name}' is never written: its only write(s) (first at {short(s.loc)}) are inside "
                        f"the loop over `{lname}` at {short(zero.loc)}, which runs 0 times",
                        loc=zero.loc,
                        hint="the loop's trip count is 0 (e.g. range(M // N) with N > M): use math.ceil(M / N) and "
                             "mask the ragged last tile")
                raise errors.make(
                    "output_not_written",
                    f"output '{name}' is never written: the mask of its only write(s) (first at {short(s.loc)}) "
                    "is never true",
                    loc=s.loc, hint="check the mask= of the store")
            raise errors.make(
                "output_not_written",
                f"output '{name}' ({out.space.value}{list(out.shape)} {out.dtype}) is returned but no instruction "
                "writes it",
                loc=out.loc or ctx.kernel.loc,
                hint=f"store into it (nl.store({name}[...], value=tile)) before returning it; check loop trip "
                     "counts and conditions around the stores")
        _coverage(ctx, out, writes, OutputCoverageWarning)


def _coverage(ctx: Ctx, out, writes, warn_cls) -> None:
    size = prod(out.shape)
    if size > _COVER_SIZE or any(not sp.certain for _, _, _, sp in writes):
        return
    missing = _uncovered_slab(ctx, out, writes)
    if missing is None:
        missing = _uncovered_exact(ctx, out, writes)
    if missing is None:
        return
    n, box, first = missing
    msg = (f"output '{out.name}' is only partly written: {n} of {size} elements are never written (all inside "
           f"{out.name}[{box}], e.g. {out.name}[{first}]); they keep whatever the memory held (NaN in the "
           f"interpreter). Check loop trip counts (math.ceil) and masks")
    loc = out.loc or ctx.kernel.loc
    if loc is not None and loc.line > 0:
        warnings.warn_explicit(warn_cls(f"{short(loc)}: {msg}"), warn_cls, loc.file, loc.line)
    else:
        warnings.warn(warn_cls(msg), stacklevel=2)


def _uncovered_slab(ctx: Ctx, out, writes):
    """Cheap and sound: per dimension, the values each write's index can take (masks ignored, so a
    superset); a coordinate no write reaches is an unwritten slab of the output."""
    if any(ctx.buf(acc.buffer).base is not None for _, _, acc, _ in writes):
        return None
    for d, dim in enumerate(out.shape):
        hit = np.zeros(dim, dtype=bool)
        for s, k, acc, sp in writes:
            pts = enumerate_points([acc.index[d]], sp.extents, (), BUDGET)
            if pts is None:
                return None
            v = pts[0]
            hit[v[(v >= 0) & (v < dim)]] = True
        if not hit.all():
            miss = np.nonzero(~hit)[0]
            n = int(miss.size) * prod(out.shape) // dim
            box = ", ".join(f"{int(miss.min())}:{int(miss.max()) + 1}" if a == d else ":"
                            for a in range(len(out.shape)))
            first = ", ".join(str(int(miss[0])) if a == d else "0" for a in range(len(out.shape)))
            return n, box, first
    return None


def _uncovered_exact(ctx: Ctx, out, writes):
    size = prod(out.shape)
    if sum(prod(sp.extents.values()) for _, _, _, sp in writes) > _COVER_POINTS:
        return None
    covered = np.zeros(size, dtype=bool)
    for s, k, acc, sp in writes:
        b = ctx.buf(acc.buffer)
        if b.base is None:
            pts = enumerate_points(list(acc.index), sp.extents, sp.cons, _COVER_POINTS)
            if pts is None:
                return None
            ok = np.ones(pts[0].shape[0], dtype=bool)
            flat = np.zeros(pts[0].shape[0], dtype=np.int64)
            for d, arr in enumerate(pts):
                ok &= (arr >= 0) & (arr < out.shape[d])
                flat = flat * out.shape[d] + arr
        else:
            pts = enumerate_points([flat_index(b.shape, acc.index)], sp.extents, sp.cons, _COVER_POINTS)
            if pts is None:
                return None
            flat = pts[0]
            ok = (flat >= 0) & (flat < size)
        covered[flat[ok]] = True
    if covered.all():
        return None
    missing = np.nonzero(~covered.reshape(out.shape))
    n = int((~covered).sum())
    box = ", ".join(f"{int(m.min())}:{int(m.max()) + 1}" for m in missing)
    first = ", ".join(str(int(m[0])) for m in missing)
    return n, box, first
