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
  body; the deepest such loop decides (lower/blocks.py `block_scope`, the rule the compaction pass
  uses to allocate such tensors as used in both backends). Otherwise it costs the blocks it ever
  touches (every block when the enumeration is over budget).
- a directly allocated tensor (nki.compiler `.mod_alloc` / `.alloc`: its physical tiles are
  `Kernel.placements`) costs at most its distinct physical tiles: `mod_alloc(num_bank_tiles=(1,))`
  rotates all 16 blocks of a [16, par_dim(128), 512] PSUM tensor through one bank, so 16 live
  blocks hold one bank, not 16 (nki-samples' allocated_fused_rms_norm_qkv).
- `refine_blocks(ctx, fps)` (the capacity rule calls it only where the estimate above is over capacity):
  a block tensor costs at most the blocks holding a value at the same time in program order
  (lower/verify_alloc.py `live_blocks`), e.g. a software-pipelined kernel whose loop uses block i while
  its prologue and epilogue use the first and last blocks (nki-samples' attention v11: 32 x 8 PSUM
  blocks, each read right after its matmul) holds a few banks, not all of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.ir import Space
from .analysis.liveness import live_interval
from .analysis.program import Site
from .analysis.ranges import prod
from .blocks import block_pairs, block_scope, on_chip_uses
from .verify_common import Ctx, itemsize


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


def _interval(ctx: Ctx, a_loops: tuple, a_pos: int, sites: list[Site]) -> tuple[int, int]:
    """Live interval of a value created at a_pos inside a_loops and used at `sites`: the liveness
    analysis' rule (analysis/liveness.py `live_interval`) from the creation to each use."""
    start, end = a_pos, a_pos
    span = lambda loop: ctx.loop_span[id(loop)]          # noqa: E731
    for u in sites:
        s, e, _ = live_interval(a_loops, a_pos, u.loops, u.pos, span)
        start, end = min(start, s), max(end, e)
    return start, end


def _block_footprint(ctx: Ctx, b, alloc: Site | None, uses) -> Footprint | None:
    one = block_bytes(ctx, b)
    sc = block_scope(ctx, b.name, alloc, uses)
    if sc is not None:
        return Footprint(sc.start, sc.end, sc.blocks * one, one, sc.blocks,
                         f"per iteration of the loop over `{ctx.var_label(sc.loops[-1].var)}`")
    total_blocks = prod(b.shape[:b.par_axis])
    pairs = block_pairs(ctx, b, uses, [])
    n = total_blocks if pairs is None else max(1, int(np.unique(pairs[:, 0]).size))
    return None if n == total_blocks else Footprint(0, 0, n * one, one, n)


def _physical_cap(ctx: Ctx, out: dict[str, Footprint]) -> dict[str, Footprint]:
    """Directly allocated tensors: no more blocks than distinct physical tiles (blocks sharing a tile
    rotate through it; the overlap rule, verify_alloc.py NL-E505, checks they never hold live values at once)."""
    for name, tiles in getattr(ctx.kernel, "placements", ()):
        fp = out.get(name)
        if fp is None or not tiles:
            continue
        distinct = len(set(tiles))
        if distinct < fp.blocks:
            out[name] = Footprint(fp.start, fp.end, distinct * fp.tile_bytes, fp.tile_bytes, distinct,
                                  fp.scope or f"placed in {distinct} physical tile(s)")
    return out


def footprints(ctx: Ctx) -> dict[str, Footprint]:
    alloc, uses = on_chip_uses(ctx)
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
    return _physical_cap(ctx, out)


def refine_blocks(ctx: Ctx, fps: dict[str, Footprint]) -> dict[str, Footprint]:
    """fps with each automatically allocated block tensor's cost lowered to its most simultaneously live
    blocks (never raised). A directly allocated tensor keeps its physical tiles: the kernel placed them."""
    from .verify_alloc import live_blocks
    placed = {n for n, _ in getattr(ctx.kernel, "placements", ())}
    names = [n for n, f in fps.items() if f.blocks > 1 and n not in placed]
    if not names:
        return fps
    live = live_blocks(ctx, names)
    out = dict(fps)
    for n, k in live.items():
        f = fps[n]
        if 0 < k < f.blocks and k * f.tile_bytes < f.bytes:
            out[n] = Footprint(f.start, f.end, k * f.tile_bytes, f.tile_bytes, k, f"at most {k} block(s) live at once")
    return out
