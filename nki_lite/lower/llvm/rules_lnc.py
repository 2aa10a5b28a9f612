"""JIT rules of core_barrier and sendrecv: not compiled; runtime/lnc.py runs such kernels in the interpreter.

Contract: a kernel containing either instruction never reaches the JIT (runtime/lnc.py picks the
interpreter for it, since a compiled program cannot yet yield to its peer core mid-run); reaching
these rules anyway raises NL-E913 naming the instruction rather than emitting wrong code.
"""
from __future__ import annotations

from ... import errors
from ...core.ops import rule


@rule("llvm", "core_barrier", "sendrecv")
def _not_compiled(em, instr, ctx):
    raise errors.make("nki_not_built", f"nisa.{instr.op} in JIT-compiled code (LNC=2 kernels with "
                      "synchronisation run in the interpreter)", loc=instr.loc)
