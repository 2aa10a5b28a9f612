"""Interpreter rule of register_move and the run-time trip count of dynamic loops (lang/registers.py).

Contract: `register_move` reads its source (an immediate, a register or a one-element integer tensor)
as an integer and writes it to the destination's one element, wrapping to the destination's integer
dtype (a register is int32). `dynamic_trips(m, loop, env)` yields, for a `kind="dynamic"` loop, the value
of each iteration: a counted loop reads its start / stop registers once on entry and yields
start, start + step, ... below stop (no iteration when stop <= start, as Python's range); a while loop
(bounds ("while", cond, None)) yields while its condition register is nonzero, read before each
iteration. runtime/machine.py writes the value to the loop's value register before each iteration.
"""
from __future__ import annotations

import numpy as np

from ..core import ir
from ..core.ops import rule


def register_value(m, operand, env, instr=None) -> int:
    if isinstance(operand, ir.Imm):
        return int(operand.value)
    if isinstance(operand, int):             # a dynamic_range bound given as an int
        return operand
    return int(np.asarray(m.read(operand, env, instr)).reshape(-1)[0])


@rule("interpret", "register_move")
def _register_move(m, instr, env):
    v = register_value(m, instr.ins[0], env, instr)
    dt = np.dtype(m.mem[instr.out.buffer].dtype)
    bits = np.array([v], dtype=np.int64).astype(dt)            # wraps modulo 2^bits (C semantics)
    m.write(instr.out, env, bits.reshape(instr.out.shape), instr)


def dynamic_trips(m, loop: ir.Loop, env):
    lo, hi, _ = loop.bounds
    if lo == "while":
        while register_value(m, hi, env) != 0:
            yield None
        return
    start, stop = register_value(m, lo, env), register_value(m, hi, env)
    yield from range(start, stop, loop.step)
