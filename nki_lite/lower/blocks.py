"""Block-dimension tensors used one iteration at a time: which loop owns their blocks, and how many.

Contract: `block_scopes(ctx)` maps the name of every SBUF/PSUM block-dimension tensor (`nl.par_dim`
not first, e.g. `(32, 7, par_dim(128), 1024)`) whose blocks each belong to one iteration of an
enclosing loop to a `BlockScope`; `block_scope(ctx, name, alloc, uses)` answers for one tensor.
A tensor's blocks *belong to one iteration* of loop L (the deepest loop enclosing every use, inside
the loop holding its allocation) when the iterations of L (with the loops around it) touch pairwise
disjoint sets of blocks. Then the hardware compiler keeps only the blocks of the running iteration:
the tensor costs `blocks` (the most one iteration touches) and is live within L's body only.
- Uses are every access of the tensor except its *fills*: a whole-tensor, unmasked `memset` (what
  `nl.zeros` / `nl.full` emit, `lazy_initialization=` or not) in the same loops as the allocation and
  before L. Redoing a fill on the blocks at the start of every iteration of L gives every block the
  same contents at its first use (no other iteration touches it in between).
- `keep` are the block dimensions that still distinguish blocks within one iteration; every other
  block dimension is indexed by one and the same expression of L's (and enclosing loops') variables
  in every use, so it is fixed within an iteration. A tensor of shape `keep`-dims + `(par, free...)`,
  allocated at the top of L's body (and filled there), holds the running iteration's blocks at
  distinct places: the compaction pass (lower/passes/compact_blocks.py) rewrites the tensor so, and
  the capacity rule's footprints (lower/footprints.py) charge `blocks` — one mechanism for both.
Block sets are found by enumerating the block indices of every access (masks ignored: a superset,
sound for disjointness); a tensor over the enumeration budget, with an index out of its bounds, a
view, or a run-time (indirect) index gets no scope. Pure functions of the IR; nothing raises.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.affine import Affine, axis_var
from ..core.ir import Access, Instr, Loop, Space
from ..core.ops import dynamic_access
from .analysis.accesses import accesses
from .analysis.program import Site
from .analysis.ranges import enumerate_points, prod

_BUDGET = 1 << 20


@dataclass(frozen=True)
class BlockScope:
    name: str
    loops: tuple[Loop, ...]        # the loops whose iterations own the blocks; loops[-1] is L
    blocks: int                    # the most blocks one iteration of L touches
    keep: tuple[int, ...]          # block dimensions kept by the compacted tensor
    fills: tuple[Site, ...]        # whole-tensor fills before L, redone per iteration
    start: int                     # program positions of L's body where the blocks are live
    end: int


def is_fill(instr: Instr, shape: tuple[int, ...]) -> bool:
    """A whole-tensor, unmasked memset (nl.zeros / nl.full): redoable per iteration on the blocks."""
    if instr.op != "memset" or instr.mask is not None or len(instr.outs) != 1:
        return False
    o = instr.out
    return o.shape == shape and all(e == Affine.var(axis_var(d)) for d, e in enumerate(o.index))


def on_chip_uses(ctx) -> tuple[dict[str, Site], dict[str, list[tuple[Site, Access]]]]:
    """First `alloc` site and every other executed access of each on-chip buffer."""
    alloc: dict[str, Site] = {}
    uses: dict[str, list[tuple[Site, Access]]] = {}
    for s in ctx.sites:
        if not s.executes:
            continue
        for _, _, acc in accesses(s.instr):
            if ctx.buf(acc.buffer).space == Space.HBM:
                continue
            if s.instr.op == "alloc":
                alloc.setdefault(acc.buffer, s)
                continue
            uses.setdefault(acc.buffer, []).append((s, acc))
    return alloc, uses


def _common_loops(sites: list[Site]) -> tuple:
    common = sites[0].loops
    for s in sites[1:]:
        k = 0
        while k < min(len(common), len(s.loops)) and common[k] is s.loops[k]:
            k += 1
        common = common[:k]
    return common


def block_pairs(ctx, b, uses, outer_vars: list[str]):
    """Unique (block id, outer-iteration id) pairs over all uses; None over budget or when a block
    index leaves the tensor's bounds (the interpreter reports that; no scope may hide it)."""
    p = b.par_axis
    bshape = b.shape[:p]
    pairs = []
    for s, acc in uses:
        ext = ctx.extents(s.loops)
        for a, n in enumerate(acc.shape):
            ext[axis_var(a)] = n
        exprs = list(acc.index[:p]) + [Affine.var(v) for v in outer_vars]
        pts = enumerate_points(exprs, ext, (), _BUDGET)
        if pts is None:
            return None
        blk = np.zeros(pts[0].shape[0] if pts else 1, dtype=np.int64)
        for d, n in enumerate(bshape):
            if pts[d].size and (pts[d].min() < 0 or pts[d].max() >= n):
                return None
            blk = blk * n + pts[d]
        it = np.zeros_like(blk)
        for k, v in enumerate(outer_vars):
            it = it * ext[v] + pts[p + k]
        pairs.append(np.stack([blk, it], axis=1))
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(pairs), axis=0)


def _kept_dims(b, uses, outer: tuple[Loop, ...]) -> tuple[int, ...]:
    """Block dimensions not fixed within one iteration of `outer`: some use indexes them with an
    expression of other variables, or two uses with different expressions."""
    fixed = {l.var for l in outer} | {v for _, acc in uses for e in acc.index for v in e.vars()
                                      if v.startswith("pid")}
    keep = []
    for d in range(b.par_axis):
        exprs = {acc.index[d] for _, acc in uses}
        if len(exprs) != 1 or not next(iter(exprs)).vars() <= fixed:
            keep.append(d)
    return tuple(keep)


def _split_fills(b, alloc: Site | None, uses):
    """The fills among `uses` (in the allocation's loops, before every other use) and the rest."""
    if alloc is None:
        return (), uses
    same = lambda s: len(s.loops) == len(alloc.loops) and all(x is y for x, y in zip(s.loops, alloc.loops))  # noqa: E731
    cand = [s for s, _ in uses if same(s) and is_fill(s.instr, b.shape)]
    ids = {id(s) for s in cand}
    first = min((s.pos for s, _ in uses if id(s) not in ids), default=None)
    fills = tuple(s for s in cand if first is not None and s.pos < first)
    ids = {id(s) for s in fills}
    return fills, [(s, a) for s, a in uses if id(s) not in ids]


def block_scope(ctx, name: str, alloc: Site | None, uses) -> BlockScope | None:
    b = ctx.buf(name)
    if b.par_axis == 0 or b.space == Space.HBM or not uses:
        return None
    if any(dynamic_access(s.instr) is not None for s, _ in uses):
        return None
    fills, rest = _split_fills(b, alloc, uses)
    if not rest:
        return None
    sites = [s for s, _ in rest]
    common = _common_loops(sites)
    a_loops = alloc.loops if alloc is not None else ()
    if any(l is not m for l, m in zip(a_loops, common)) or len(common) <= len(a_loops):
        return None
    for k in range(len(common), len(a_loops), -1):
        outer = common[:k]
        pairs = block_pairs(ctx, b, rest, [l.var for l in outer])
        if pairs is None or pairs.shape[0] == 0:
            continue
        _, per_block = np.unique(pairs[:, 0], return_counts=True)
        if (per_block > 1).any():
            continue                            # some block is touched by two iterations
        _, per_iter = np.unique(pairs[:, 1], return_counts=True)
        start, end = _scoped_interval(ctx, k, sites)
        return BlockScope(name, outer, int(per_iter.max()), _kept_dims(b, rest, outer), fills, start, end)
    return None


def _scoped_interval(ctx, k: int, sites: list[Site]) -> tuple[int, int]:
    """Within one iteration of the k-th common loop: from the first use to the last, a use inside a
    deeper loop counting from that loop's start to its end (the block lives across its iterations)."""
    start, end = None, None
    for u in sites:
        lo, hi = (ctx.loop_span[id(u.loops[k])] if len(u.loops) > k else (u.pos, u.pos))
        start = lo if start is None else min(start, lo)
        end = hi if end is None else max(end, hi)
    return start, end


def block_scopes(ctx) -> dict[str, BlockScope]:
    alloc, uses = on_chip_uses(ctx)
    out = {}
    for name, us in uses.items():
        sc = block_scope(ctx, name, alloc.get(name), us)
        if sc is not None:
            out[name] = sc
    return out


def compact_blocks(b, sc: BlockScope) -> int:
    """Blocks the compacted tensor holds (the product of the kept block dimensions)."""
    return prod(b.shape[d] for d in sc.keep)
