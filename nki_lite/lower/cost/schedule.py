"""The schedule: when each instruction of a traced kernel starts and ends on a NeuronCore.

Model (docs/engine_model.md has the long form):
- Resources: the four compute engines (tensor, vector, scalar, gpsimd), one instruction at a time
  each; 16 DMA queues, each FIFO, fed in program order (DMA triggers come from one in-order stream,
  the Sync engine, §3 arch guide); on NC-v2 two shared ports (VectorE/GpSimdE on SBUF,
  VectorE/ScalarE on PSUM, §3.1).
- An instruction starts in the earliest idle gap of its engine (and ports) at or after every
  producer has ended plus the edge latency, but no earlier than ENGINE_WINDOW_SEMAPHORES DMA
  semaphore latencies before the engine's latest end: the compiler's scheduler interleaves
  independent loop bodies within the dependence graph (issue 15: AdamW, one tile's Vector/Scalar
  chain overlapping the next tile's). Producers are found per memory region: the last writer of every region it
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

Modules: plan.py (static preparation), records.py (region records, results), periodic.py (loop
extrapolation), totals.py (exact per-kernel sums); this module is the simulator of one instruction
at a time and `schedule()`.
"""
from __future__ import annotations

import bisect

from ... import gcpause
from ...core.ir import Instr, Kernel, Loop
from ...core.targets import Target
from ..analysis.dependence import allocated_in
from .periodic import Periodic
from .plan import AccInfo, InstrInfo, Plan
from .records import (MAX_EVENTS, QUEUE_HISTORY, TRIGGER_STREAMS, Event, Rec, Region, ScheduleResult,
                      box_contains, box_disjoint, union_length)
from .rules import COMPUTE_ENGINES

# How far back the compiler's scheduler may place an instruction into an idle gap of its engine,
# in DMA semaphore latencies (§4.8, ~1300 ns): the waits it hides by interleaving independent loop
# bodies are semaphore waits. Assumed (the compiler's scheduling window is not documented), not
# fitted to a measured time: NKIBench AdamW's estimate is 3.14 / 2.69 / 2.65 / 2.34 / 2.34 ms for
# 0 / 1 / 2 / 4 / 8 latencies, i.e. by 4 the window no longer binds (tile buffers and dependencies
# do), which is the reading chosen: "the scheduler reorders freely within the dependence graph".
ENGINE_WINDOW_SEMAPHORES = 4.0
PORT_ENGINES = (("vector", "gpsimd"), ("vector", "scalar"))   # port_sbuf_vg, port_psum_vs (§3.1)


class Simulator(Periodic):
    def __init__(self, plan: Plan, record_events: bool = True, extrapolate: bool = True):
        self.plan = plan
        self.extrapolate = extrapolate
        t = plan.target
        self.t = t
        self.sem = t.semaphore_latency_ns
        self.dep = {e: (t.dep_issue_cycles - t.min_ii) / t.clocks[e] for e in COMPUTE_ENGINES}
        self.dep["tensor"] = 0.0
        # latency added on a dependency edge, [consumer][producer]: the documented ~1300 ns semaphore
        # wait only where a DMA is on either side (§4.8: DMA descriptor setup / semaphore-to-start);
        # between two compute engines the §4.6 dependent-issue gap of the consumer (200 cycles),
        # as on one engine (issue 15: the 1300 ns is a DMA figure, no compute-to-compute one is documented)
        names = tuple(COMPUTE_ENGINES) + ("dma", "none", "sync")
        xdep = {e: (t.dep_issue_cycles - t.min_ii) / t.clocks[e] for e in COMPUTE_ENGINES}

        def edge(prod, cons, raw):
            if prod == "none" or cons == "none":
                return 0.0
            if prod == cons:
                return self.dep.get(cons, 0.0) if raw else 0.0
            if prod in xdep and cons in xdep:
                return xdep[cons] if raw else 0.0
            return self.sem
        self.lat_raw = {c: {p: edge(p, c, True) for p in names} for c in names}
        self.lat_war = {c: {p: edge(p, c, False) for p in names} for c in names}
        self.qidx = list(range(t.dma_queues))
        self.res_names = list(COMPUTE_ENGINES) + ["port_sbuf_vg", "port_psum_vs"]
        self.free = {r: 0.0 for r in self.res_names}
        # lanes: the DMA queues, then one per compute engine and shared port (busy intervals, sorted)
        self.lane = {r: t.dma_queues + k for k, r in enumerate(self.res_names)}
        self.lanes = list(range(t.dma_queues + len(self.res_names)))
        self.qbusy = [[] for _ in self.lanes]
        self.qfloor = [0.0] * len(self.lanes)       # before this, a lane's history is forgotten: busy
        # an instruction may fill an idle gap of its engine up to this long before the engine's
        # latest end (ENGINE_WINDOW_SEMAPHORES x the DMA semaphore latency)
        self.window = ENGINE_WINDOW_SEMAPHORES * t.semaphore_latency_ns
        self.streams = {s: 0.0 for s in TRIGGER_STREAMS}   # last DMA start per trigger stream
        self.used_streams = {"sync"}
        self.regions: dict = {}
        self.gen = {n: 0 for n in plan.bufs}
        self.slots = plan.alloc.slots
        # tiles allocated in the body are fresh in every iteration (dependence analysis): each
        # instance gets its own region, so iterations touching different copies are independent
        self.rotating = allocated_in(plan.kernel, plan.body)
        self.record_events = record_events
        self.events: list[Event] = []
        self.dma_iv: list[tuple[float, float]] = []
        self.dma_extra = 0.0
        # engine-active time as the profiler counts it (§6.4: an engine is active while an instruction is
        # being processed): each instruction's interval plus the static overhead (~100 cycles, §4.6),
        # which the initiation-interval formulas hide between back-to-back instructions but which shows
        # after an instruction followed by idle time. Time is unaffected; only the active union grows.
        self.overhead = {e: t.static_overhead_cycles / t.clocks[e] for e in COMPUTE_ENGINES}
        self.act_iv: dict = {e: [] for e in COMPUTE_ENGINES}
        self.act_extra = {e: 0.0 for e in COMPUTE_ENGINES}
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

    def _ready(self, inf: InstrInfo, eng: str, boxes_r, boxes_w) -> float:
        # the hot path of the model: record tests and region look-ups are inlined (Rec.overlap_time,
        # Region.lists_for do the same for the general case), in the same order, so results are identical
        ready = 0.0
        sem = self.sem
        lat_r, lat_w = self.lat_raw[eng], self.lat_war[eng]
        producer = None
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
                                x = None
                            if x is not None:
                                continue           # disjoint
                            tt = r.t
                        if tt > last:
                            last, producer = tt, r.eng
                        tt += lat_r[r.eng]
                        if tt > ready:
                            ready = tt
        self.producer = producer
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
                                if r.t + sem <= ready or box_disjoint(r.lo, r.hi, lo, hi):
                                    continue       # (a plain box ends at r.t: it cannot raise the ready time)
                                tt = r.t
                            tt += lat_w[r.eng]
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
        rotating, gen = self.rotating, self.gen
        for a, (lo, hi) in zip(inf.writes, boxes_w):
            rot = a.buf if a.buf in rotating else None
            reg = self._region(a, gen[a.buf] if rot else 0)
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
                        if (k == 0 or r.eng == eng or r.tmax() <= end) and box_contains(blo, bhi, lo, hi):
                            r.dead = True
                        else:
                            keep.append(r)
                    if len(keep) != len(lst):
                        lst[:] = keep
            home = reg.home_for(lo, hi)
            self._add(home[0], Rec(lo, hi, end, eng, a.coef, (reg, 0), rot))
        for a, (lo, hi) in zip(inf.reads, boxes_r):
            rot = a.buf if a.buf in rotating else None
            reg = self._region(a, gen[a.buf] if rot else 0)
            home = reg.home_for(lo, hi)
            rs = home[1]
            if rs:
                # only the newest reads are examined: pruning is an optimisation, never needed
                for k in range(len(rs) - 1, max(-1, len(rs) - 9), -1):
                    r = rs[k]
                    if not r.dead and r.eng == eng and not r.ranges and r.t <= end and \
                            box_contains(r.lo, r.hi, lo, hi):
                        r.dead = True
                        del rs[k]
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
                    lst.clear()            # (records refer to their region: no cycle left behind)

    def _release(self):
        """Empty every region's record lists: records and regions refer to each other, and with the
        collector paused nothing else would free them."""
        for reg in self.regions.values():
            for pair in reg.all_lists():
                for lst in pair:
                    lst.clear()
        self.regions.clear()
        self.created.clear()

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
        if inf.hoist is not None and inf.hoist.skipped(env):
            # a hoisted loop-invariant load (hoist.py): the data is already in SBUF
            ready = self._ready(inf, "none", boxes_r, boxes_w)
            self._record(inf, "none", ready, boxes_r, boxes_w)
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
            # the compiler's scheduler fills an engine's idle time with later independent
            # instructions: the earliest gap (on the engine and its ports) at or after `ready`
            # (at most `window` ns before the engine's latest end: the scheduler's reach)
            lanes = [self.lane[eng]] + [self.lane[p] for p in ports]
            start = self._fit_all(lanes, max(ready, free[eng] - self.window), c.ns)
            end = start + c.ns
            for ln in lanes:
                self._occupy_lane(ln, start, end, eng)
            self.act_iv[eng].append((start, end + self.overhead[eng]))
            if end > free[eng]:
                free[eng] = end
            for p in ports:
                if end > free[p]:
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
        iv = self.qbusy[q]
        if not iv or iv[-1][1] <= cand:               # after everything remembered
            return cand
        for s, e in iv:
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
        self._forget(q, horizon, QUEUE_HISTORY)

    def _forget(self, q: int, horizon: float, cap: int | None) -> None:
        """Drop lane q's intervals that end by `horizon` (always keeping the last) and all but the last
        `cap`; the time they covered counts as busy from now on (qfloor)."""
        iv = self.qbusy[q]
        k = 0
        while k < len(iv) - 1 and iv[k][1] <= horizon:
            k += 1
        if cap is not None and len(iv) - k > cap:
            k = len(iv) - cap
        if k:
            self.qfloor[q] = max(self.qfloor[q], iv[k - 1][1])
            del iv[:k]

    def _fit_all(self, lanes, ready: float, d: float) -> float:
        """Earliest start >= ready of a gap of length d common to every lane."""
        t = ready
        while True:
            t2 = t
            for ln in lanes:
                t2 = self._fit(ln, t2, d)
            if t2 == t:
                return t
            t = t2

    def _occupy_lane(self, q: int, s: float, e: float, eng: str):
        """Reserve [s, e] on a compute lane; forget the intervals that end before any later
        instruction of `eng` may start (its window's earliest start) and, on a shared port lane,
        all but the last QUEUE_HISTORY (older time counts as busy)."""
        iv = self.qbusy[q]
        if not iv or s >= iv[-1][0]:
            if iv and iv[-1][1] == s:              # back to back: one busy interval (no gap to fill)
                iv[-1] = (iv[-1][0], e)
            else:
                iv.append((s, e))
        else:
            i = bisect.bisect(iv, (s, e))
            iv.insert(i, (s, e))
            if i + 1 < len(iv) and iv[i + 1][0] == e:
                iv[i:i + 2] = [(s, iv[i + 1][1])]
            if i and iv[i - 1][1] == s:
                iv[i - 1:i + 1] = [(iv[i - 1][0], iv[i][1])]
        if q == self.lane[eng]:
            self._forget(q, self.free[eng] - self.window, None)
        else:           # a shared port: the earliest reach of the engines on it that have run
            horizon = min((self.free[x] for x in PORT_ENGINES[q - self.lane["port_sbuf_vg"]] if self.free[x] > 0),
                          default=0.0) - self.window
            self._forget(q, horizon, QUEUE_HISTORY)

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

    def run(self) -> ScheduleResult:
        env: dict = {}
        # the records are millions of small objects: the cyclic collector's passes over them cost as
        # much as the simulation (records and regions refer to each other; _release breaks the cycles)
        with gcpause.paused():
            try:
                self.nodes(self.plan.body, env)
            finally:
                self._release()
        total = max([self.t_max] + [self.free[r] for r in COMPUTE_ENGINES] + [self._qend(q) for q in self.qidx])
        active = {e: min(total, union_length(self.act_iv[e]) + self.act_extra[e]) for e in COMPUTE_ENGINES}
        return ScheduleResult(total, self.events, min(total, union_length(self.dma_iv) + self.dma_extra), self.extrapolations,
                              self.sim_count, self.approximate, active)


def schedule(kernel: Kernel, target: Target, record_events: bool = True,
             extrapolate: bool = True) -> tuple[Plan, ScheduleResult]:
    plan = Plan(kernel, target)
    sim = Simulator(plan, record_events, extrapolate)
    return plan, sim.run()
