"""Which traced instruction a rewritten one stands for.

Passes that replace instructions after verification (the JIT-only ones) record
`origin[id(new)] = the traced instruction`, so that run-time errors and disk-cache entries name the
instruction the user wrote. `replaced(origin, old, new)` records it (following `old`'s own origin)
and returns `new`.
"""
from __future__ import annotations

from ...core import ir


def replaced(origin: dict, old: ir.Instr, new: ir.Instr) -> ir.Instr:
    origin[id(new)] = origin.pop(id(old), old)
    return new
