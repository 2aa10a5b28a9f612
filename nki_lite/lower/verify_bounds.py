"""Verifier rules 7 and 8: static out-of-bounds accesses and unmasked ragged tails.

For every access and every buffer dimension, the exact range of the index expression over loop
variables (trip counts), program ids (grid) and axis variables (tile shape), restricted by the
instruction's mask, must lie in [0, dim). The range is computed exactly (verify_common.solve_range);
when it cannot be decided within the budget, or the mask cannot be mapped onto the access, nothing
is raised (no false positives).

An access that is in bounds once the last iteration of one loop (or the last program of one grid
axis) is left out is a ragged tail (`ragged_tail`): the hint is the exact mask to add. Anything else
is `out_of_bounds`.
"""
from __future__ import annotations

from .. import errors
from .analysis.accesses import accesses
from .analysis.program import Site
from .analysis.ranges import Range, solve_range
from ..core.ops import dynamic_access, mask_applies
from .verify_common import Ctx, access_space, render, render_point, short


def _fits(r, dim: int) -> bool:
    """In bounds, or nothing executes (EMPTY), or undecided (None): only a proven range is an error."""
    return not isinstance(r, Range) or (r.lo >= 0 and r.hi < dim)


def _violation(r, dim: int) -> bool:
    return isinstance(r, Range) and r.exact and not (r.lo >= 0 and r.hi < dim)


def check_bounds(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    if instr.op == "alloc" or not site.executes:
        return
    dyn = dynamic_access(instr)
    for role, k, acc in accesses(instr):
        buf = ctx.buf(acc.buffer)
        if any(n <= 0 for n in acc.shape):
            continue
        space = None
        for d, e in enumerate(acc.index):
            if d >= len(buf.shape):
                break
            if dyn == (role, k, d):
                continue           # completed by an index tile at run time: checked then (NL-E503)
            dim = buf.shape[d]
            if space is None:
                space = access_space(ctx, site, role, k, acc)
            if not space.certain:
                break
            lo, hi = e.bounds(space.extents)
            if lo >= 0 and hi < dim:
                continue
            r = solve_range(e, space.extents, space.cons)
            if not _violation(r, dim):
                continue
            _raise(ctx, site, role, k, acc, d, e, r, space)


def _raise(ctx: Ctx, site: Site, role: str, k: int, acc, d: int, e, r: Range, space) -> None:
    instr = site.instr
    buf = ctx.buf(acc.buffer)
    dim = buf.shape[d]
    text, legend = render(ctx, e, acc.shape)
    bad_hi = r.hi >= dim
    point = r.at_hi if bad_hi else r.at_lo
    when = render_point(ctx, point, acc.shape, only=e.vars())
    what = f"{'output' if role == 'out' else 'input'} '{buf.name}'"
    if buf.base is not None:
        what += f" (a view of '{buf.base}')"
    msg = (f"out-of-bounds access to {what} (shape {tuple(buf.shape)}) on dimension {d} in '{instr.op}': "
           f"index `{text}` ranges over [{r.lo}, {r.hi}], outside [0, {dim - 1}] (dimension size {dim})"
           + (f"; e.g. {'index ' + str(r.hi if bad_hi else r.lo)} when {when}" if when else ""))
    notes = tuple(f"  where {x}" for x in dict.fromkeys(legend))
    can_mask = mask_applies(instr, role, k)
    # ragged tail: in bounds once the last iteration of one loop (or last program of a grid axis) is left out
    if bad_hi and r.lo >= 0:
        for v in sorted(e.vars(), key=lambda v: (0 if v in ctx.loop_name else 1, v)):
            if v.startswith("@") or e.coeff(v) <= 0 or space.extents.get(v, 0) < 2:
                continue
            ext2 = dict(space.extents)
            ext2[v] -= 1
            if _fits(solve_range(e, ext2, space.cons), dim):
                label = ctx.var_label(v)
                last = ctx.user_value(v, space.extents[v] - 1)
                at_last = solve_range(e.subst({v: space.extents[v] - 1}), space.extents, space.cons)
                covers = (f" and covers [{at_last.lo}, {at_last.hi}] there" if isinstance(at_last, Range)
                          else "")
                if isinstance(at_last, Range) and at_last.exact and at_last.lo >= dim:
                    # not a ragged tail: the whole last iteration lies past the end (an off-by-one trip count)
                    loop = ctx.loop_name.get(v)
                    trip = space.extents[v]
                    rng = (f"the loop over `{label}` (at {short(loop[3].loc)}) runs {trip} iterations" if loop
                           else f"{label} takes {trip} values")
                    raise errors.make(
                        "out_of_bounds",
                        msg + f". Iteration {label}={last} lies entirely past the end (it covers [{at_last.lo}, "
                              f"{at_last.hi}]): {rng}, one more than the {trip - 1} that fit in dimension {d} "
                              f"(size {dim})",
                        loc=instr.loc, notes=notes,
                        hint=f"run {trip - 1} iterations (check the trip count, e.g. n instead of n + 1)")
                cond = f"{text} < {dim}"
                if can_mask and instr.mask is not None:
                    hint = f"extend the instruction's mask= with `& ({cond})` so the last tile stops at {dim}"
                elif can_mask:
                    hint = f"add mask=({cond}) to this instruction so the last tile stops at {dim}"
                else:
                    hint = (f"this operand cannot be masked; make the last tile fit (pad '{buf.name}' to a "
                            f"multiple of the tile size, or slice the last tile to {dim} - ...)")
                raise errors.make(
                    "ragged_tail",
                    msg + f". Only the last iteration ({label}={last}) runs past the end{covers}: {dim} is "
                          f"not a multiple of the tile size",
                    loc=instr.loc, hint=hint, notes=notes)
    if can_mask:
        cond = f"{text} < {dim}" if bad_hi else f"{text} >= 0"
        hint = (f"add mask=({cond}) (combined with & with any existing mask) or shrink the tile / fix the index"
                if instr.mask is None else
                f"extend the mask= with `& ({cond})` or shrink the tile / fix the index")
    else:
        hint = "shrink the tile or fix the index so the access stays inside the tensor"
    raise errors.make("out_of_bounds", msg, loc=instr.loc, hint=hint, notes=notes)
