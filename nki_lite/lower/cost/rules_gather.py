"""Engine-model rule for local_gather: NKI's documented estimate (api/nki/isa, local_gather)
150 + (num_valid * n) / C GpSimd cycles, C = ((28 + t*n) / (t*n)) / min(4 / dtype_size, n), t = 4."""
from __future__ import annotations

from ...core.ops import rule
from .rules import compute

_T = 4          # NKI: "t is a constant 4"


@rule("cost", "local_gather")
def _local_gather(instr, ctx):
    n, valid = instr.attr("num_elem_per_idx"), instr.attr("num_valid")
    size = ctx.itemsize(instr.ins[0])
    c = ((28 + _T * n) / (_T * n)) / min(4 / size, n)
    cycles = ctx.target.gpsimd_start + valid * n / c
    return compute(ctx, instr, cycles, f"GPSIMD_START + valid*n/C = 150 + {valid}*{n}/{c:.3g}")
