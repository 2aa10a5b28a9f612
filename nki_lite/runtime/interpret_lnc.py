"""Interpreter rules of core_barrier and sendrecv: hand the instruction to the LNC hub of the run.

Contract: a Machine run by runtime/lnc.py carries `m.lnc_hub` and `m.lnc_core`; core_barrier blocks this
core until the peer reaches its barrier; sendrecv gives the hub this core's src values and writes the
values the peer sent into dst. A Machine without a hub (never made by a traced kernel: the frontends
refuse one-core launches) raises NL-E918 at the instruction.
"""
from __future__ import annotations

from .. import errors
from ..core.ops import rule


def _hub(m, instr):
    hub = getattr(m, "lnc_hub", None)
    if hub is None:
        raise errors.make("lnc_unmatched", f"{instr.op} outside an LNC=2 run has no peer core", loc=instr.loc)
    return hub


@rule("interpret", "core_barrier")
def _core_barrier(m, instr, env):
    _hub(m, instr).arrive(m.lnc_core, instr, None)


@rule("interpret", "sendrecv")
def _sendrecv(m, instr, env):
    sent = m.read(instr.ins[0], env, instr).copy()
    got = _hub(m, instr).arrive(m.lnc_core, instr, sent)
    m.write(instr.out, env, got.astype(m.mem[instr.out.buffer].dtype, copy=False), instr)
