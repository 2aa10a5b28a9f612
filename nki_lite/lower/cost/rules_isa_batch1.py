"""Cost rules for issue #13's first instruction batch: rand, dropout, range_select, select_reduce,
match_replace8 (Vector Engine) and partition_reduce, sequence_bounds (GpSimd).

Contract: as lower/cost/rules.py. The Vector Engine ones follow NKI's documented estimate for
dropout, range_select and nc_match_replace8 (`max(MIN_II, N)` cycles, N = elements per partition),
which nki_lite also charges rand and select_reduce (same streaming shape). NKI documents no cost for
the GpSimd ones; nki_lite charges (docs/engine_model.md): partition_reduce max(MIN_II, P*N/16)
(the GpSimd cores each own 16 partitions and combine the P rows of every column), sequence_bounds
max(MIN_II, 2N) (a forward and a backward scan).
"""
from __future__ import annotations

from ...core.ops import rule
from .rules import _max_ii, compute, free_size_of, partitions_of, stream_n


def _streaming(instr, ctx):
    n = stream_n(ctx, instr)
    return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, N={n})")


for _op in ("rand", "dropout", "range_select", "select_reduce", "match_replace8"):
    rule("cost", _op)(_streaming)


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
