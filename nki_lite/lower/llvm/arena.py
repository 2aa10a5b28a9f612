"""The JIT arena layout: byte offsets of every buffer that is not a kernel argument.

Contract: `layout(em) -> (offsets, bytes)` for an `Emitter` (codegen.py). Every non-argument root
buffer gets a 64-byte-aligned offset. On-chip tiles that lower/analysis/liveness.py tracks share bytes when
their live ranges are disjoint, counted in the code generator's own units (`Emitter.schedule`): a
fused run or a row-major body interleaves its instructions' element loops, so only whole units are
ordered, and two tiles may share bytes only if one's last unit ends before the other's first unit
starts (then every access of the first, in every row, element and iteration, is done before the
second's first write, debug-mode NaN fills included). Slots are reused between tiles of the same
byte size (unrolled kernels repeat tile shapes); HBM scratch and untracked tiles keep bytes of their
own. Parallel execution is unaffected: a tile written by parallel programs or region iterations is
allocated inside them (lower/parallel.py), so its range lies inside the parallel loop and its bytes
are in the running thread's own arena; a shared tile they read is live across the whole loop.
A row-private tile of a row-major body (row_private.py) takes the bytes of one partition row.
The layout is a pure function of the kernel, so the generated text stays a cache key.
"""
from __future__ import annotations

import heapq

from ...core import dtypes as D
from ...core import ir
from ..analysis.liveness import live_ranges
from ..analysis.dependence import program_space
from .parts import split
from .row_private import destinations, row_private


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def _units(em):
    kernel = em.k
    _, _, pbody, prologue, epilogue = program_space(kernel)
    apart = pbody is not kernel.body           # generate() emits prologue, program loop, epilogue apart

    def of(nodes) -> list:
        parts = split(em, nodes)
        if len(parts) > 1:                      # run_nodes emits each part as its own function
            return [u for part in parts for u in of(part)]
        P, items = em.schedule(nodes)
        if P is not None:
            private = row_private(em, nodes)               # one row of storage each (row_private.py)
            em.row_private.update(private)
            em.placed.update(destinations(em, nodes, private))
            return [list(nodes)]
        return [it if isinstance(it, (ir.Loop, list)) else [it] for it in items]

    def units(nodes) -> list:
        if apart and nodes is kernel.body:
            loop = kernel.body[len(prologue)]
            return of(prologue) + [loop] + of(epilogue)
        return of(nodes)
    return units


def layout(em) -> tuple[dict[str, int], int]:
    kernel = em.k
    roots = [b for b in kernel.buffers if b.base is None and b.name not in em.arg_buffers]
    ranges = live_ranges(kernel, _units(em)).ranges         # (also finds the row-private tiles)
    size = {b.name: _align(em.stored_elements(b.name) * D.itemsize(b.dtype)) for b in roots}
    offsets: dict[str, int] = {}
    top = 0
    for b in roots:
        if b.name not in ranges:
            offsets[b.name] = top
            top += size[b.name]
    order = sorted((ranges[b.name][0], k, b.name) for k, b in enumerate(roots) if b.name in ranges)
    free: dict[int, list[int]] = {}
    live: list[tuple[int, int, str]] = []           # heap of (last unit, order, name)
    for start, k, name in order:
        while live and live[0][0] < start:
            _, _, dead = heapq.heappop(live)
            free.setdefault(size[dead], []).append(offsets[dead])
        slots = free.get(size[name])
        if slots:
            offsets[name] = slots.pop()
        else:
            offsets[name] = top
            top += size[name]
        heapq.heappush(live, (ranges[name][1], k, name))
    return offsets, top
