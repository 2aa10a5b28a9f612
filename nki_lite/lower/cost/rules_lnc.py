"""Engine-model rules of core_barrier and sendrecv (LNC=2 synchronisation, costed per core).

Contract: each core's program is costed on its own (runtime/lnc.py `estimate` gives one estimate per core
and the device time as the max over cores). core_barrier costs SYNC_NS on its engine (a remote semaphore
write to the peer plus the local semaphore wait, nki/api isa.core_barrier); it does not model the time
spent waiting for a slower peer (the per-core max accounts for that at the kernel level). sendrecv is the
DMA of src into the peer's SBUF (the DMA model of rules.py, SBUF to SBUF) plus SYNC_NS for the
CoreBarrier handshake of the default DMA engine; the GPSIMD DMA mode (gpsimd_dma) skips the handshake.

SYNC_NS is an assumption of nki_lite, not a measured or published figure: the order of one round trip
of a semaphore write between two NeuronCores on one die.
"""
from __future__ import annotations

from dataclasses import replace

from ...core.ops import engine_of, rule
from .rules import Cost, dma_cost

SYNC_NS = 500.0


@rule("cost", "core_barrier")
def _core_barrier(instr, ctx):
    eng = engine_of(instr)
    clock = ctx.clock(eng) if eng in ctx.target.clocks else 1.0
    return Cost(eng, ns=SYNC_NS, cycles=SYNC_NS * clock, formula=f"SYNC_NS={SYNC_NS:g} ns (semaphore round trip)",
                opcode="core_barrier")


@rule("cost", "sendrecv")
def _sendrecv(instr, ctx):
    c = dma_cost(ctx, instr)
    sync = 0.0 if instr.attr("dma_engine") == "gpsimd_dma" else SYNC_NS
    return replace(c, ns=c.ns + sync, opcode="sendrecv",
                   formula=c.formula + (f" + SYNC_NS={sync:g} ns (CoreBarrier)" if sync else ""))
