"""JIT rule of register_move and the run-time trip count of dynamic loops (lang/registers.py).

Contract: `register_move` is the interpreter's definition (runtime/interpret_registers.py) compiled: the
source (an immediate, a register or a one-element integer tensor) sign- or zero-extended to i64, then
truncated to the destination's integer dtype (wrapping). `dynamic_loop(em, loop, ctx, run_body)` emits a
real loop whose trip count is read at run time: a counted loop loads its start / stop registers once on
entry and runs max(0, ceil((stop - start) / step)) iterations, storing start + step*k to the value register
before iteration k; a while loop re-reads its condition register before each iteration.
"""
from __future__ import annotations

from ...core import ir
from ...core.ops import rule
from .rules_common import elementwise


def _value_i64(em, operand, env) -> str:
    """An operand's integer value as an i64 SSA value: an immediate or int bound, or a one-element access."""
    if isinstance(operand, ir.Imm):
        return str(int(operand.value))
    if isinstance(operand, int):
        return str(operand)
    return em.to_i64(em.load_raw(operand, {**env, **_zero_env(operand)}), em.dtype(operand))


@rule("llvm", "register_move")
def _register_move(em, instr, ctx):
    src = instr.ins[0]
    dt = em.dtype(instr.out)
    ins = (src,) if isinstance(src, ir.Access) else ()
    elementwise(em, instr, ctx, ins, lambda env: em.from_i64(_value_i64(em, src, env), dt))


def _zero_env(acc: ir.Access) -> dict:
    return {f"@{k}": "0" for k in range(len(acc.shape))}


def dynamic_loop(em, n: ir.Loop, ctx, run_body) -> None:
    b = em.b
    lo, hi, value = n.bounds
    if lo == "while":
        cond = lambda: b.op(f"icmp ne i64 {_value_i64(em, hi, ctx.env)}, 0")   # noqa: E731
        with b.while_(cond, "w"):
            run_body(None)
        return
    start, stop = _value_i64(em, lo, ctx.env), _value_i64(em, hi, ctx.env)
    span = b.op(f"sub nsw i64 {stop}, {start}")
    pos = b.op(f"icmp sgt i64 {span}, 0")
    ceil = b.op(f"sdiv i64 {b.op(f'add nsw i64 {span}, {n.step - 1}')}, {n.step}")
    count = b.op(f"select i1 {pos}, i64 {ceil}, i64 0")
    with b.loop(count, "d") as k:
        if value is not None:
            v = b.op(f"add nsw i64 {start}, {b.op(f'mul nsw i64 {k}, {n.step}')}")
            em.store_raw(value, {**ctx.env, **_zero_env(value)}, b.op(f"trunc i64 {v} to i32"))
        run_body(k)
