"""Engine-model rule of register_move (virtual registers, lang/registers.py).

Contract: a register op (register_alloc with a value, register_move / register_load / register_store) is
one engine-sequencer instruction, charged REGISTER_NS on the GpSimd engine's queue whatever its operands:
the NKI docs give no cost for it (nki/api isa.register_*: "64x 32-bit registers per engine sequencer"),
so REGISTER_NS is an assumption of nki_lite, the order of one sequencer read or write of a 4-byte word.
A dynamic loop (ir.Loop kind "dynamic") is costed as ONE iteration of its body (its trip count is known
at run time only; lower/cost/totals.py multiplies by `trip`, which is 1): the estimate of a kernel with a
dynamic loop is per iteration of that loop, and the loop's branch is not charged.
"""
from __future__ import annotations

from ...core.ops import rule
from .rules import Cost

REGISTER_NS = 64.0


@rule("cost", "register_move")
def _register_move(instr, ctx):
    clock = ctx.clock("gpsimd") if "gpsimd" in ctx.target.clocks else 1.0
    return Cost("gpsimd", ns=REGISTER_NS, cycles=REGISTER_NS * clock,
                formula=f"REGISTER_NS={REGISTER_NS:g} ns (one sequencer register op)", opcode="register_move")
