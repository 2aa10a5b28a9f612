"""Verifier rules 5 and 6: memory spaces of operands, SBUF/PSUM capacity by liveness.

Rule 6 (memory_space): compute instructions (everything but alloc, dma_copy and device_print) read
and write SBUF/PSUM only; nc_matmul reads SBUF and writes PSUM. dma_copy moves HBM<->SBUF,
HBM<->HBM and SBUF<->SBUF (legacy `nisa.dma_copy`: "both src and dst can be in HBM or SBUF"); a
PSUM side is accepted only against HBM (legacy `nl.store` of a PSUM tile: the compiler inserts the
copy to SBUF); PSUM<->on-chip DMA is rejected.
Rule 5 (sbuf_capacity, psum_capacity): an on-chip buffer is live from its `alloc` to its last use in
program order; a use inside a loop that does not contain the alloc keeps it live to the end of that
loop, and an alloc inside a loop whose tile is used after the loop makes it live from the start of
the loop. Bytes per partition: product of the free dims x itemsize (PSUM: rounded up to whole
2 KiB banks). The peak over program points must fit target.sbuf_partition_bytes /
psum_partition_bytes.
"""
from __future__ import annotations

from .. import errors
from .ir import Space
from .verify_common import Ctx, Site, accesses, buf_desc, is_dma, itemsize, prod, short

_TOP = 5


def check_spaces(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    if instr.op in ("alloc", "device_print"):
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

def tile_bytes(ctx: Ctx, b) -> int:
    free = prod(s for d, s in enumerate(b.shape) if d != b.par_axis)
    n = free * itemsize(b.dtype)
    if b.space == Space.PSUM:
        bank = ctx.target.psum_bank_bytes
        n = -(-n // bank) * bank
    return n


def live_intervals(ctx: Ctx) -> dict[str, tuple[int, int, Site | None]]:
    """buffer -> (first live position, last live position, alloc site) for on-chip buffers."""
    alloc: dict[str, Site] = {}
    uses: dict[str, list[Site]] = {}
    for s in ctx.sites:
        if not s.executes:
            continue
        for _, _, acc in accesses(s.instr):
            b = ctx.buf(acc.buffer)
            if b.space == Space.HBM:
                continue
            if s.instr.op == "alloc" and acc.buffer not in alloc:
                alloc[acc.buffer] = s
            uses.setdefault(acc.buffer, []).append(s)
    out: dict[str, tuple[int, int, Site | None]] = {}
    for name, us in uses.items():
        a = alloc.get(name, us[0])
        a_loops = {id(l) for l in a.loops}
        start, end = a.pos, a.pos
        for u in us:
            u_loops = {id(l) for l in u.loops}
            e = u.pos
            for l in u.loops:                      # outermost first
                if id(l) not in a_loops:
                    e = max(e, ctx.loop_span[id(l)][1])
                    break
            end = max(end, e)
            for l in a.loops:
                if id(l) not in u_loops:
                    start = min(start, ctx.loop_span[id(l)][0])
                    break
        out[name] = (start, end, alloc.get(name))
    return out


def check_capacity(ctx: Ctx) -> None:
    if not ctx.sites:
        return
    t = ctx.target
    iv = live_intervals(ctx)
    for space, cap, code in ((Space.SBUF, t.sbuf_partition_bytes, "sbuf_capacity"),
                             (Space.PSUM, t.psum_partition_bytes, "psum_capacity")):
        bufs = [(n, s, e) for n, (s, e, _) in iv.items() if ctx.buf(n).space == space]
        if not bufs:
            continue
        size = {n: tile_bytes(ctx, ctx.buf(n)) for n, _, _ in bufs}
        npos = len(ctx.sites)
        diff = [0] * (npos + 1)
        for n, s, e in bufs:
            diff[s] += size[n]
            diff[e + 1] -= size[n]
        usage, run = [], 0
        for p in range(npos):
            run += diff[p]
            usage.append(run)
        peak = max(usage)
        if peak <= cap:
            continue
        p = usage.index(peak)
        live = sorted(((n, s, e) for n, s, e in bufs if s <= p <= e),
                      key=lambda x: (-size[x[0]], x[1]))
        site = ctx.sites[p]
        lines = [f"  live {space.value.upper()} tiles at {short(site.loc)} (largest first):"]
        for n, s, e in live[:_TOP]:
            b = ctx.buf(n)
            lines.append(f"    {size[n]:>7} B/partition  '{n}' {buf_desc(b)}  allocated at {short(b.loc)}")
        if len(live) > _TOP:
            rest = sum(size[n] for n, _, _ in live[_TOP:])
            lines.append(f"    {rest:>7} B/partition  in {len(live) - _TOP} more tile(s)")
        if space == Space.PSUM:
            bank = t.psum_bank_bytes
            lines.append(f"  bank assignment ({t.psum_banks} banks x {bank} B per partition):")
            nxt = 0
            for n, s, e in sorted(live, key=lambda x: (x[1], x[0])):
                k = size[n] // bank
                rng = f"bank {nxt}" if k == 1 else f"banks {nxt}-{nxt + k - 1}"
                over = "  <- beyond the last bank" if nxt + k > t.psum_banks else ""
                lines.append(f"    {rng}: '{n}' allocated at {short(ctx.buf(n).loc)}{over}")
                nxt += k
        kib = cap / 1024
        raise errors.make(
            code,
            f"{space.value.upper()} over capacity on {t.name}: {peak} bytes per partition are live at this point, "
            f"but {t.name} has {cap} bytes ({kib:g} KiB) per partition of {space.value.upper()}",
            loc=site.loc,
            notes=tuple(lines),
            hint=(f"keep at most {t.psum_banks} PSUM banks ({t.psum_bank_bytes} B per partition each) live: copy "
                  "results to SBUF early and allocate accumulators inside the loop that uses them"
                  if space == Space.PSUM else
                  "allocate tiles inside the loop that uses them (one iteration live at a time), shrink the "
                  "tiles, or use a narrower dtype"))
