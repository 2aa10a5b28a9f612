"""The schedule: when each instruction of a traced kernel starts and ends on a NeuronCore.

Model (docs/engine_model.md has the long form):
- Resources: the four compute engines (tensor, vector, scalar, gpsimd), each running its own
  instruction stream in program order; 16 DMA queues, each FIFO, fed in program order (DMA
  triggers come from one in-order stream, the Sync engine, §3 arch guide); on NC-v2 two shared
  ports (VectorE/GpSimdE on SBUF, VectorE/ScalarE on PSUM, §3.1).
- An instruction starts at max(its engine is free, its ports are free, every producer has ended
  plus the edge latency). Producers are found per memory region: the last writer of every region it
  reads (true dependency), the last writer and the readers of every region it writes (output and
  anti dependency). Regions are per-dimension boxes of the access (HBM buffers that have reshaped
  views use linear element ranges); `affine_range` iterations that touch disjoint boxes are
  therefore independent, and everything else is ordered. Edge latency: 1300 ns between different
  engines (§3.4 semaphore); 264 - MIN_II cycles between dependent instructions on the same engine
  (§4.6), except PSUM accumulation on TensorE; none for anti/output dependencies on one engine.
- Tiles allocated inside a loop rotate over physical copies (SBUF: 2, or 1 if 2 do not fit; PSUM:
  the free banks), so iteration i+copies waits for iteration i to release its copy.
- A PSUM `memset(0)` whose next user is an accumulating `nc_matmul` is folded into that matmul
  (the first matmul of an accumulation group overwrites the bank, §3.2 / §6.3 acc_flags).
- Loops: the first iterations are simulated; when, for a period p (a multiple of the tile-rotation
  period), every state time (engine/queue free times, the end times of the records each iteration
  creates) has advanced by the same per-item amount over three consecutive periods, the remaining
  whole periods are not simulated: state times are advanced by the per-item increment times the
  number of skipped periods, and the records of the skipped iterations become "range records"
  (box shifted by p x the loop variable's coefficient, time advanced by the increment per period).
  The remainder iterations are simulated. This is exact when the schedule is periodic (max-plus
  systems become periodic after a transient); see docs for the error when it is not.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ...core import dtypes as D
from ...core.affine import axis_of, is_axis_var
from ...core.ir import Access, Instr, Kernel, Loop, Space
from ..analysis.accesses import flat_index, root_name, roots_with_views
from .rules import COMPUTE_ENGINES, Cost, CostCtx, cost_of, engine_of
from ...core.targets import Target

MIN_SAMPLES = 3            # samples per phase compared: two equal increments
MAX_SIM = 64               # iterations simulated per loop level before a forced extrapolation
FULL_SIM_TRIP = 128        # loops up to this trip are simulated fully when no period is found
BUDGET = 400_000           # simulated instruction instances before every loop extrapolates early
MAX_EVENTS = 200_000
TOL = 1e-6
MIN_EXTRAPOLATE_WORK = 64  # loops executing fewer instructions are always simulated in full
TRIGGER_STREAMS = ("sync",) + COMPUTE_ENGINES
QUEUE_HISTORY = 32         # busy intervals remembered per DMA queue (older time counts as busy)
EXPAND_RECORDS = 20_000    # extrapolated copies kept as ordinary records up to this many per extrapolation


# ------------------------------------------------------------------------------ static preparation

@dataclass
class AccInfo:
    root: str
    buf: str
    on_chip: bool
    base_lo: tuple
    base_hi: tuple
    coef: dict            # loop var -> tuple of per-dimension coefficients
    nblock: int = 0       # leading block dimensions (before the partition dimension)

    def box(self, env) -> tuple[tuple, tuple]:
        lo, hi = list(self.base_lo), list(self.base_hi)
        for v, cs in self.coef.items():
            x = env[v]
            if x:
                for d, c in enumerate(cs):
                    if c:
                        lo[d] += c * x
                        hi[d] += c * x
        return tuple(lo), tuple(hi)


@dataclass
class InstrInfo:
    instr: Instr
    cost: Cost | None
    reads: list
    writes: list
    folded: bool = False
    mask_vars: tuple = ()
    loc: str = ""
    shape: str = ""
    label: str = ""


@dataclass
class AllocPlan:
    slots: dict                 # buffer -> physical copies
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    loop_local: set


def _affine_box(exprs, shape):
    """Per-dimension box pieces of an access (one piece for a flat index): constant lo/hi over the
    axis vars and loop-variable coefficients."""
    lo, hi, coef = [], [], {}
    for d, e in enumerate(exprs):
        l = h = e.const
        for v, c in e.terms:
            if is_axis_var(v):
                span = c * (shape[axis_of(v)] - 1)
                l += min(0, span)
                h += max(0, span)
            else:
                coef.setdefault(v, [0] * len(exprs))[d] = c
        lo.append(l)
        hi.append(h)
    return tuple(lo), tuple(hi), {v: tuple(c) for v, c in coef.items()}


class Plan:
    """Everything about a kernel the schedule needs, computed once."""

    def __init__(self, kernel: Kernel, target: Target):
        self.kernel = kernel
        self.target = target
        self.bufs = kernel.buffer_map
        self.root = {name: root_name(self.bufs, name) for name in self.bufs}
        viewed = roots_with_views(kernel)
        self.linear = {n for n in self.bufs if self.root[n] in viewed}
        self.body = self._grid_wrap(kernel)
        self.written = set()
        for ins, _ in _walk(self.body):
            for o in ins.outs:
                self.written.add(self.root[o.buffer])
        self.alloc = self._alloc_plan()
        self.info: dict[int, InstrInfo] = {}
        instrs = list(_walk(self.body))
        for ins, loops in instrs:
            self.info[id(ins)] = self._info(ins)
        self._fold_memsets(self.body)

    # ---- structure
    @staticmethod
    def _grid_wrap(kernel: Kernel):
        body = kernel.body
        for k in reversed(range(len(kernel.grid))):
            body = (Loop(f"pid{k}", kernel.grid[k], "affine", body, loc=kernel.loc),)
        return body

    def _alloc_plan(self) -> AllocPlan:
        t = self.target
        loop_local, top = set(), set()
        for ins, loops in _walk(self.body):
            if ins.op == "alloc":
                (loop_local if loops else top).add(ins.out.buffer)
        slots = {n: 1 for n in self.bufs}

        def bpp(b):
            per = b.size // max(1, b.shape[b.par_axis]) if b.shape else 1
            return per * D.INFO[b.dtype].itemsize

        sb = [n for n, b in self.bufs.items() if b.space == Space.SBUF]
        for n in sb:
            if n in loop_local:
                slots[n] = max(1, t.sbuf_loop_tile_buffers)
        while sum(bpp(self.bufs[n]) * slots[n] for n in sb) > t.sbuf_partition_bytes:
            cand = [n for n in sb if slots[n] > 1]
            if not cand:
                break
            big = max(cand, key=lambda n: (bpp(self.bufs[n]) * slots[n], n))
            slots[big] = 1
        ps = [n for n, b in self.bufs.items() if b.space == Space.PSUM]

        def banks(b):
            return max(1, math.ceil(bpp(b) / t.psum_bank_bytes))
        fixed = sum(banks(self.bufs[n]) for n in ps if n not in loop_local)
        local = [n for n in ps if n in loop_local]
        need = sum(banks(self.bufs[n]) for n in local)
        if need:
            k = max(1, (t.psum_banks - fixed) // need)
            for n in local:
                slots[n] = k
        sbuf_hw = sum(bpp(self.bufs[n]) * slots[n] for n in sb)
        psum_hw = sum(bpp(self.bufs[n]) * slots[n] for n in ps)
        return AllocPlan(slots, sbuf_hw, psum_hw, loop_local)

    def _acc(self, a: Access) -> AccInfo:
        b = self.bufs[a.buffer]
        on_chip = b.space != Space.HBM
        if a.buffer in self.linear:            # views alias their root: compare flat element ranges
            lo, hi, coef = _affine_box([flat_index(b.shape, a.index)], a.shape)
        else:
            lo, hi, coef = _affine_box(a.index, a.shape)
        nblock = b.par_axis if on_chip and a.buffer not in self.linear else 0
        return AccInfo(self.root[a.buffer], a.buffer, on_chip, lo, hi, coef, nblock)

    def _info(self, ins: Instr) -> InstrInfo:
        reads, writes = [], []
        if ins.op != "alloc":
            srcs = [o for o in ins.ins if isinstance(o, Access)]
            if ins.op == "nc_matmul" and ins.attr("accumulate"):
                srcs.append(ins.out)
            for a in srcs:
                if self.root[a.buffer] in self.written:
                    reads.append(self._acc(a))
            for a in ins.outs:
                writes.append(self._acc(a))
        mask_vars = ()
        if ins.mask is not None:
            mask_vars = tuple(sorted(v for v in ins.mask.vars() if not is_axis_var(v)))
        cost = None
        if ins.mask is None or ins.op not in ("dma_copy",) and engine_of(ins) != "dma":
            cost = cost_of(ins, CostCtx(self.target, self.bufs))
        elif not mask_vars:
            cost = cost_of(ins, CostCtx(self.target, self.bufs, active=self._active(ins, {})))
        loc = f"{ins.loc.file.rsplit('/', 1)[-1]}:{ins.loc.line}" if ins.loc else ""
        shape = "x".join(map(str, ins.outs[0].shape)) if ins.outs else ""
        label = cost.opcode if cost is not None else ins.op
        return InstrInfo(ins, cost, reads, writes, False, mask_vars, loc, shape, label)

    def _active(self, ins: Instr, env) -> int:
        shape = ins.outs[0].shape
        return int(np.count_nonzero(ins.mask.evaluate(env, shape)))

    def cost(self, inf: InstrInfo, env) -> Cost:
        if inf.cost is not None:
            return inf.cost
        key = tuple(env[v] for v in inf.mask_vars)
        cache = getattr(inf, "_cache", None)
        if cache is None:
            cache = inf._cache = {}
        c = cache.get(key)
        if c is None:
            c = cache[key] = cost_of(inf.instr, CostCtx(self.target, self.bufs,
                                                       active=self._active(inf.instr, env)))
        return c

    def _fold_memsets(self, nodes):
        """PSUM memset(0) followed (as the next access to that buffer) by an accumulating matmul."""
        flat = list(_walk_flat(nodes))
        for k, ins in enumerate(flat):
            if ins.op != "memset" or self.bufs[ins.out.buffer].space != Space.PSUM:
                continue
            v = ins.ins[0]
            if getattr(v, "value", None) != 0:
                continue
            buf = ins.out.buffer
            for nxt in flat[k + 1:]:
                touched = {o.buffer for o in nxt.outs} | {o.buffer for o in nxt.ins if isinstance(o, Access)}
                if buf not in touched:
                    continue
                if nxt.op == "nc_matmul" and nxt.attr("accumulate") and nxt.out.buffer == buf:
                    self.info[id(ins)].folded = True
                break
            # each body is searched once per memset; nested loops are in program order in `flat`


def _walk(nodes, loops=()):
    for n in nodes:
        if isinstance(n, Loop):
            yield from _walk(n.body, loops + (n,))
        else:
            yield n, loops


def _walk_flat(nodes):
    for n, _ in _walk(nodes):
        yield n


# ------------------------------------------------------------------------------ records

class Rec:
    """A memory-region event: box [lo, hi], end time t, engine. `ranges` are extrapolated copies:
    tuples (shift per step, steps n, time per step dt): r in 0..n shifts the box by r*shift and the
    time by r*dt."""
    __slots__ = ("lo", "hi", "t", "eng", "coef", "ranges", "dead", "home", "rot", "serial")

    def __init__(self, lo, hi, t, eng, coef, home, rot, serial=0):
        self.lo, self.hi, self.t, self.eng, self.coef = lo, hi, t, eng, coef
        self.serial = serial
        self.ranges = ()
        self.dead = False
        self.home = home          # (region, 0 for writes / 1 for reads)
        self.rot = rot            # buffer name if it lives in a rotating (per-instance) region

    def bbox(self):
        if not self.ranges:
            return self.lo, self.hi
        lo, hi = list(self.lo), list(self.hi)
        for s, n, _ in self.ranges:
            for d, c in enumerate(s):
                lo[d] += min(0, c * n)
                hi[d] += max(0, c * n)
        return lo, hi

    def tmax(self):
        return self.t + sum(max(0.0, dt * n) for _, n, dt in self.ranges)

    def overlap_time(self, qlo, qhi):
        """Latest time among this record's copies whose box overlaps [qlo, qhi], or None."""
        if not self.ranges:
            for a, b, c, d in zip(self.lo, self.hi, qlo, qhi):
                if a > d or b < c:
                    return None
            return self.t
        nr = len(self.ranges)
        rlo = [0] * nr
        rhi = [n for _, n, _ in self.ranges]
        for d in range(len(self.lo)):
            nz = [i for i in range(nr) if self.ranges[i][0][d] != 0]
            lo_d, hi_d = self.lo[d], self.hi[d]
            if not nz:
                if lo_d > qhi[d] or hi_d < qlo[d]:
                    return None
            elif len(nz) == 1:
                i = nz[0]
                s = self.ranges[i][0][d]
                if s > 0:
                    a, b = _ceil_div(qlo[d] - hi_d, s), (qhi[d] - lo_d) // s
                else:
                    a, b = _ceil_div(qhi[d] - lo_d, s), (qlo[d] - hi_d) // s
                rlo[i] = max(rlo[i], a)
                rhi[i] = min(rhi[i], b)
                if rlo[i] > rhi[i]:
                    return None
            else:                                  # coupled dimension: conservative bounding box
                blo, bhi = self.bbox()
                for a, b, c, e in zip(blo, bhi, qlo, qhi):
                    if a > e or b < c:
                        return None
                return self.tmax()
        return self.t + sum(dt * (rhi[i] if dt >= 0 else rlo[i]) for i, (_, _, dt) in enumerate(self.ranges))


def _ceil_div(a, b):
    return -((-a) // b)


def _contains(olo, ohi, lo, hi):
    for a, b, c, d in zip(olo, ohi, lo, hi):
        if a < c or b > d:
            return False
    return True


class Region:
    """The records of one buffer instance, bucketed by the block coordinates (the dimensions before
    the partition dimension, NKI's (B, P, F) layout) so that a tile access scans only its block."""
    __slots__ = ("nb", "buckets", "wide")

    def __init__(self, nb: int):
        self.nb = nb
        self.buckets: dict = {}
        self.wide = ([], [])

    def lists_for(self, lo, hi):
        nb = self.nb
        if nb == 0:
            b = self.buckets.get(())
            return [self.wide] + ([b] if b is not None else [])
        if lo[:nb] == hi[:nb]:
            b = self.buckets.get(lo[:nb])
            return [self.wide] + ([b] if b is not None else [])
        return [self.wide] + list(self.buckets.values())

    def home_for(self, lo, hi):
        nb = self.nb
        if nb and lo[:nb] != hi[:nb]:
            return self.wide
        key = lo[:nb]
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = ([], [])
        return b

    def all_lists(self):
        yield self.wide
        yield from self.buckets.values()


# ------------------------------------------------------------------------------ the simulation

@dataclass
class Event:
    track: str
    name: str
    start: float
    dur: float
    loc: str = ""
    shape: str = ""
    args: dict = field(default_factory=dict)


@dataclass
class ScheduleResult:
    total_ns: float
    events: list
    dma_active_ns: float
    extrapolations: list          # (loop var, iterations skipped, period, approximate?)
    simulated_instructions: int
    approximate: bool


class Simulator:
    def __init__(self, plan: Plan, record_events: bool = True, extrapolate: bool = True):
        self.plan = plan
        self.extrapolate = extrapolate
        t = plan.target
        self.t = t
        self.sem = t.semaphore_latency_ns
        self.dep = {e: (t.dep_issue_cycles - t.min_ii) / t.clocks[e] for e in COMPUTE_ENGINES}
        self.dep["tensor"] = 0.0
        self.qidx = list(range(t.dma_queues))
        self.res_names = list(COMPUTE_ENGINES) + ["port_sbuf_vg", "port_psum_vs"]
        self.free = {r: 0.0 for r in self.res_names}
        self.qbusy = [[] for _ in self.qidx]        # per DMA queue: busy intervals, sorted
        self.qfloor = [0.0] * t.dma_queues          # before this, a queue's history is forgotten: busy
        self.streams = {s: 0.0 for s in TRIGGER_STREAMS}   # last DMA start per trigger stream
        self.used_streams = {"sync"}
        self.regions: dict = {}
        self.gen = {n: 0 for n in plan.bufs}
        self.slots = plan.alloc.slots
        self.rotating = {ins.out.buffer for ins, _ in _walk(plan.body) if ins.op == "alloc"}
        self.record_events = record_events
        self.events: list[Event] = []
        self.dma_iv: list[tuple[float, float]] = []
        self.dma_extra = 0.0
        self.created: list[list] = []       # one list per active loop level
        self.sim_count = 0
        self.t_max = 0.0
        self.extrapolations = []
        self.approximate = False
        self._loop_static: dict = {}
        self._loop_deps: dict = {}
        self.serial = 0

    # ---- regions
    def _region(self, a: AccInfo, inst: int) -> Region:
        key = (a.buf if a.buf in self.rotating else a.root, inst)
        r = self.regions.get(key)
        if r is None:
            r = self.regions[key] = Region(a.nblock)
        return r

    def _regions_for(self, a: AccInfo):
        """The instance accessed now, and the previous occupant of its physical copy."""
        if a.buf in self.rotating:
            g = self.gen[a.buf]
            s = self.slots.get(a.buf, 1)
            prev = self.regions.get((a.buf, g - s))
            cur = self._region(a, g)
            return (cur, prev) if prev is not None else (cur,)
        return (self._region(a, 0),)

    def _lat(self, prod: str, cons: str, raw: bool) -> float:
        if prod == cons:
            return self.dep.get(cons, 0.0) if raw else 0.0
        if prod == "none" or cons == "none":
            return 0.0
        return self.sem

    def _ready(self, inf: InstrInfo, eng: str, boxes_r, boxes_w) -> float:
        ready = 0.0
        sem = self.sem
        dep = self.dep.get(eng, 0.0)
        self.producer = None
        last = -1.0
        for a, (lo, hi) in zip(inf.reads, boxes_r):
            for reg in self._regions_for(a):
                for ws, _ in reg.lists_for(lo, hi):
                    for r in ws:
                        if r.dead:
                            continue
                        if r.ranges:
                            tt = r.overlap_time(lo, hi)
                            if tt is None:
                                continue
                        else:
                            for x, y, c, d in zip(r.lo, r.hi, lo, hi):
                                if x > d or y < c:
                                    break
                            else:
                                tt = r.t
                                if tt > last:
                                    last, self.producer = tt, r.eng
                                tt += dep if r.eng == eng else (0.0 if r.eng == "none" or eng == "none" else sem)
                                if tt > ready:
                                    ready = tt
                            continue
                        if tt > last:
                            last, self.producer = tt, r.eng
                        tt += dep if r.eng == eng else (0.0 if r.eng == "none" or eng == "none" else sem)
                        if tt > ready:
                            ready = tt
        for a, (lo, hi) in zip(inf.writes, boxes_w):
            for reg in self._regions_for(a):
                for pair in reg.lists_for(lo, hi):
                    for lst in pair:
                        for r in lst:
                            if r.dead:
                                continue
                            if r.ranges:
                                tt = r.overlap_time(lo, hi)
                                if tt is None:
                                    continue
                            else:
                                if r.t + sem <= ready:
                                    continue           # cannot raise the ready time
                                for x, y, c, d in zip(r.lo, r.hi, lo, hi):
                                    if x > d or y < c:
                                        break
                                else:
                                    tt = r.t
                                    if r.eng != eng and r.eng != "none" and eng != "none":
                                        tt += sem
                                    if tt > ready:
                                        ready = tt
                                continue
                            if r.eng != eng and r.eng != "none" and eng != "none":
                                tt += sem
                            if tt > ready:
                                ready = tt
        return ready

    def _add(self, lst, rec):
        self.serial += 1
        rec.serial = self.serial
        lst.append(rec)
        for c in self.created:
            c.append(rec)

    def _record(self, inf: InstrInfo, eng: str, end: float, boxes_r, boxes_w):
        for a, (lo, hi) in zip(inf.writes, boxes_w):
            reg = self._region(a, self.gen[a.buf] if a.buf in self.rotating else 0)
            for pair in reg.lists_for(lo, hi):
                for k, lst in enumerate(pair):
                    if not lst:
                        continue
                    keep = []
                    for r in lst:
                        if r.dead:
                            continue
                        if r.ranges:
                            blo, bhi = r.bbox()
                        else:
                            blo, bhi = r.lo, r.hi
                        if _contains(blo, bhi, lo, hi) and (k == 0 or r.eng == eng or r.tmax() <= end):
                            r.dead = True
                        else:
                            keep.append(r)
                    if len(keep) != len(lst):
                        lst[:] = keep
            home = reg.home_for(lo, hi)
            rot = a.buf if a.buf in self.rotating else None
            self._add(home[0], Rec(lo, hi, end, eng, a.coef, (reg, 0), rot))
        for a, (lo, hi) in zip(inf.reads, boxes_r):
            reg = self._region(a, self.gen[a.buf] if a.buf in self.rotating else 0)
            home = reg.home_for(lo, hi)
            rs = home[1]
            if rs:
                # only the newest reads are examined: pruning is an optimisation, never needed
                for k in range(len(rs) - 1, max(-1, len(rs) - 9), -1):
                    r = rs[k]
                    if not r.dead and r.eng == eng and not r.ranges and r.t <= end and \
                            _contains(r.lo, r.hi, lo, hi):
                        r.dead = True
                        del rs[k]
            rot = a.buf if a.buf in self.rotating else None
            self._add(rs, Rec(lo, hi, end, eng, a.coef, (reg, 1), rot))

    def _alloc(self, buf: str):
        g = self.gen[buf] = self.gen[buf] + 1
        s = self.slots.get(buf, 1)
        old = self.regions.pop((buf, g - s - 1), None)
        if old is not None:
            for pair in old.all_lists():
                for lst in pair:
                    for r in lst:
                        r.dead = True

    # ---- one instruction
    def instr(self, ins: Instr, env):
        plan = self.plan
        inf = plan.info[id(ins)]
        if ins.op == "alloc":
            self._alloc(ins.out.buffer)
            return
        self.sim_count += 1
        boxes_r = [a.box(env) for a in inf.reads]
        boxes_w = [a.box(env) for a in inf.writes]
        if inf.folded:
            ready = self._ready(inf, "tensor", boxes_r, boxes_w)
            self._record(inf, "tensor", ready, boxes_r, boxes_w)
            return
        c = plan.cost(inf, env)
        eng = c.engine
        ready = self._ready(inf, eng, boxes_r, boxes_w)
        free = self.free
        if eng == "dma":
            # the trigger stream: the engine that produced the data (stores), else the Sync engine
            stream = self.producer if self.producer in COMPUTE_ENGINES else "sync"
            # in-order trigger: after the stream's previous DMA start and, for an engine, after the
            # engine's earlier instructions (the trigger sits in its instruction stream)
            ready = max(ready, self.streams[stream], free.get(stream, 0.0) if stream != "sync" else 0.0)
            fits = sorted((self._fit(q, ready, c.ns), q) for q in self.qidx)[:c.queues]
            start = fits[0][0]
            end = fits[-1][0] + c.ns
            for st, q in fits:
                self._occupy(q, st, st + c.ns)
            self.streams[stream] = start
            self.used_streams.add(stream)
            self.dma_iv.append((start, end))
            if self.record_events and len(self.events) < MAX_EVENTS:
                args = {"bytes": c.dma_bytes, "descriptors": c.descriptors, "trigger": stream,
                        "formula": c.formula}
                for st, q in fits:
                    self.events.append(Event(f"q{q}", inf.label, st, c.ns, inf.loc, inf.shape, args))
        elif eng == "none":
            start = end = ready
        else:
            ports = []
            if self.t.sbuf_vector_gpsimd_exclusive and eng in ("vector", "gpsimd") and \
                    "sbuf" in c.reads + c.writes:
                ports.append("port_sbuf_vg")
            if self.t.psum_vector_scalar_exclusive and eng in ("vector", "scalar") and \
                    "psum" in c.reads + c.writes:
                ports.append("port_psum_vs")
            start = max([ready, free[eng]] + [free[p] for p in ports])
            end = start + c.ns
            free[eng] = end
            for p in ports:
                free[p] = end
            if self.record_events and len(self.events) < MAX_EVENTS:
                self.events.append(Event(eng, inf.label, start, c.ns, inf.loc, inf.shape,
                                         {"cycles": round(c.cycles, 3), "formula": c.formula}))
        if end > self.t_max:
            self.t_max = end
        self._record(inf, eng, end, boxes_r, boxes_w)

    # ---- DMA queues
    def _fit(self, q: int, ready: float, d: float) -> float:
        """Earliest start >= ready of a gap of length d on queue q."""
        cand = max(ready, self.qfloor[q])
        for s, e in self.qbusy[q]:
            if e <= cand:
                continue
            if s >= cand + d:
                break
            cand = e
        return cand

    def _occupy(self, q: int, s: float, e: float):
        iv = self.qbusy[q]
        bisect.insort(iv, (s, e))
        # no future DMA starts before the earliest trigger stream's last start: forget what ends earlier
        horizon = min(self.streams[st] if st == "sync" else max(self.streams[st], self.free[st])
                      for st in self.used_streams)
        k = 0
        while k < len(iv) - 1 and iv[k][1] <= horizon:
            k += 1
        if len(iv) - k > QUEUE_HISTORY:
            k = len(iv) - QUEUE_HISTORY
        if k:
            self.qfloor[q] = max(self.qfloor[q], iv[k - 1][1])
            del iv[:k]

    def _qend(self, q: int) -> float:
        iv = self.qbusy[q]
        return max(self.qfloor[q], iv[-1][1] if iv else 0.0)

    # ---- structure
    def nodes(self, nodes, env):
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n, env)
            else:
                self.instr(n, env)

    def _static(self, loop: Loop):
        """Per loop: allocations per iteration of every buffer allocated inside it, and the number
        of iterations W that hold the live physical copies of those buffers."""
        st = self._loop_static.get(id(loop))
        if st is None:
            per_iter: dict = {"": 0}

            def count(nodes, mult):
                for n in nodes:
                    if isinstance(n, Loop):
                        count(n.body, mult * max(0, n.trip))
                    elif n.op == "alloc":
                        per_iter[n.out.buffer] = per_iter.get(n.out.buffer, 0) + mult
                    else:
                        per_iter[""] += mult
            count(loop.body, 1)
            work = per_iter.pop("")
            W = 1
            for b, k in per_iter.items():
                if k:
                    W = max(W, math.ceil((self.slots.get(b, 1) + 1) / k))
            st = self._loop_static[id(loop)] = (per_iter, W, work)
        return st

    def _queue_layout(self):
        """(offset, intervals) of every queue's history inside the last snapshot."""
        return self._layout

    def _qsnap(self):
        return [self.free[r] for r in self.res_names] + [self._qend(q) for q in self.qidx] + \
            [self.streams[s] for s in TRIGGER_STREAMS]

    def _snapshot(self, created):
        vals = self._qsnap()
        layout = []
        prev = None
        for q in self.qidx:                 # the queues' remembered history (gap filling depends on it)
            iv = self.qbusy[q]
            if prev is not None and iv == self.qbusy[prev[0]]:
                vals.append(-1.0)           # same history as the previous queue
                layout.append(prev[1])
                continue
            vals.append(float(len(iv)))
            layout.append((len(vals), len(iv)))
            vals.extend(chain.from_iterable(iv))
            prev = (q, layout[-1])
        self._layout = layout
        self._rec_off = len(vals)
        for r in created:
            vals.append(r.t)
            for _, n, dt in r.ranges:
                vals.append(n)
                vals.append(dt)
        return np.array(vals)

    def loop(self, loop: Loop, env):
        T = loop.trip
        var = loop.var
        if T <= 0:
            return
        per_iter, W, work = self._static(loop)
        periods = [p for p in (1, 2, 4, 8) if max(W, p) + (MIN_SAMPLES - 1) * p < T]
        if not periods or not self.extrapolate or T * work < MIN_EXTRAPOLATE_WORK:
            for j in range(T):
                env[var] = j
                self.nodes(loop.body, env)
            env.pop(var, None)
            return
        serial0 = self.serial
        snaps, created_per_iter = [], []
        first = 0                    # iteration that snaps[0] describes
        j = 0
        while j < T:
            env[var] = j
            mine: list = []
            self.created.append(mine)
            n_iv = (len(self.dma_iv), self.dma_extra)
            self.nodes(loop.body, env)
            self.created.pop()
            snaps.append(self._snapshot(mine))
            created_per_iter.append((mine, n_iv, self._rec_off))
            jj = j - first
            offs = [c[2] for c in created_per_iter]
            p = self._detect(snaps, offs, periods, W, jj)
            forced = False
            if p is None and j + 1 < T:
                if (jj + 1 >= MAX_SIM and T > FULL_SIM_TRIP) or self.sim_count > BUDGET:
                    p = self._fallback_period(snaps, offs, periods, W, jj)
                    forced = p is not None
            if p is not None:
                Q = (T - 1 - j) // p
                if Q > 0 and not forced:
                    Q = self._safe_chunks(loop, env, p, Q, j, serial0)
                    Q = min(Q, self._queue_safe_chunks(snaps[jj] - snaps[jj - p]))
                if Q > 0:
                    self._extrapolate(loop, p, Q, W, snaps, created_per_iter, per_iter, jj, forced)
                    j += Q * p
                    first = j + 1            # start detecting afresh after a jump
                    snaps, created_per_iter = [], []
            j += 1
        env.pop(var, None)

    def _queue_safe_chunks(self, d) -> int:
        """Busy intervals that do not move with the loop (reserved by other trigger streams ahead
        of it) bound how far the queues' moving intervals may be extrapolated."""
        Q = 1 << 60
        for q, (off, n) in enumerate(self._queue_layout()):
            if not n:
                continue
            dd = d[off:off + 2 * n]
            iv = self.qbusy[q]
            moving = [k for k in range(n) if dd[2 * k + 1] > TOL]
            if not moving:
                continue
            step = max(float(dd[2 * k + 1]) for k in moving)
            mend = max(iv[k][1] for k in moving)
            for k in range(n):
                if dd[2 * k + 1] <= TOL and iv[k][0] >= mend - TOL:
                    Q = min(Q, int((iv[k][0] - mend) // step))
        return max(0, Q)

    # ---- inputs from before the loop must continue the same progression
    def _dep_accesses(self, loop: Loop):
        st = self._loop_deps.get(id(loop))
        if st is None:
            st = []
            for ins, inner in _walk(loop.body):
                inf = self.plan.info[id(ins)]
                for kind, accs in ((0, inf.reads), (1, inf.writes)):
                    for a in accs:
                        if loop.var in a.coef and any(a.coef[loop.var]):
                            st.append((a, kind, inner))
            self._loop_deps[id(loop)] = st
        return st

    def _ext_time(self, a: AccInfo, kind: int, inner, env, serial0):
        """Latest end among records made before the loop started that this access (over its inner
        loops' whole ranges) depends on; None if there is none."""
        lo, hi = a.box(env)
        lo, hi = list(lo), list(hi)
        for l in inner:
            cs = a.coef.get(l.var)
            if cs:
                for d, c in enumerate(cs):        # inner variables are 0 here: widen to their range
                    span = c * (max(1, l.trip) - 1)
                    lo[d] += min(0, span)
                    hi[d] += max(0, span)
        best = None
        regs = [self._region(a, self.gen[a.buf])] if a.buf in self.rotating else [self._region(a, 0)]
        for reg in regs:
            for pair in reg.lists_for(tuple(lo), tuple(hi)):
                for lst in (pair if kind == 1 else (pair[0],)):
                    for r in lst:
                        if r.dead or r.serial >= serial0:
                            continue
                        tt = r.overlap_time(lo, hi)
                        if tt is not None and (best is None or tt > best):
                            best = tt
        return best

    def _safe_chunks(self, loop, env, p, Q, j, serial0):
        """Largest Q' <= Q such that every input produced before the loop, for the iterations
        j-3p+1 .. j+Q'p, follows an arithmetic progression per phase (otherwise the periodic
        extrapolation would miss it)."""
        deps = self._dep_accesses(loop)
        if not deps:
            return Q
        var = loop.var
        lo_v = max(0, j - (MIN_SAMPLES - 1) * p + 1)
        hi_v = j + Q * p
        limit = hi_v
        saved = {l.var: env.get(l.var) for _, _, inner in deps for l in inner}
        for a, kind, inner in deps:
            for l in inner:
                env[l.var] = 0
            seqs: dict = {}
            for v in range(lo_v, hi_v + 1):
                env[var] = v
                seqs.setdefault(v % p, []).append((v, self._ext_time(a, kind, inner, env, serial0)))
            for seq in seqs.values():
                for k in range(2, len(seq)):
                    (v0, t0), (v1, t1), (v2, t2) = seq[k - 2], seq[k - 1], seq[k]
                    if (t0 is None) != (t2 is None) or (t1 is None) != (t2 is None):
                        ok = False
                    elif t0 is None:
                        ok = True
                    else:
                        ok = abs((t2 - t1) - (t1 - t0)) <= TOL * max(1.0, abs(t2 - t1))
                    if not ok:
                        limit = min(limit, v2 - 1)
                        break
        env[var] = j
        for k, v in saved.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return max(0, (limit - j) // p)

    def _window_ok(self, snaps, offs, p, W, j):
        """Every iteration of the window [j-W+1, j] has as many records as the iteration of the same
        phase in the last period (so per-phase increments apply to it)."""
        lo = j - max(W, p) + 1
        if lo < 0:
            return False
        for i in range(lo, j + 1):
            ref = j - ((j - i) % p)
            if len(snaps[i]) != len(snaps[ref]) or offs[i] != offs[ref]:
                return False
        return True

    def _detect(self, snaps, offs, periods, W, j):
        for p in periods:
            if j + 1 < max(W, p) + (MIN_SAMPLES - 1) * p:
                continue
            ok = True
            for i in range(j - p + 1, j + 1):
                seq = [snaps[i - k * p] for k in range(MIN_SAMPLES)]
                if any(len(x) != len(seq[0]) for x in seq):
                    ok = False
                    break
                d0 = seq[0] - seq[1]
                for k in range(1, MIN_SAMPLES - 1):
                    if not np.allclose(seq[k] - seq[k + 1], d0, rtol=TOL, atol=TOL):
                        ok = False
                        break
                if not ok:
                    break
            if ok and self._window_ok(snaps, offs, p, W, j):
                return p
        return None

    def _fallback_period(self, snaps, offs, periods, W, j):
        for p in periods:
            if j - p >= 0 and all(len(snaps[i]) == len(snaps[i - p]) for i in range(j - p + 1, j + 1)) \
                    and self._window_ok(snaps, offs, p, W, j):
                return p
        return None

    def _extrapolate(self, loop, p, Q, W, snaps, created_per_iter, per_iter, j, forced):
        nr, nq = len(self.res_names), len(self.qidx)
        nres = nr + nq + len(TRIGGER_STREAMS)
        dres = snaps[j][:nres] - snaps[j - p][:nres]
        # resources
        for k, r in enumerate(self.res_names):
            self.free[r] += Q * max(0.0, dres[k])
        dfull = snaps[j] - snaps[j - p]
        for q, (off, n) in enumerate(self._queue_layout()):
            if n:
                d = dfull[off:off + 2 * n]
                self.qbusy[q] = sorted((a + Q * d[2 * k], b + Q * d[2 * k + 1])
                                       for k, (a, b) in enumerate(self.qbusy[q]))
            self.qfloor[q] += Q * max(0.0, float(np.max(dfull[off:off + 2 * n]))) if n else 0.0
        for k, st in enumerate(TRIGGER_STREAMS):
            self.streams[st] += Q * max(0.0, dres[nr + nq + k])
        # per-phase increments of every record created in the window
        phase_delta = {}
        for i in range(j - p + 1, j + 1):
            phase_delta[i % p] = snaps[i] - snaps[i - p]
        lo = j - max(W, p) + 1
        moving = []
        for i in range(lo, j + 1):
            d = phase_delta[i % p]
            pos = created_per_iter[i][2]
            for r in created_per_iter[i][0]:
                dt = float(d[pos])
                pos += 1 + 2 * len(r.ranges)
                if r.dead:
                    continue
                cs = r.coef.get(loop.var)
                if r.rot not in per_iter and cs and any(cs):
                    moving.append((r, tuple(c * p for c in cs), dt))
                else:
                    r.t += Q * dt
        expand = len(moving) * Q <= EXPAND_RECORDS
        for r, shift, dt in moving:
            if expand and not r.ranges:
                # the skipped iterations' copies, as ordinary records (they stay prunable)
                reg, k = r.home
                for m in range(1, Q + 1):
                    lo_m = tuple(a + m * c for a, c in zip(r.lo, shift))
                    hi_m = tuple(a + m * c for a, c in zip(r.hi, shift))
                    home = reg.home_for(lo_m, hi_m)
                    self._add(home[k], Rec(lo_m, hi_m, r.t + m * dt, r.eng, r.coef, (reg, k), r.rot))
            else:
                r.ranges = r.ranges + ((shift, Q, dt),)
                self._move_wide(r)      # a range record spans several blocks
        # buffers allocated inside the loop: their live instances become the instances Q periods later
        for b, k in per_iter.items():
            G = Q * p * k
            if not G or b not in self.rotating:
                continue
            moved = {key: reg for key, reg in self.regions.items() if key[0] == b}
            for key in moved:
                del self.regions[key]
            for (bb, inst), reg in moved.items():
                self.regions[(bb, inst + G)] = reg
            self.gen[b] += G
        # DMA activity and the time span skipped
        n_iv, extra0 = created_per_iter[j - p + 1][1]

        iv = self.dma_iv[n_iv:]
        period = max(0.0, float(np.max(dfull[:created_per_iter[j][2]])))
        self.dma_extra += Q * min(period, _union(iv) + (self.dma_extra - extra0))
        span = float(np.max(dres)) * Q if len(dres) else 0.0
        self.t_max = max([self.t_max] + [self.free[r] for r in COMPUTE_ENGINES] +
                         [self._qend(q) for q in self.qidx])
        if self.record_events and len(self.events) < MAX_EVENTS:
            self.events.append(Event("steady state", f"{loop.var} x{Q * p} extrapolated", self.t_max - span, span,
                                     f"{loop.loc.file.rsplit('/', 1)[-1]}:{loop.loc.line}" if loop.loc else "",
                                     "", {"iterations": Q * p, "period": p, "forced": forced}))
        self.extrapolations.append((loop.var, Q * p, p, forced))
        if forced:
            self.approximate = True

    @staticmethod
    def _move_wide(r: Rec):
        reg, k = r.home
        if reg.nb == 0:
            return
        lo, hi = r.bbox()
        if list(lo[:reg.nb]) == list(hi[:reg.nb]):
            return
        for pair in reg.buckets.values():
            if r in pair[k]:
                pair[k].remove(r)
                reg.wide[k].append(r)
                return

    def run(self) -> ScheduleResult:
        env: dict = {}
        self.nodes(self.plan.body, env)
        total = max([self.t_max] + [self.free[r] for r in COMPUTE_ENGINES] + [self._qend(q) for q in self.qidx])
        return ScheduleResult(total, self.events, min(total, _union(self.dma_iv) + self.dma_extra), self.extrapolations,
                              self.sim_count, self.approximate)


def _union(iv) -> float:
    if not iv:
        return 0.0
    s = sorted(iv)
    tot, cs, ce = 0.0, s[0][0], s[0][1]
    for a, b in s[1:]:
        if a > ce:
            tot += ce - cs
            cs, ce = a, b
        elif b > ce:
            ce = b
    return tot + ce - cs


def schedule(kernel: Kernel, target: Target, record_events: bool = True,
             extrapolate: bool = True) -> tuple[Plan, ScheduleResult]:
    plan = Plan(kernel, target)
    sim = Simulator(plan, record_events, extrapolate)
    return plan, sim.run()


# ------------------------------------------------------------------------------ exact totals

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

    for ins, loops in _walk(plan.body):
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
            add(inf.cost, mult)
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
