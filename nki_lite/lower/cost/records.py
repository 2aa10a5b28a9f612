"""Memory-region records of the schedule simulation (schedule.py) and its results.

Contract: a `Rec` is one access's box [lo, hi] with the time its instruction ends and its engine;
extrapolated copies of a record (periodic.py) are kept as `ranges` (shift per step, steps, time per
step) instead of one record per skipped iteration. A `Region` holds the records of one buffer
instance (one physical copy of a rotating tile), bucketed by the leading block indices so that a
query only scans the records whose blocks it can touch. `Event` is one scheduled instruction
(profile timelines), `ScheduleResult` the outcome of a run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .rules import COMPUTE_ENGINES

MAX_EVENTS = 200_000       # events kept for a profile timeline
TRIGGER_STREAMS = ("sync",) + COMPUTE_ENGINES
QUEUE_HISTORY = 32         # busy intervals remembered per DMA queue (older time counts as busy)


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


def box_contains(olo, ohi, lo, hi):
    for a, b, c, d in zip(olo, ohi, lo, hi):
        if a < c or b > d:
            return False
    return True


def box_disjoint(alo, ahi, blo, bhi) -> bool:
    """Boxes [alo, ahi] and [blo, bhi] share no point."""
    for a, b, c, d in zip(alo, ahi, blo, bhi):
        if a > d or b < c:
            return True
    return False


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
    # compute engine -> engine-active time: the union of its instructions' [start, end + static overhead]
    # (schedule.py; the profiler's *_engine_active_time, §6.4), at most total_ns
    engine_active_ns: dict = field(default_factory=dict)


def union_length(iv) -> float:
    """Total length of a union of intervals."""
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
