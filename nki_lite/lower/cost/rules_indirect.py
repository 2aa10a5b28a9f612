"""Cost rules of indirect data movement (dma_indirect, copy_dynamic; lang/ops_indirect.py).

- dma_indirect: the DMA model of rules.dma_cost, with the indirect access's dynamic dimension
  taken as non-contiguous: every element row (one index value) is its own descriptor, since the
  rows' addresses are only known at run time. rmw=add reads the destination too (its HBM bytes
  count as read and written).
- copy_dynamic: NKI's documented cost of tensor_copy_dynamic_src, max(MIN_II_DYNAMIC, N) engine
  cycles (MIN_II_DYNAMIC, roughly 600 cycles, from core/targets.py).
"""
from __future__ import annotations

import dataclasses

from ...core.affine import Affine
from ...core.ir import Access, Instr
from ...core.ops import rule
from .rules import CostCtx, compute, dma_cost, stream_n


def _rows(instr: Instr) -> Instr:
    """The instruction as a plain DMA whose indirect dimension has stride 0 (one run per row)."""
    side, dim = instr.attr("dyn"), instr.attr("dim")
    src, dst = instr.ins[0], instr.outs[0]

    def flatten(a: Access) -> Access:
        return Access(a.buffer, a.index[:dim] + (Affine(0),) + a.index[dim + 1:], a.shape)
    if side == "in":
        src = flatten(src)
    elif side == "out":
        dst = flatten(dst)
    return dataclasses.replace(instr, outs=(dst,), ins=(src,))


@rule("cost", "dma_indirect")
def _dma_indirect(instr: Instr, ctx: CostCtx):
    c = dma_cost(ctx, _rows(instr))
    formula = c.formula + " (indirect: one descriptor per index row)"
    if instr.attr("rmw"):
        formula += " (read-modify-write)"
        extra = c.hbm_write_bytes
        c = dataclasses.replace(c, hbm_read_bytes=c.hbm_read_bytes + extra)
    return dataclasses.replace(c, formula=formula, opcode="dma_indirect")


@rule("cost", "copy_dynamic")
def _copy_dynamic(instr: Instr, ctx: CostCtx):
    n = stream_n(ctx, dataclasses.replace(instr, ins=instr.ins[:1]))
    ii = ctx.target.min_ii_dynamic
    return compute(ctx, instr, max(ii, n), f"max(MIN_II_DYNAMIC={ii}, N={n})", opcode="tensor_copy_dynamic_src")
