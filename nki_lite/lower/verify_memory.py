"""Verifier rules 5 and 6: memory spaces of operands, SBUF/PSUM capacity by liveness.

Rule 6 (memory_space): compute instructions (everything but alloc, dma_copy and device_print) read
and write SBUF/PSUM only; nc_matmul reads SBUF and writes PSUM. dma_copy moves HBM<->SBUF,
HBM<->HBM and SBUF<->SBUF (legacy `nisa.dma_copy`: "both src and dst can be in HBM or SBUF"); a
PSUM side is accepted only against HBM (legacy `nl.store` of a PSUM tile: the compiler inserts the
copy to SBUF); PSUM<->on-chip DMA is rejected.
Rule 5 (sbuf_capacity, psum_capacity): footprints by liveness (lower/analysis/liveness.py: tiles live from
allocation to last use, loop-local tiles one iteration at a time, block-dimension tensors only the
blocks live at the same time; PSUM rounded up to whole 2 KiB banks; a directly allocated tensor at most
its physical tiles; where that estimate is over, a block tensor costs the blocks holding a value at once
in program order, lower/footprints.py `refine_blocks`). Where the peak over program
points exceeds target.sbuf_partition_bytes / psum_partition_bytes: an automatically allocated kernel
gets a CapacityWarning [NL-W401] at the peak's line (what is over, by how much, which tiles: the
hardware compiler would spill); an error only where one tile alone is larger than a partition's
SBUF/PSUM, or under NKI_LITE_STRICT_CAPACITY=1. A space whose tiles are all placed by the kernel
(nki.compiler .alloc / .mod_alloc) gets no estimate: its addresses were checked when declared
(NL-E506, core/placement.py); a kernel mixing both gets the warning, saying so.
Rule 4 for every PSUM tile (check_psum_tiles): where target.psum_tile_in_one_bank, one PSUM tile (one
block of a block-dimension tensor) holds at most one 2 KiB bank per partition (legacy
nl.tile_size.psum_fmax = 512 fp32, "maximum free dimension of a tile on PSUM buffer").
"""
from __future__ import annotations

from .. import errors
from ..core.ir import Space
from .analysis.accesses import accesses
from .analysis.program import Site
from .analysis.ranges import prod
from ..core.ops import is_compute, is_dma
from .verify_common import Ctx, buf_desc, itemsize, short

_TOP = 5


def check_spaces(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    if not (is_dma(instr) or is_compute(instr)):       # alloc, device_print: no data moves
        return
    if is_dma(instr):
        accs = [a for _, _, a in accesses(instr)]
        if len(accs) < 2:
            return
        dst, src = ctx.buf(accs[0].buffer), ctx.buf(accs[1].buffer)
        sp = {dst.space, src.space}
        if Space.PSUM in sp and Space.HBM not in sp:
            raise errors.make(
                "memory_space",
                f"DMA from '{src.name}' ({src.space.value}) to '{dst.name}' ({dst.space.value}): the DMA engines "
                "move data between HBM and SBUF (or within HBM / within SBUF); PSUM is reached only from HBM",
                loc=instr.loc,
                hint="copy between PSUM and SBUF with nl.copy / nisa.tensor_copy (a compute engine), not a DMA")
        return
    for role, k, acc in accesses(instr):
        b = ctx.buf(acc.buffer)
        if instr.op == "nc_matmul":
            want = (Space.PSUM,) if role == "out" else (Space.SBUF,)
            what = "output" if role == "out" else ("stationary" if k == 0 else "moving" if k == 1 else f"input {k}")
        else:
            want = (Space.SBUF, Space.PSUM)
            what = f"{'output' if role == 'out' else 'input'} '{b.name}'"
        if b.space not in want:
            wanted = "|".join(s.value for s in want)
            if instr.op == "nc_matmul":
                hint = ("matmul operands are SBUF tiles: copy the PSUM tile to SBUF first with nl.copy(x)"
                        if role == "in" and b.space == Space.PSUM else
                        "load HBM data into SBUF with nl.load first" if role == "in" else
                        "matmul results go to a PSUM tile (buffer=nl.psum)")
            else:
                hint = ("nl.load the HBM tensor into an SBUF tile first" if role == "in" else
                        "compute into an SBUF tile, then nl.store it to HBM")
            raise errors.make(
                "memory_space",
                f"Expected {what} '{b.name}' of '{instr.op}' to be in address space '{wanted}', but got a tile in "
                f"'{b.space.value}' instead",
                loc=instr.loc, hint=hint)


# ------------------------------------------------------------------------------ capacity

class CapacityWarning(UserWarning):
    """[NL-W401] live SBUF/PSUM tiles of an automatically allocated kernel exceed capacity: the
    hardware compiler would spill (or fail); nki_lite runs the kernel anyway."""


def _direct(ctx: Ctx, space: Space) -> bool:
    """The kernel places tiles of `space` itself (nki.compiler sbuf/psum .alloc / .mod_alloc)."""
    return any(s.instr.op == "alloc" and s.instr.attr("direct") and ctx.buf(s.instr.outs[0].buffer).space == space
               for s in ctx.sites)


def _all_direct(ctx: Ctx, space: Space) -> bool:
    """Every tile of `space` is placed by the kernel itself (nki.compiler sbuf/psum .alloc / .mod_alloc)."""
    allocs = [s.instr for s in ctx.sites if s.instr.op == "alloc" and ctx.buf(s.instr.outs[0].buffer).space == space]
    return bool(allocs) and all(i.attr("direct") for i in allocs)


def check_psum_tiles(ctx: Ctx, site: Site) -> None:
    """Rule 4 for every PSUM tile: where the target requires it, one tile (one block of a
    block-dimension tensor) holds at most one 2 KiB bank per partition (legacy tile_size.psum_fmax).
    Checked at the tile's first use, so an op's own shape rules (e.g. matmul N <= 512) speak first."""
    instr = site.instr
    t = ctx.target
    if instr.op == "alloc" or not t.psum_tile_in_one_bank or not site.executes:
        return
    seen = ctx.__dict__.setdefault("_psum_tiles_checked", set())
    for _, _, acc in accesses(instr):
        b = ctx.buf(acc.buffer)
        if b.space != Space.PSUM or b.name in seen:
            continue
        seen.add(b.name)
        n = prod(b.shape[b.par_axis + 1:]) * itemsize(b.dtype)
        if n > t.psum_bank_bytes:
            per = t.psum_bank_bytes // itemsize(b.dtype)
            raise errors.make(
                "psum_bank",
                f"PSUM tile '{b.name}' {buf_desc(b)} takes {n} bytes per partition; on {t.name} a PSUM tile holds "
                f"at most one bank, {t.psum_bank_bytes} bytes per partition ({per} {b.dtype} elements)",
                loc=b.loc or instr.loc,
                hint=f"split the free dimension into tiles of at most {per} elements, or add a block dimension in "
                     f"front of the partition dimension, e.g. ({-(-n // t.psum_bank_bytes)}, nl.par_dim({t.partitions}), "
                     f"{per})")


def _usage(npos: int, bufs) -> list[int]:
    """Bytes per partition live at each program position."""
    diff = [0] * (npos + 1)
    for f in bufs.values():
        diff[f.start] += f.bytes
        diff[f.end + 1] -= f.bytes
    usage, run = [], 0
    for p in range(npos):
        run += diff[p]
        usage.append(run)
    return usage


def check_capacity(ctx: Ctx) -> None:
    if not ctx.sites:
        return
    from .. import config
    from .footprints import footprints, refine_blocks
    t = ctx.target
    fps = footprints(ctx)
    strict = config.get("NKI_LITE_STRICT_CAPACITY")
    for space, cap, code in ((Space.SBUF, t.sbuf_partition_bytes, "sbuf_capacity"),
                             (Space.PSUM, t.psum_partition_bytes, "psum_capacity")):
        bufs = {n: f for n, f in fps.items() if ctx.buf(n).space == space}
        if not bufs:
            continue
        for n, f in sorted(bufs.items(), key=lambda x: x[1].start):
            if f.tile_bytes > cap:            # no allocation can place this tile: always an error
                b = ctx.buf(n)
                raise errors.make(
                    code,
                    f"{space.value.upper()} tile '{n}' {buf_desc(b)} takes {f.tile_bytes} bytes per partition, but "
                    f"{t.name} has {cap} bytes ({cap / 1024:g} KiB) per partition of {space.value.upper()}",
                    loc=b.loc,
                    hint="tile the free dimension (or add a block dimension in front of nl.par_dim) so that one "
                         "tile fits")
        usage = _usage(len(ctx.sites), bufs)
        if max(usage) > cap:          # over by the static estimate: count the blocks live at once, then decide
            bufs = refine_blocks(ctx, bufs)
            usage = _usage(len(ctx.sites), bufs)
        peak = max(usage)
        if peak <= cap:
            continue
        p = usage.index(peak)
        live = sorted(((n, f) for n, f in bufs.items() if f.start <= p <= f.end),
                      key=lambda x: (-x[1].bytes, x[1].start))
        site = ctx.sites[p]
        lines = [f"  live {space.value.upper()} tiles at {short(site.loc)} (largest first):"]
        for n, f in live[:_TOP]:
            b = ctx.buf(n)
            blk = (f" ({f.blocks} block(s) of {f.tile_bytes} B{', ' + f.scope if f.scope else ''})"
                   if b.par_axis > 0 else "")
            lines.append(f"    {f.bytes:>7} B/partition  '{n}' {buf_desc(b)}{blk}  allocated at {short(b.loc)}")
        if len(live) > _TOP:
            rest = sum(f.bytes for _, f in live[_TOP:])
            lines.append(f"    {rest:>7} B/partition  in {len(live) - _TOP} more tile(s)")
        if space == Space.PSUM:
            bank = t.psum_bank_bytes
            lines.append(f"  bank assignment ({t.psum_banks} banks x {bank} B per partition):")
            nxt = 0
            for n, f in sorted(live, key=lambda x: (x[1].start, x[0])):
                k = f.bytes // bank
                rng = f"bank {nxt}" if k == 1 else f"banks {nxt}-{nxt + k - 1}"
                over = "  <- beyond the last bank" if nxt + k > t.psum_banks else ""
                lines.append(f"    {rng}: '{n}' allocated at {short(ctx.buf(n).loc)}{over}")
                nxt += k
        kib = cap / 1024
        msg = (f"{space.value.upper()} over capacity on {t.name}: {peak} bytes per partition are live at this point, "
               f"but {t.name} has {cap} bytes ({kib:g} KiB) per partition of {space.value.upper()}")
        hint = (f"keep at most {t.psum_banks} PSUM banks ({t.psum_bank_bytes} B per partition each) live: copy "
                "results to SBUF early and allocate accumulators inside the loop that uses them"
                if space == Space.PSUM else
                "allocate tiles inside the loop that uses them (one iteration live at a time), shrink the "
                "tiles, or use a narrower dtype")
        if _all_direct(ctx, space):   # placed by the kernel: checked when declared (NL-E506, core/placement.py)
            continue
        if strict:
            raise errors.make(code, msg, loc=site.loc, notes=tuple(lines), hint=hint)
        if _direct(ctx, space):
            # mixed: some tiles placed by the kernel, some automatic; the count may overestimate
            why = ("the kernel places some of this memory itself (nki.compiler allocators) and the rest "
                   "automatically, so this automatic-allocation estimate may overcount")
        else:
            why = "the hardware compiler would spill to HBM"
        _warn(site.loc, f"[NL-W401 capacity_spill] {msg}, {peak - cap} bytes over; {why} (nki_lite runs the "
                        f"kernel; NKI_LITE_STRICT_CAPACITY=1 makes this an error)\n" + "\n".join(lines)
                        + f"\nhint: {hint}")


def _warn(loc, msg: str) -> None:
    import warnings
    if loc is not None and getattr(loc, "line", 0) > 0:
        warnings.warn_explicit(CapacityWarning(f"{short(loc)}: {msg}"), CapacityWarning, loc.file, loc.line)
    else:
        warnings.warn(CapacityWarning(msg), stacklevel=3)
