"""Cost rules for the GpSimd instructions of issue #13's first batch: partition_reduce, sequence_bounds.

Contract: as lower/cost/rules.py. NKI documents no cost for either; nki_lite charges
(docs/engine_model.md): partition_reduce max(MIN_II, P*N/16) (the GpSimd cores each own 16
partitions and combine the P rows of every column), sequence_bounds max(MIN_II, 2N) for N ids (a
forward and a backward scan), nonzero_with_count max(MIN_II, T + 1) for a [Q, T] source (one pass
over each row, the Q GpSimd cores in parallel).
"""
from __future__ import annotations

from ...core.ops import rule
from .rules import _max_ii, compute, free_size_of, partitions_of, stream_n


@rule("cost", "partition_reduce")
def _partition_reduce(instr, ctx):
    src = instr.ins[0]
    p = partitions_of(src, ctx.buf(src))
    n = stream_n(ctx, instr)
    return compute(ctx, instr, _max_ii(ctx, p * n / 16), f"max(MIN_II, P*N/16={p * n / 16:g})")


@rule("cost", "sequence_bounds")
def _sequence_bounds(instr, ctx):
    src = instr.ins[0]
    n = free_size_of(src, ctx.buf(src))          # N ids in the one partition (the output holds 2N)
    return compute(ctx, instr, _max_ii(ctx, 2 * n), f"max(MIN_II, 2N={2 * n})")


@rule("cost", "nonzero_with_count")
def _nonzero_with_count(instr, ctx):
    dst = instr.out
    n = free_size_of(dst, ctx.buf(dst))          # T + 1 outputs per row; the rows are separate cores
    return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, T+1={n})")

