"""Spill traffic the hardware compiler adds when the live SBUF tiles do not fit (issue 13 point 3).

Contract: `add_spills(kernel, target) -> (kernel', fraction)`. kernel' is `kernel` with explicit
spill DMAs inserted; `fraction[id(dma)]` is the share of the DMA's bytes (and time) it moves. The
plan (plan.py) charges those DMAs like any other, scaled by their fraction; nothing else changes.
With nothing over capacity, or when the kernel places SBUF tiles itself (nki.compiler allocators:
their addresses decide, as in the capacity rule), `kernel` itself is returned and `fraction` is empty.

The model (one mechanism, no per-kernel factor):
- SBUF occupancy over program positions is the capacity rule's (lower/footprints.py: live ranges,
  block tensors scoped to the loop whose iterations own their blocks). Where it exceeds the usable
  SBUF, the excess bytes per partition must live in HBM: the compiler evicts them once and reloads
  them once per execution of the over-capacity stretch.
- The evicted bytes come from the largest buffers live at the stretch's peak (largest first, the
  last one in part): buffer b spills a fraction f_b of its bytes.
- Every write of b whose value is read outside the writer's innermost loop body is followed by a
  save DMA (SBUF -> HBM scratch, same index) moving f_b of its bytes; the first such far read in
  program order is preceded by a reload DMA (HBM scratch -> SBUF) moving f_b of its bytes. Reads in
  the writer's own body use the value before it is evicted and move nothing.

Why (measured, NKIBench trn1 profiles, docs/engine_model.md): the excess at the peak times the
partitions times the stretch's executions is the profiler's spill_save_bytes within 1% on the two
kernels that spill most: bmm_softmax 365 188 B x 128 x 16 = 0.748 GB (measured save 0.754, reload
0.757 GB), gqa 8 673 792 B x 128 x 1 = 1.110 GB (measured 1.099 / 1.127 GB). Kernels that fit move
no spill bytes, as measured.
"""
from __future__ import annotations

import dataclasses

from ...core.ir import Access, Buffer, Instr, Loop, Space
from ..analysis.accesses import accesses
from ..footprints import footprints
from ..verify_common import Ctx
from ..verify_memory import _direct


def _over_capacity(ctx: Ctx, fps: dict) -> dict[str, float]:
    """buffer -> spilled fraction of its bytes, from each over-capacity stretch's peak."""
    cap = ctx.target.sbuf_partition_bytes
    sb = {n: f for n, f in fps.items() if ctx.buf(n).space == Space.SBUF}
    npos = len(ctx.sites)
    diff = [0] * (npos + 1)
    for f in sb.values():
        diff[f.start] += f.bytes
        diff[f.end + 1] -= f.bytes
    frac: dict[str, float] = {}
    run, p = 0, 0
    usage = []
    for d in diff[:npos]:
        run += d
        usage.append(run)
    while p < npos:
        if usage[p] <= cap:
            p += 1
            continue
        q = p
        while q + 1 < npos and usage[q + 1] > cap:
            q += 1
        peak = max(range(p, q + 1), key=usage.__getitem__)
        need = usage[peak] - cap
        live = sorted(((n, f) for n, f in sb.items() if f.start <= peak <= f.end), key=lambda x: (-x[1].bytes, x[0]))
        for n, f in live:
            if need <= 0:
                break
            take = min(need, f.bytes)
            frac[n] = max(frac.get(n, 0.0), take / f.bytes)
            need -= take
        p = q + 1
    return frac


def _scratch(b: Buffer) -> Buffer:
    return Buffer(f"{b.name}.spill", Space.HBM, b.shape, b.dtype, kind="local", hbm_kind="private_hbm", loc=b.loc)


def add_spills(kernel, target):
    """The kernel with the compiler's spill saves and reloads as DMAs, and each DMA's byte fraction."""
    if not any(b.space == Space.SBUF for b in kernel.buffers):
        return kernel, {}
    ctx = Ctx.build(kernel)
    ctx = dataclasses.replace(ctx, target=target)
    if _direct(ctx, Space.SBUF):
        return kernel, {}       # the kernel places SBUF itself (nki.compiler allocators): the compiler does not spill
    frac = _over_capacity(ctx, footprints(ctx))
    if not frac:
        return kernel, {}
    before: dict[int, list] = {}
    after: dict[int, list] = {}
    fraction: dict[int, float] = {}
    scratch = {}
    for name, f in frac.items():
        writes, reads = [], []
        for s in ctx.sites:
            if not s.executes or s.instr.op == "alloc":
                continue
            for role, _, acc in accesses(s.instr):
                if acc.buffer == name:
                    (writes if role == "out" else reads).append((s, acc))
        bodies = {id(s.loops[-1]) if s.loops else None for s, _ in writes}
        far = [(s, a) for s, a in reads if (id(s.loops[-1]) if s.loops else None) not in bodies]
        if not writes or not far:
            continue            # never read beyond its writer's body: the value is used before eviction
        sc = scratch[name] = _scratch(kernel.buffer(name))
        for s, acc in writes:
            dma = Instr("dma_copy", (Access(sc.name, acc.index, acc.shape),), (acc,),
                        (("spill", "save"),), s.instr.mask, s.instr.loc)
            after.setdefault(id(s.instr), []).append(dma)
            fraction[id(dma)] = f
        s, acc = far[0]
        dma = Instr("dma_copy", (acc,), (Access(sc.name, acc.index, acc.shape),),
                    (("spill", "reload"),), None, s.instr.loc)
        before.setdefault(id(s.instr), []).append(dma)
        fraction[id(dma)] = f
    if not fraction:
        return kernel, {}

    def rebuild(nodes):
        out = []
        for n in nodes:
            if isinstance(n, Loop):
                out.append(dataclasses.replace(n, body=rebuild(n.body)))
                continue
            out.extend(before.get(id(n), ()))
            out.append(n)
            out.extend(after.get(id(n), ()))
        return tuple(out)

    new = dataclasses.replace(kernel, body=rebuild(kernel.body), buffers=kernel.buffers + tuple(scratch.values()))
    return new, fraction
