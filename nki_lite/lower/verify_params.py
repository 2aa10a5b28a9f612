"""Verifier rules 10 and 11: writes to immutable parameters, outputs that are never written.

Rule 10 (immutable_parameter): an instruction whose output is a kernel input (or an HBM view of
one) that is not annotated nt.mutable_tensor; a write to a tensor read through an element-size-changing
view (MX x4 `.ap(dtype=)`) is NL-E904.
Rule 11 (output_not_written): a returned HBM output (created in the kernel) that no executed
instruction writes: no write at all, writes only inside loops with zero iterations, or only
writes whose mask is never true. Partial coverage is a warning (OutputCoverageWarning, re-exported by verify) when
it is cheap to prove: every write to the output is enumerated exactly (masks, loops and the launch
grid included) when that takes at most a few million points.
"""
from __future__ import annotations

import warnings

from .. import errors
from ..core import dtypes as D
from ..core.ir import Space
from ..core.ops import dynamic_access
from .analysis.coverage import Write, uncovered
from .analysis.ranges import EMPTY, prod, solve_range
from .verify_common import Ctx, access_space, short

class OutputCoverageWarning(UserWarning):
    """A returned output is provably only partly written (the rest keeps uninitialised memory)."""




def check_immutable(ctx: Ctx, site) -> None:
    instr = site.instr
    for acc in instr.outs:
        b = ctx.buf(acc.buffer)
        if b.space != Space.HBM:
            continue
        root = ctx.root(acc.buffer)
        if root.name in _resized_roots(ctx):
            raise errors.make(
                "unsupported",
                f"'{instr.op}' writes '{root.name}', which the kernel reads through a view of another element size "
                "(.ap(dtype=<x4 dtype>)): writing such a tensor is not built",
                loc=instr.loc, hint="write the results to a separate output tensor")
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


def _resized_roots(ctx: Ctx) -> set[str]:
    """Roots some HBM view reinterprets with another element size (lang/views.py `_resized_view`): the
    analyses compare flat offsets in each view's own elements, so such a tensor is only read."""
    k = ctx.kernel
    return {ctx.root(b.name).name for b in k.buffers if b.base is not None
            and D.itemsize(b.dtype) != D.itemsize(ctx.root(b.name).dtype)}


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
    if any(not sp.certain for _, _, _, sp in writes):
        return
    if any((dynamic_access(s.instr) or ("",))[0] == "out" for s, *_ in writes):
        return          # an indirect write reaches rows known only at run time: no gap is provable
    gap = uncovered(ctx.bufs, out, [Write(acc, sp.extents, sp.cons) for _, _, acc, sp in writes])
    if gap is None:
        return
    size = prod(out.shape)
    msg = (f"output '{out.name}' is only partly written: {gap.n} of {size} elements are never written (all inside "
           f"{out.name}[{gap.box}], e.g. {out.name}[{gap.first}]); they keep whatever the memory held (NaN in the "
           f"interpreter). Check loop trip counts (math.ceil) and masks")
    loc = out.loc or ctx.kernel.loc
    if loc is not None and loc.line > 0:
        warnings.warn_explicit(warn_cls(f"{short(loc)}: {msg}"), warn_cls, loc.file, loc.line)
    else:
        warnings.warn(warn_cls(msg), stacklevel=2)
