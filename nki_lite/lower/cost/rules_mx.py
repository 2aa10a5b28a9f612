"""Engine-model rules of the MX instructions (quantize_mx on the Vector Engine, nc_matmul_mx on the Tensor Engine).

Contract (the ISA docs give no cost formula for either; the Trainium3 architecture guide's throughput figures):
- nc_matmul_mx: "An MX matmul with either the MXFP8 or MXFP4 datatype runs at 4x the throughput compared to a
  BF16/FP16 matmul", realised as a 4x deeper contraction per instruction (K x4 elements per PE row): one
  instruction takes the time of a BF16 nc_matmul of the same x4 tile shape, max(min(64, M), N) TensorE
  cycles (nc_matmul's §4.7 formula), and does 2 x 4K x M x N flops.
- quantize_mx: "can quantize four input elements per partition, per cycle (i.e., 4x Vector performance
  mode)": max(MIN_II, F / 4) Vector cycles for a source of F elements per partition.
"""
from __future__ import annotations

from ...core.ops import rule
from .rules import _max_ii, compute, free_size_of, partitions_of


@rule("cost", "nc_matmul_mx")
def _nc_matmul_mx(instr, ctx):
    st, mv = instr.ins[0], instr.ins[1]
    K = partitions_of(st, ctx.buf(st))
    M, N = free_size_of(st, ctx.buf(st)), free_size_of(mv, ctx.buf(mv))
    cyc = float(max(min(ctx.target.mm_init_latency, M), N))
    flops = 2.0 * 4 * K * M * N
    return compute(ctx, instr, cyc, f"max(min(64, M={M}), N={N}) (MX: 4 elements per PE, K={K}x4)",
                   engine="tensor", flops=flops, adjusted_flops=flops, opcode="MATMUL_MX")


@rule("cost", "quantize_mx")
def _quantize_mx(instr, ctx):
    src = instr.ins[0]
    F = free_size_of(src, ctx.buf(src))
    return compute(ctx, instr, _max_ii(ctx, F / 4), f"max(MIN_II, F={F}/4) (4 elements per cycle)",
                   opcode="QUANTIZE_MX")
