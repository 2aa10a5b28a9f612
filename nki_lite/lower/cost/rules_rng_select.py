"""Cost rules for the Vector Engine instructions of issue #13's first batch: rand, dropout,
range_select, select_reduce, match_replace8.

Contract: as lower/cost/rules.py. NKI documents `max(MIN_II, N)` cycles (N = elements per partition)
for dropout, range_select and nc_match_replace8; nki_lite charges rand and select_reduce the same
(same streaming shape). The accumulator steps of reduce_cmd are ordinary tensor_tensor / tensor_copy
instructions with their own rules.
"""
from __future__ import annotations

from ...core.ops import rule
from .rules import _max_ii, compute, stream_n


def _streaming(instr, ctx):
    n = stream_n(ctx, instr)
    return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, N={n})")


for _op in ("rand", "dropout", "range_select", "select_reduce", "match_replace8"):
    rule("cost", _op)(_streaming)
