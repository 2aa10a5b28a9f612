"""Engine choice for instructions whose engine the compiler picks (`engine=unknown_engine`).

Contract: `balance(plan)` rewrites, in place, the cost of every instruction traced with
`engine_auto` (lang: `nisa.tensor_scalar` / `nisa.tensor_copy` without an explicit engine) to the
engine that leaves its loop body's busiest engine least busy. NKI's docs say these instructions run
on Vector, Scalar or GpSimd and that `unknown_engine` lets "the compiler select the best engine based
on engine workload" (legacy API docs, general/nki/api/nki/isa `tensor_copy`, `tensor_scalar`); the
Scalar Engine takes only the arithmetic combinations it supports on trn2 (op0 multiply with op1 add
or none, op0 add alone: the same docstring), so no other `tensor_scalar` leaves Vector. GpSimd is
not a candidate (no documented general cost, targets.TARGET_NOTES "gpsimd lanes").

Per loop body (the instructions directly inside one loop, or at top level): the fixed instructions'
busy time per engine is summed, then each auto instruction in program order goes to the candidate
whose load plus the instruction's cost on it is smallest (ties: Vector, the frontend's default).
Static, so the totals stay exact products of per-instruction costs. Measured check: NKIBench's
AdamW on trn1 is 90% Vector / 62% Scalar active with Vector-only `tensor_tensor` work of ~1.8 ms,
which only a Vector/Scalar split of its `tensor_scalar`s reproduces (docs/engine_model.md).
"""
from __future__ import annotations

import dataclasses

from ...core.ir import Instr, Loop
from .rules import CostCtx, cost_of

CANDIDATES = ("vector", "scalar")
_SCALAR_TS = {("multiply", "add"), ("multiply", None), ("add", None)}


def _candidates(ins: Instr) -> tuple[str, ...]:
    if not ins.attr("engine_auto"):
        return ()
    if ins.op == "tensor_copy":
        return CANDIDATES
    if ins.op == "tensor_scalar" and len(ins.outs) == 1 and (ins.attr("op0"), ins.attr("op1")) in _SCALAR_TS:
        return CANDIDATES
    return ()


def _on(ins: Instr, eng: str) -> Instr:
    return dataclasses.replace(ins, attrs=tuple((k, eng if k == "engine" else v) for k, v in ins.attrs))


def balance(plan) -> int:
    """Assign engines to auto instructions; returns how many moved off Vector."""
    ctx = CostCtx(plan.target, plan.bufs)
    moved = 0

    def body(nodes):
        nonlocal moved
        load: dict[str, float] = {}
        autos = []
        for n in nodes:
            if isinstance(n, Loop):
                body(n.body)
                continue
            inf = plan.info.get(id(n))
            if inf is None or inf.cost is None or inf.folded:
                continue
            if _candidates(n):
                autos.append((n, inf))
            else:
                load[inf.cost.engine] = load.get(inf.cost.engine, 0.0) + inf.cost.ns
        for n, inf in autos:
            best = None
            for eng in _candidates(n):
                c = inf.cost if eng == inf.cost.engine else cost_of(_on(n, eng), ctx)
                key = load.get(eng, 0.0) + c.ns
                if best is None or key < best[0]:
                    best = (key, eng, c)
            _, eng, c = best
            load[eng] = load.get(eng, 0.0) + c.ns
            if eng != inf.cost.engine:
                inf.cost = c
                moved += 1

    body(plan.body)
    return moved
