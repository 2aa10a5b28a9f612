"""Exact per-kernel sums of the cost model, independent of the schedule.

Contract: `totals(plan)` adds every instruction's cost (rules.py, prepared in plan.Plan) times the
number of times it executes: busy time and instruction counts per engine, DMA queue time, bytes,
descriptors, HBM traffic and flops. Masked DMAs are evaluated for every value of the loop variables
their mask uses; folded PSUM memsets cost nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.ir import walk
from .plan import Plan
from .rules import COMPUTE_ENGINES, Cost


@dataclass
class Totals:
    busy_ns: dict                 # compute engine -> busy time (sum of instruction durations)
    instr_count: dict             # engine -> executed instructions
    dma_queue_busy_ns: float      # sum over DMA instructions of duration x queues used
    dma_count: int
    dma_bytes: int
    dma_descriptors: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    flops: float                  # TensorE hardware flops (matmuls + transposes)
    transpose_flops: float
    matmul_flops: float           # nc_matmul only
    adjusted_flops: float


def totals(plan: Plan) -> Totals:
    """Exact per-kernel sums (independent of the schedule): every instruction's cost times the number
    of times it executes; masked DMAs are evaluated for every value of the loop variables their mask
    uses."""
    busy = {e: 0.0 for e in COMPUTE_ENGINES}
    count = {e: 0 for e in COMPUTE_ENGINES + ("dma",)}
    acc = dict(qbusy=0.0, dma_count=0, dma_bytes=0, desc=0, hr=0, hw=0, fl=0.0, tfl=0.0, mfl=0.0, afl=0.0)

    def add(c: Cost, k: float):
        if c.engine in busy:
            busy[c.engine] += c.ns * k
            count[c.engine] += k
        elif c.engine == "dma":
            count["dma"] += k
            acc["qbusy"] += c.ns * c.queues * k
            acc["dma_count"] += k
            acc["dma_bytes"] += c.dma_bytes * k
            acc["desc"] += c.descriptors * k
            acc["hr"] += c.hbm_read_bytes * k
            acc["hw"] += c.hbm_write_bytes * k
        acc["fl"] += c.flops * k
        acc["tfl"] += c.transpose_flops * k
        acc["afl"] += c.adjusted_flops * k
        if c.opcode == "MATMUL":
            acc["mfl"] += c.flops * k

    for ins, loops in walk(plan.body):
        if ins.op == "alloc":
            continue
        inf = plan.info[id(ins)]
        mult = 1
        for l in loops:
            mult *= max(0, l.trip)
        if mult == 0:
            continue
        if inf.folded:
            continue
        if inf.cost is not None:
            # a hoisted load (hoist.py) is performed for a fixed share of its executions
            add(inf.cost, inf.hoist.performed(mult) if inf.hoist is not None else mult)
            continue
        trips = {l.var: l.trip for l in loops}
        mvars = [v for v in inf.mask_vars if v in trips]
        combos = 1
        for v in mvars:
            combos *= trips[v]
        k = mult // combos
        for vals in np.ndindex(*[trips[v] for v in mvars]):
            env = dict(zip(mvars, (int(x) for x in vals)))
            add(plan.cost(inf, env), k)
    return Totals(busy, {e: int(v) for e, v in count.items()}, acc["qbusy"], int(acc["dma_count"]),
                  int(acc["dma_bytes"]), int(acc["desc"]), int(acc["hr"]), int(acc["hw"]), acc["fl"],
                  acc["tfl"], acc["mfl"], acc["afl"])
