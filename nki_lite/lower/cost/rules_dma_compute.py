"""Engine-model rule of dma_compute (nisa.dma_compute: a DMA that adds its sources while copying).

Contract: the DMA model of rules.py (`dma_cost`) applied to the copy dst <- srcs[k] of each source
gives that source's descriptors and bytes. A plain copy streams two tensors through the queues (one
read, one write); dma_compute streams n + 1 (n reads, one write), so its time is the slowest source's
copy time scaled by (n + 1) / 2. HBM read bytes are every HBM source's; the write is counted once.
This is nki_lite's assumption (the reference gives no cost formula for DMA compute).
"""
from __future__ import annotations

from dataclasses import replace

from ...core.ops import rule
from .rules import Cost, dma_cost


@rule("cost", "dma_compute")
def _dma_compute(instr, ctx) -> Cost:
    n = len(instr.ins)
    copies = [dma_cost(ctx, replace(instr, ins=(src,))) for src in instr.ins]
    slow = max(copies, key=lambda c: c.ns)
    scale = (n + 1) / 2
    return replace(slow, ns=slow.ns * scale, opcode="dma_compute",
                   formula=f"({slow.formula}) x ({n} sources + 1 write) / 2",
                   descriptors=sum(c.descriptors for c in copies),
                   dma_bytes=sum(c.dma_bytes for c in copies),
                   hbm_read_bytes=sum(c.hbm_read_bytes for c in copies),
                   reads=tuple(sorted({r for c in copies for r in c.reads})))
