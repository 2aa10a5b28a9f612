"""Loops of the schedule simulation (schedule.py): simulate the first iterations, extrapolate the periodic rest.

Contract (the long form is in schedule.py's docstring and docs/engine_model.md): `Periodic.loop`
runs a loop's iterations through the simulator; after each iteration it snapshots every state time
(engine/queue free times, queue histories, the end times of the records the iteration created).
When, for a period p (a multiple of the tile-rotation period W), the snapshots advance by the same
per-item increment over MIN_SAMPLES consecutive periods, the remaining whole periods are skipped:
state times advance by the increment times the periods skipped and the skipped iterations' records
become range records. Skipping stops short of anything that does not move with the loop (busy queue
intervals reserved ahead of it, records read back by later iterations: `_safe_chunks`). A loop over
the simulation budget is extrapolated with the best period found (`approximate`). `Periodic` is a
mixin of `schedule.Simulator`: it reads and writes the simulator's state.
"""
from __future__ import annotations

import math
from itertools import chain

import numpy as np

from ...core.ir import Loop, walk
from .nest import Iteration, iteration
from .plan import AccInfo
from .records import MAX_EVENTS, TRIGGER_STREAMS, Event, Rec, union_length
from .rules import COMPUTE_ENGINES

MIN_SAMPLES = 3            # samples per phase compared: two equal increments
MAX_SIM = 64               # iterations simulated per loop level before a forced extrapolation
FULL_SIM_TRIP = 128        # loops up to this trip are simulated fully when no period is found
BUDGET = 400_000           # simulated instruction instances before every loop extrapolates early
TOL = 1e-6
MIN_EXTRAPOLATE_WORK = 64  # loops executing fewer instructions are always simulated in full
EXPAND_RECORDS = 20_000    # extrapolated copies kept as ordinary records up to this many per extrapolation


def _close(a, b) -> bool:
    """np.allclose(a, b, rtol=TOL, atol=TOL) for finite arrays, without its per-call overhead (the
    detection runs after every iteration)."""
    return bool(((np.abs(a - b) <= TOL + TOL * np.abs(b)) | (a == b)).all())


class Periodic:
    def _static(self, loop: Loop):
        """Per loop: allocations per iteration of every buffer allocated inside it, the number of
        iterations W that hold the live physical copies of those buffers, the instructions per
        iteration, and the iterations walked (nest.py: a uniform perfect nest is one loop)."""
        st = self._loop_static.get(id(loop))
        if st is None:
            it = iteration(self.plan, loop) if self.extrapolate else None
            per_iter: dict = {"": 0}

            def count(nodes, mult):
                for n in nodes:
                    if isinstance(n, Loop):
                        count(n.body, mult * max(0, n.trip))
                    elif n.op == "alloc":
                        per_iter[n.out.buffer] = per_iter.get(n.out.buffer, 0) + mult
                    else:
                        per_iter[""] += mult
            count(it.body if it else loop.body, 1)
            work = per_iter.pop("")
            W = 1
            for b, k in per_iter.items():
                if k:
                    W = max(W, math.ceil((self.slots.get(b, 1) + 1) / k))
            st = self._loop_static[id(loop)] = (per_iter, W, work, it)
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
        for q in self.lanes:                # the lanes' remembered history (gap filling depends on it)
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
        if loop.trip <= 0:
            return
        per_iter, W, work, it = self._static(loop)
        T = it.trip if it else loop.trip
        periods = [p for p in (1, 2, 4, 8) if max(W, p) + (MIN_SAMPLES - 1) * p < T]
        if not periods or not self.extrapolate or T * work < MIN_EXTRAPOLATE_WORK:
            var = loop.var
            for j in range(loop.trip):
                env[var] = j
                self.nodes(loop.body, env)
            env.pop(var, None)
            return
        serial0 = self.serial
        snaps, created_per_iter = [], []
        first = 0                    # iteration that snaps[0] describes
        pre: dict = {}               # iteration -> its pre-loop input times, taken before it ran
        deps = self._dep_accesses(it)
        j = 0
        while j < T:
            it.set(env, j)
            if deps and j - first >= W:     # (earlier iterations are never in a checked window)
                pre[j] = self._pre_times(deps, env, serial0)
            mine: list = []
            self.created.append(mine)
            n_iv = (len(self.dma_iv), self.dma_extra,
                    {e: (len(v), self.act_extra[e]) for e, v in self.act_iv.items()})
            self.nodes(it.body, env)
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
                if len(it.vars) == 1:        # (a flattened nest has no hoisting breaks: nest.py)
                    Q = self._break_chunks(loop.var, env, p, Q, j, jj, W)
                if Q > 0 and not forced:
                    Q = self._safe_chunks(it, env, p, Q, j, serial0, pre)
                    Q = min(Q, self._queue_safe_chunks(snaps[jj] - snaps[jj - p]))
                if Q > 0:
                    self._extrapolate(it, p, Q, W, snaps, created_per_iter, per_iter, jj, forced, first)
                    j += Q * p
                    first = j + 1            # start detecting afresh after a jump
                    snaps, created_per_iter = [], []
            j += 1
        it.clear(env)

    def _break_chunks(self, var, env, p, Q, j, jj, W) -> int:
        """Largest Q' <= Q whose skipped iterations j+1 .. j+Q'p, and the sampled window before them,
        cross no value where the body's behaviour changes (plan.hoist_breaks: hoisted loads)."""
        for b, cond in self.plan.hoist_breaks.get(var, ()):
            if any(env.get(v) != q for v, q in cond):
                continue
            lo = j - min(jj, max(W, p) + (MIN_SAMPLES - 1) * p) + 1     # first sampled iteration
            if lo < b <= j:
                return 0
            if b > j:
                Q = min(Q, (b - 1 - j) // p)
        return max(0, Q)

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
    def _dep_accesses(self, it: Iteration):
        st = self._loop_deps.get(id(it.loop))
        if st is None:
            st = []
            for ins, inner in walk(it.body):
                inf = self.plan.info[id(ins)]
                for kind, accs in ((0, inf.reads), (1, inf.writes)):
                    for a in accs:
                        if it.moves(a.coef):
                            st.append((a, kind, inner))
            self._loop_deps[id(it.loop)] = st
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

    def _pre_times(self, deps, env, serial0) -> list:
        """Per loop-dependent access, the latest pre-loop record the iteration in `env` depends on
        (`_ext_time`), taken before the iteration runs: its own writes may later retire those records."""
        inner_vars = {l.var for _, _, inner in deps for l in inner}
        for v in inner_vars:
            env[v] = 0
        out = [self._ext_time(a, kind, inner, env, serial0) for a, kind, inner in deps]
        for v in inner_vars:
            env.pop(v, None)
        return out

    def _safe_chunks(self, it: Iteration, env, p, Q, j, serial0, pre=None):
        """Largest Q' <= Q such that every input produced before the loop, for the iterations
        j-3p+1 .. j+Q'p, follows an arithmetic progression per phase (otherwise the periodic
        extrapolation would miss it). The iterations already simulated use the times they saw
        (`pre`, taken before each ran: a write of the loop that covers a pre-loop record retires it,
        and the times of the records under it would break the progression spuriously)."""
        deps = self._dep_accesses(it)
        if not deps:
            return Q
        pre = pre or {}
        lo_v = max(0, j - (MIN_SAMPLES - 1) * p + 1)
        hi_v = j + Q * p
        limit = hi_v
        saved = {l.var: env.get(l.var) for _, _, inner in deps for l in inner}
        for n, (a, kind, inner) in enumerate(deps):
            for l in inner:
                env[l.var] = 0
            seqs: dict = {}
            for v in range(lo_v, hi_v + 1):
                it.set(env, v)
                t = pre[v][n] if v in pre else self._ext_time(a, kind, inner, env, serial0)
                seqs.setdefault(v % p, []).append((v, t))
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
        it.set(env, j)
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
                    if not _close(seq[k] - seq[k + 1], d0):
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

    def _extrapolate(self, it: Iteration, p, Q, W, snaps, created_per_iter, per_iter, j, forced, first=0):
        loop = it.loop
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
                if r.rot not in per_iter and it.moves(r.coef):
                    # a record that moves with the loop: the skipped iterations' copies come from the
                    # last period's records (an older window record's copies would repeat records of
                    # simulated iterations or of those copies)
                    if i > j - p:
                        moving.append((r, first + i, dt))
                else:
                    r.t += Q * dt
        self._copy_moving(it, moving, p, Q)
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
        n_iv, extra0, n_act = created_per_iter[j - p + 1][1]

        iv = self.dma_iv[n_iv:]
        period = max(0.0, float(np.max(dfull[:created_per_iter[j][2]])))
        self.dma_extra += Q * min(period, union_length(iv) + (self.dma_extra - extra0))
        # engine-active time (schedule.py): the last period's marginal union given the period before it
        # (its tails may reach into the next period), plus what nested extrapolations added
        prev_act = created_per_iter[j - 2 * p + 1][1][2] if j - 2 * p + 1 >= 0 else n_act
        for e, (n0, x0) in n_act.items():
            m0 = prev_act[e][0]
            iv = self.act_iv[e]
            gain = union_length(iv[m0:]) - union_length(iv[m0:n0])
            self.act_extra[e] += Q * min(period, gain + (self.act_extra[e] - x0))
        span = float(np.max(dres)) * Q if len(dres) else 0.0
        self.t_max = max([self.t_max] + [self.free[r] for r in COMPUTE_ENGINES] +
                         [self._qend(q) for q in self.qidx])
        if self.record_events and len(self.events) < MAX_EVENTS:
            self.events.append(Event("steady state", f"{it.name} x{Q * p} extrapolated", self.t_max - span, span,
                                     f"{loop.loc.file.rsplit('/', 1)[-1]}:{loop.loc.line}" if loop.loc else "",
                                     "", {"iterations": Q * p, "period": p, "forced": forced}))
        self.extrapolations.append((it.name, Q * p, p, forced))
        if forced:
            self.approximate = True

    def _copy_moving(self, it: Iteration, moving, p: int, Q: int):
        """The skipped iterations' copies of the records that move with the loop: record r of
        iteration f stands for iterations f + m p, m = 1..Q (as ordinary records while they are few,
        else as range records: one per stretch of the inner loop for a flattened nest)."""
        expand = len(moving) * Q <= EXPAND_RECORDS
        for r, f, dt in moving:
            reg, k = r.home
            if expand and not r.ranges:
                # the skipped iterations' copies, as ordinary records (they stay prunable)
                for m in range(1, Q + 1):
                    s = it.shift(r.coef, f, f + m * p) or (0,) * len(r.lo)
                    lo_m = tuple(a + c for a, c in zip(r.lo, s))
                    hi_m = tuple(a + c for a, c in zip(r.hi, s))
                    home = reg.home_for(lo_m, hi_m)
                    self._add(home[k], Rec(lo_m, hi_m, r.t + m * dt, r.eng, r.coef, (reg, k), r.rot))
            elif len(it.vars) == 1:
                cs = r.coef[it.loop.var]
                r.ranges = r.ranges + ((tuple(c * p for c in cs), Q, dt),)
                self._move_wide(r)      # a range record spans several blocks
            else:
                self._copy_stretches(it, r, f, dt, p, Q)

    def _copy_stretches(self, it: Iteration, r: Rec, f: int, dt: float, p: int, Q: int):
        """Range records for the copies m = 1..Q of r (iteration f) in a flattened nest: one per run
        of copies with the same outer index (within it the box moves by p x the inner coefficient)."""
        reg, k = r.home
        step = tuple(c * p for c in r.coef.get(it.vars[1], (0,) * len(r.lo)))
        m = 1
        while m <= Q:
            o = it.digits(f + m * p)[0]
            n = 1
            while m + n <= Q and it.digits(f + (m + n) * p)[0] == o:
                n += 1
            s = it.shift(r.coef, f, f + m * p) or (0,) * len(r.lo)
            c = Rec(tuple(a + x for a, x in zip(r.lo, s)), tuple(a + x for a, x in zip(r.hi, s)),
                    r.t + m * dt, r.eng, r.coef, (reg, k), r.rot)
            c.ranges = r.ranges + (((step, n - 1, dt),) if n > 1 else ())
            blo, bhi = c.bbox()
            self._add(reg.wide[k] if reg.nb and list(blo[:reg.nb]) != list(bhi[:reg.nb])
                      else reg.home_for(c.lo, c.hi)[k], c)
            m += n

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
