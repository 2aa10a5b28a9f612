"""On-chip footprints for the capacity rule (verify_memory.py): which bytes per partition each buffer holds, and when.

Contract: `footprints(ctx)` maps every executed SBUF/PSUM buffer to a `Footprint(start, end, bytes,
tile_bytes, blocks, scope)`: the buffer occupies `bytes` per partition at every program position in
[start, end]; `tile_bytes` is one tile of it (one block of a block-dimension tensor), the least any
allocation can give it. The model is the hardware compiler's automatic allocation:
- a tile is live from its allocation to its last use in program order; a use inside a loop that does
  not contain the allocation keeps it live to the end of that loop, and a tile allocated inside a
  loop whose value is used after the loop is live from the start of the loop (tiles allocated
  inside a loop and used only there are live for one iteration at a time). This is the liveness
  analysis' rule (lower/analysis/liveness.py `live_interval`), the one the JIT's arena and the
  interpreter's freeing use;
- a block-dimension tensor (`nl.par_dim` not first, e.g. `(32, 7, par_dim(128), 1024)`) costs the
  blocks live at the same time, not all of them: when the iterations of an enclosing loop touch
  pairwise disjoint sets of blocks (each block belongs to one iteration: written and read within
  it), the tensor costs the most blocks one iteration touches and is live only within the loop's
  body; the deepest such loop decides. Otherwise it costs the blocks it ever touches.
Block sets are found by enumerating the block indices of every access (masks ignored, a superset:
sound for disjointness); over the enumeration budget the tensor costs every block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.affine import Affine
from ..core.ir import Space
from .analysis.accesses import accesses
from .analysis.liveness import live_interval
from .analysis.program import Site
from .analysis.ranges import enumerate_points, prod
from .verify_common import Ctx, itemsize

_BUDGET = 1 << 20


@dataclass(frozen=True)
class Footprint:
    start: int
    end: int
    bytes: int                 # per partition while live
    tile_bytes: int            # one tile (one block of a block-dimension tensor)
    blocks: int                # blocks counted (1 for an ordinary tile)
    scope: str = ""            # "per iteration of the loop over `i`" for block-private tensors


def _round(ctx: Ctx, b, n: int) -> int:
    if b.space == Space.PSUM:
        bank = ctx.target.psum_bank_bytes
        return -(-n // bank) * bank
    return n


def block_bytes(ctx: Ctx, b) -> int:
    """Bytes per partition of one block (the dims after the partition dim), PSUM rounded to banks."""
    return _round(ctx, b, prod(b.shape[b.par_axis + 1:]) * itemsize(b.dtype))


def _uses(ctx: Ctx) -> tuple[dict[str, Site], dict[str, list[tuple[Site, object]]]]:
    alloc: dict[str, Site] = {}
    uses: dict[str, list[tuple[Site, object]]] = {}
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


def _interval(ctx: Ctx, a_loops: tuple, a_pos: int, sites: list[Site]) -> tuple[int, int]:
    """Live interval of a value created at a_pos inside a_loops and used at `sites`: the liveness
    analysis' rule (analysis/liveness.py `live_interval`) from the creation to each use."""
    start, end = a_pos, a_pos
    span = lambda loop: ctx.loop_span[id(loop)]          # noqa: E731
    for u in sites:
        s, e, _ = live_interval(a_loops, a_pos, u.loops, u.pos, span)
        start, end = min(start, s), max(end, e)
    return start, end


def _scoped_interval(ctx: Ctx, k: int, sites: list[Site]) -> tuple[int, int]:
    """Within one iteration of the k-th common loop: from the first use to the last, a use inside a
    deeper loop counting from that loop's start to its end (the block lives across its iterations)."""
    start, end = None, None
    for u in sites:
        lo, hi = (ctx.loop_span[id(u.loops[k])] if len(u.loops) > k else (u.pos, u.pos))
        start = lo if start is None else min(start, lo)
        end = hi if end is None else max(end, hi)
    return start, end


def _common_loops(sites: list[Site]) -> tuple:
    common = sites[0].loops
    for s in sites[1:]:
        k = 0
        while k < min(len(common), len(s.loops)) and common[k] is s.loops[k]:
            k += 1
        common = common[:k]
    return common


def _block_pairs(ctx: Ctx, b, uses, outer_vars: list[str]):
    """Unique (block id, outer-iteration id) pairs over all uses, or None over budget."""
    p = b.par_axis
    bshape = b.shape[:p]
    pairs = []
    for s, acc in uses:
        ext = ctx.extents(s.loops)
        for a, n in enumerate(acc.shape):
            ext[f"@{a}"] = n
        exprs = list(acc.index[:p]) + [Affine.var(v) for v in outer_vars]
        pts = enumerate_points(exprs, ext, (), _BUDGET)
        if pts is None:
            return None
        blk = np.zeros(pts[0].shape[0] if pts else 1, dtype=np.int64)
        ok = np.ones_like(blk, dtype=bool)
        for d, n in enumerate(bshape):
            ok &= (pts[d] >= 0) & (pts[d] < n)
            blk = blk * n + pts[d]
        it = np.zeros_like(blk)
        for k, v in enumerate(outer_vars):
            it = it * ctx.extents(s.loops)[v] + pts[p + k]
        pairs.append(np.stack([blk[ok], it[ok]], axis=1))
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(pairs), axis=0)


def _block_footprint(ctx: Ctx, b, alloc: Site | None, uses) -> Footprint | None:
    sites = [s for s, _ in uses]
    one = block_bytes(ctx, b)
    total_blocks = prod(b.shape[:b.par_axis])
    common = _common_loops(sites)
    a_depth = len(alloc.loops) if alloc is not None else 0
    for k in range(len(common), a_depth, -1):
        if alloc is not None and any(l is not m for l, m in zip(alloc.loops, common[:k])):
            break
        outer = common[:k]
        pairs = _block_pairs(ctx, b, uses, [l.var for l in outer])
        if pairs is None:
            continue
        if pairs.shape[0] == 0:
            continue
        blocks, per_block = np.unique(pairs[:, 0], return_counts=True)
        if (per_block > 1).any():
            continue                           # some block is touched by two iterations
        _, per_iter = np.unique(pairs[:, 1], return_counts=True)
        n = int(per_iter.max())
        start, end = _scoped_interval(ctx, k, sites)
        return Footprint(start, end, n * one, one, n, f"per iteration of the loop over "
                                                      f"`{ctx.var_label(outer[-1].var)}`")
    pairs = _block_pairs(ctx, b, uses, [])
    n = total_blocks if pairs is None else max(1, int(np.unique(pairs[:, 0]).size))
    return None if n == total_blocks else Footprint(0, 0, n * one, one, n)


def footprints(ctx: Ctx) -> dict[str, Footprint]:
    alloc, uses = _uses(ctx)
    out: dict[str, Footprint] = {}
    for name in set(alloc) | set(uses):
        b = ctx.buf(name)
        a = alloc.get(name)
        us = uses.get(name, [])
        sites = [s for s, _ in us]
        whole = _round(ctx, b, prod(s for d, s in enumerate(b.shape) if d != b.par_axis) * itemsize(b.dtype))
        if a is None:
            a = sites[0]
        start, end = _interval(ctx, a.loops, a.pos, sites)
        fp = None
        if b.par_axis > 0 and us:
            fp = _block_footprint(ctx, b, alloc.get(name), us)
        if fp is None:
            tile = block_bytes(ctx, b) if b.par_axis > 0 else whole
            out[name] = Footprint(start, end, whole, tile, prod(b.shape[:b.par_axis]))
        elif fp.scope:
            out[name] = fp
        else:                                  # fewer blocks than declared, whole-kernel interval
            out[name] = Footprint(start, end, fp.bytes, fp.tile_bytes, fp.blocks)
    return out
