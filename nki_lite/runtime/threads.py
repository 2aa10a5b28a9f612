"""Threads for JIT calls: the process's worker pool, running programs on it interruptibly, and the
dispatcher native code calls at a parallel region.

Contract:
- `pool()` is the process's ThreadPoolExecutor (one thread per core, at least 2, all started), made
  on first use and re-made in a forked child. Native code releases the GIL.
- `available()` is NKI_LITE_NUM_THREADS (0: one per core), read now.
- `on_pool(native, args, jobs, workers=1)` runs (lo, hi, phases, shared, dispatch) jobs on `workers`
  pool threads, each claiming the next unclaimed job in order until none is left (launch_plan's
  chunks), while the calling thread waits interruptibly: the first error sets the shared stop flag
  so the running jobs end at their next program or loop iteration and no job starts after it, and
  is raised (the lowest program's error); Ctrl-C sets the flag too and re-raises. The native code
  checks the flag at every program and loop iteration.
- `Dispatcher(native)` is the `i32 (i64 region, ptr status)` callback of one kernel (abi.py): it runs
  the region's iterations in chunks (launch_plan.region_chunks), claimed in order by the calling
  thread and up to `available() - 1` pool helpers, and returns 0, 1 (the first failing chunk's error copied into the caller's status) or 2
  (stopped: another error or Ctrl-C). No exception ever crosses into native code.
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import TimeoutError as _FutureTimeout

import numpy as np

from .. import config
from ..lower.llvm.abi import STATUS_DISPATCH, STATUS_LOOP_WORDS, STATUS_LOOPS, STATUS_PRIVATE_ARENA
from ..lower.llvm.abi import STATUS_PROG_HI, STATUS_PROG_LO, STATUS_REGION_ARENA, STATUS_REGION_ARGS
from ..lower.llvm.abi import STATUS_REGION_ENV, STATUS_STOP
from ..lower.llvm.launch_plan import region_chunks

DISPATCH_CB = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p)
ERROR_WORDS = STATUS_LOOPS + STATUS_LOOP_WORDS          # what a failing region chunk reports
CPUS = os.cpu_count() or 1                              # os.cpu_count() costs microseconds: read once

_POOL = None
_POOL_LOCK = threading.Lock()


def threads_for(knob: int) -> int:
    """Threads an NKI_LITE_NUM_THREADS value allows (0: one per core)."""
    return knob if knob > 0 else CPUS


def available() -> int:
    return threads_for(config.get("NKI_LITE_NUM_THREADS"))


def pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor
            n = max(2, CPUS)
            p = ThreadPoolExecutor(max_workers=n, thread_name_prefix="nki_lite")
            # start every thread now: the executor creates threads lazily and counts a busy one as
            # idle after its first task, so work submitted from inside a running task (a parallel
            # region's helpers, dispatched by a kernel already on the pool) could find no thread
            everyone = threading.Barrier(n, timeout=10)
            for f in [p.submit(everyone.wait) for _ in range(n)]:
                try:
                    f.result()
                except threading.BrokenBarrierError:     # threads slow to start: they start lazily
                    pass
            _POOL = p
        return _POOL


def _reset_pool_after_fork() -> None:
    global _POOL, _POOL_LOCK
    _POOL = None
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_after_fork)


def on_pool(native, args, jobs: list, workers: int = 1) -> None:
    stop = np.zeros(1, dtype=np.int64)
    claim = iter(range(len(jobs)))
    lock = threading.Lock()

    def work():
        failed = []
        while not stop[0]:
            with lock:
                t = next(claim, None)
            if t is None:
                break
            lo, hi, phases, shared, dispatch = jobs[t]
            rc, st = native.run(args, lo, hi, stop.ctypes.data, phases, shared, dispatch)
            if rc == 1:
                stop[0] = 1
                failed.append((lo, st.copy()))
        return failed
    futures = [pool().submit(work) for _ in range(max(1, min(workers, len(jobs))))]
    results = []
    try:
        for f in futures:
            while True:
                try:
                    results.extend(f.result(timeout=0.2))
                    break
                except _FutureTimeout:
                    continue
    except KeyboardInterrupt:
        stop[0] = 1
        for f in futures:
            f.exception()
        raise
    if results:
        raise native.error(min(results, key=lambda r: r[0])[1])


class Dispatcher:
    """The region dispatcher of one kernel; `address` is what native code calls (0: no regions)."""

    def __init__(self, native):
        self.native = native
        self._cb = DISPATCH_CB(self._dispatch) if any(native.regions) else None
        self.address = ctypes.cast(self._cb, ctypes.c_void_p).value if self._cb else 0

    def _dispatch(self, region: int, status_addr: int) -> int:
        try:
            return self._run_region(region, status_addr)
        except BaseException:                            # never let an exception cross the C boundary
            return 2

    def _run_region(self, region: int, status_addr: int) -> int:
        native = self.native
        main = np.ctypeslib.as_array((ctypes.c_int64 * native.plan.status_words).from_address(status_addr))
        trip, fn = native.plan.region_trips[region], native.regions[region]
        env = main[STATUS_REGION_ENV:STATUS_REGION_ENV + 8].copy()
        args, shared, stop_addr = int(main[STATUS_REGION_ARGS]), int(main[STATUS_REGION_ARENA]), int(main[STATUS_STOP])
        stop = None
        if stop_addr == 0:
            stop = np.zeros(1, dtype=np.int64)
            stop_addr = stop.ctypes.data
        flag = np.ctypeslib.as_array((ctypes.c_int64 * 1).from_address(stop_addr))
        threads = available()
        bounds = region_chunks(trip, threads)
        results: list = [None] * len(bounds)
        claim = iter(range(len(bounds)))
        lock = threading.Lock()

        def participant():                               # chunks are claimed: an unstarted helper is cancelled
            while not flag[0]:                           # after an error or Ctrl-C no chunk starts
                with lock:
                    t = next(claim, None)
                if t is None:
                    return
                arena, st = native.region_scratch()
                st[STATUS_PROG_LO], st[STATUS_PROG_HI] = bounds[t]
                st[STATUS_STOP], st[STATUS_PRIVATE_ARENA], st[STATUS_DISPATCH] = stop_addr, arena.ctypes.data, 0
                st[STATUS_REGION_ENV:STATUS_REGION_ENV + 8] = env
                rc = fn(args, shared, st.ctypes.data, None)
                if rc:
                    if rc == 1:
                        flag[0] = 1
                    results[t] = (rc, st.copy())
        helpers = [pool().submit(participant) for _ in range(min(threads, len(bounds)) - 1)]
        try:
            participant()
        except KeyboardInterrupt:                        # Ctrl-C between chunks: stop the helpers
            flag[0] = 1
        for h in helpers:                                # running helpers end at their next iteration
            while not h.cancel():
                try:
                    h.result()
                    break
                except KeyboardInterrupt:
                    flag[0] = 1
        failed = [r for r in results if r is not None and r[0] == 1]
        if failed:
            main[:ERROR_WORDS] = failed[0][1][:ERROR_WORDS]
            return 1
        return 2 if any(r is not None for r in results) or flag[0] else 0
