"""Loop-invariant loads the compiler hoists: which executions of an HBM -> SBUF load are not performed.

Contract: `hoist(plan)` sets `InstrInfo.hoist` (a `Hoist`) on every load the compiler can move out of
a loop, and returns how many it found. A load qualifies when its source is read-only in the kernel
(an input or constant: no instruction writes its root), its destination is SBUF and written by no
other instruction, it has no mask over loop variables and no run-time index, and some enclosing
loop L (not an SPMD grid loop) has a variable its source does not use. Hoisted out of the outermost
such L, the load runs once per value of the variables the source uses (the "dependent" loops from L
inwards) and is skipped whenever any other ("independent") loop variable from L inwards is non-zero:
the data is already in SBUF. The hoisted copies must fit: each takes its tile's bytes per partition
out of the SBUF the allocation plan leaves free (usable SBUF minus the plan's high-water mark, plus
the tile's own rotating copies, which the hoisted buffer replaces), greedily in program order; only
the first `cap` dependent indices (row-major over the dependent loops) are hoisted when not all fit,
the rest are reloaded every iteration as written.

Why (measured): NKIBench's add_rmsnorm_matmul and matmul_add_rmsnorm reload their weight tile inside
the row loop (32x), yet the trn1 profiles read each input about once (0.076 / 0.132 GB of HBM against
0.336 / 0.638 GB as written; docs/engine_model.md). The model is of the 2025 compiler those profiles
ran; the 2024 matmul tutorial's tiled kernel (SDK 2.20) suggests that compiler did not hoist (an
outlier set, docs/engine_model.md).

Used by schedule.Simulator.instr (a skipped execution is a zero-time write at its ready time) and
totals.totals (bytes and counts of the performed executions only). `plan.hoist_breaks[var]` holds
(value, condition) pairs: the loop values where a loop's behaviour changes because of hoisting
(iteration 1 of an independent loop; where the hoisted prefix ends in a dependent loop, while the
outer loops' values in `condition` hold): the steady-state extrapolation (periodic.py) never skips
across them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...core import dtypes as D
from ...core.ir import Access, Space, walk
from ...core.ops import dynamic_access, reads as op_reads


@dataclass(frozen=True)
class Hoist:
    skip_vars: tuple        # independent loop variables (from L inwards): non-zero -> not performed
    dep: tuple              # (var, stride) of the dependent loops (from L inwards), row-major index
    cap: int                # dependent indices [0, cap) are hoisted; the others reload every time
    distinct: int           # number of dependent indices (product of the dependent loops' trips)
    repeats: int            # product of the independent loops' trips

    def skipped(self, env) -> bool:
        """Is this execution (loop values `env`) served by the hoisted copy?"""
        if not any(env[v] for v in self.skip_vars):
            return False
        if self.cap >= self.distinct:
            return True
        return sum(env[v] * s for v, s in self.dep) < self.cap

    def performed(self, executions: int) -> int:
        """How many of `executions` (a multiple of distinct x repeats) are performed (exact, for totals)."""
        d, h = self.distinct, self.repeats
        return executions * (self.cap + (d - self.cap) * h) // (d * h)


def _bytes_per_partition(plan, a: Access) -> int:
    b = plan.bufs[a.buffer]
    per = math.prod(a.shape[1:]) if len(a.shape) > 1 else 1
    return per * D.INFO[b.dtype].itemsize


def _candidate(plan, ins, loops, writers, grid_vars):
    inf = plan.info[id(ins)]
    c = inf.cost
    if c is None or c.engine != "dma" or inf.folded or inf.mask_vars or dynamic_access(ins) or not loops:
        return None
    srcs = op_reads(ins)
    if len(srcs) != 1 or len(ins.outs) != 1:
        return None
    src, dst = srcs[0], ins.outs[0]
    if plan.bufs[src.buffer].space != Space.HBM or plan.bufs[dst.buffer].space != Space.SBUF:
        return None
    if plan.root[src.buffer] in plan.written or writers.get(dst.buffer, 0) != 1:
        return None
    coef = plan._acc(src).coef
    used = {v for v, cs in coef.items() if any(cs)}
    for i, l in enumerate(loops):
        if l.var not in used and l.trip > 1 and l.var not in grid_vars:
            inner = loops[i:]
            dep = [l2 for l2 in inner if l2.var in used]
            indep = [l2 for l2 in inner if l2.var not in used]
            return inner, dep, indep, src, dst
    return None


def hoist(plan) -> int:
    """Mark the hoisted loads of `plan` (InstrInfo.hoist); returns how many loads are hoisted."""
    t = plan.target
    writers: dict = {}
    for ins, _ in walk(plan.body):
        if ins.op == "alloc":
            continue
        for o in ins.outs:
            writers[o.buffer] = writers.get(o.buffer, 0) + 1
    grid_vars = {f"pid{k}" for k in range(len(plan.kernel.grid))}
    plan.hoist_breaks = {}
    free = t.sbuf_partition_bytes - plan.alloc.sbuf_bytes_per_partition
    found = 0
    for ins, loops in walk(plan.body):
        if ins.op == "alloc":
            continue
        cand = _candidate(plan, ins, loops, writers, grid_vars)
        if cand is None:
            continue
        inner, dep, indep, src, dst = cand
        tile = _bytes_per_partition(plan, dst)
        own = 0
        if dst.buffer in plan.alloc.loop_local:      # the rotating copies the hoisted buffer replaces
            own = _bytes_per_partition(plan, dst) * plan.alloc.slots.get(dst.buffer, 1)
        distinct = math.prod(l.trip for l in dep)
        cap = min(distinct, max(0, free + own) // max(1, tile))
        if cap <= 0:
            continue
        free -= cap * tile - own
        strides, s = [], 1
        for l in reversed(dep):
            strides.append((l.var, s))
            s *= l.trip
        for v in (l.var for l in indep):          # iteration 0 loads, the others do not
            plan.hoist_breaks.setdefault(v, set()).add((1, ()))
        if cap < distinct:          # where the hoisted prefix ends: digit q of each dependent loop,
            cond = ()               # which matters only while the outer dependent loops sit on theirs
            for l, (_, st) in zip(dep, reversed(strides)):
                q = (cap // st) % l.trip
                plan.hoist_breaks.setdefault(l.var, set()).update(((q, cond), (q + 1, cond)))
                cond = cond + ((l.var, q),)
        plan.info[id(ins)].hoist = Hoist(tuple(l.var for l in indep), tuple(reversed(strides)), cap,
                                         distinct, math.prod(l.trip for l in indep))
        found += 1
    return found
