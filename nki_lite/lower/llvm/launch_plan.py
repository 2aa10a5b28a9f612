"""The launch plan: what the runtime needs to call a generated kernel, decided where codegen decides it.

Contract:
- `build(kernel, debug, ...)` is called by `codegen.generate` with the facts the emitter produced
  (argument order, arena size, regions it reached, error sites) and adds the ones codegen's
  analyses decide (lower/analysis: program space and independence, outputs
  fully written, the work estimate): one frozen `LaunchPlan`. The runtime executes it and never
  re-derives any of it from the IR.
- `plan.threads(available)` is how many threads the programs run on, `plan.program_chunks(t)` /
  `region_chunks(trip, t)` the contiguous ranges that `t` threads claim one at a time (row-major
  linear program ids or region iterations; up to CHUNKS_PER_THREAD per thread, in order; results
  are identical for every split, lower/parallel.py).
- `plan.to_json(kernel)` / `LaunchPlan.from_json(meta, kernel)` carry a plan through the disk
  cache (error sites as indices into `ir.walk` order); `lower/llvm/plan_check.py` says whether a
  stored plan can belong to a kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core import ir
from .. import analysis
from .abi import STATUS_LOOPS, STATUS_WORDS

# A call doing more element-steps than this (~10 ms of simple elementwise work on one core) runs on
# a pool thread while the calling thread waits interruptibly, so Ctrl-C can stop it.
LONG_RUNNING_ELEMENTS = 1 << 24

# Chunks per thread of a parallel launch or region. One chunk per thread makes the call as slow as
# its slowest thread: on the 2-core machine the half that follows the rows the previous call left in
# L3 ran 15-50% faster than the other, and a thread preempted or woken late for a few ms stalled the
# whole call. Threads claim chunks as they finish, so the early and fast ones take the late one's
# share; a chunk costs one native call (microseconds), far below a chunk of these kernels.
CHUNKS_PER_THREAD = 4


@dataclass(frozen=True)
class LaunchPlan:
    kernel: str                                 # the kernel's name (messages)
    arg_buffers: tuple[str, ...]                # the native `args` pointers, in order
    arena_bytes: int                            # the per-thread arena (tiles, scratch)
    n_programs: int                             # phase-2 programs: SPMD instances or loop iterations
    parallel: bool                              # programs may run on threads without changing a bit
    long_running: bool                          # > LONG_RUNNING_ELEMENTS: interruptible call
    region_trips: tuple[int, ...]               # per region k (@nkl_region_<k>): trip count, 0 = unused
    prefill: frozenset[str]                     # outputs NaN-filled before a launch
    needs_print: bool                           # device_print: the print callback is passed
    sites: tuple[ir.Instr, ...]                 # instruction of each error / print site
    loop_names: tuple[tuple[str, ...], ...]     # per site: names of the loop values stored on error
    status_words: int = STATUS_WORDS
    status_loops: int = STATUS_LOOPS

    def threads(self, available: int) -> int:
        """Threads the programs run on when `available` may be used (1: serially, on the caller)."""
        if not self.parallel or self.n_programs <= 1:
            return 1
        return max(1, min(self.n_programs, available))

    def program_chunks(self, threads: int) -> list[tuple[int, int]]:
        return _claimed(self.n_programs, threads)

    def to_json(self, kernel: ir.Kernel) -> dict | None:
        """JSON-able form (None if a site is not an instruction of `kernel`: unusable as an entry)."""
        instrs = [i for i, _ in ir.walk(kernel.body)]
        by_id = {id(x): k for k, x in enumerate(instrs)}
        sites = []
        for s in self.sites:
            k = by_id.get(id(s))
            if k is None:
                try:
                    k = instrs.index(s)          # an equal instruction prints and reports identically
                except ValueError:
                    return None
            sites.append(k)
        return {"kernel": self.kernel, "n_instrs": len(instrs), "arg_buffers": list(self.arg_buffers),
                "arena_bytes": int(self.arena_bytes), "n_programs": int(self.n_programs),
                "parallel": bool(self.parallel), "long_running": bool(self.long_running),
                "region_trips": [int(t) for t in self.region_trips], "prefill": sorted(self.prefill),
                "needs_print": bool(self.needs_print), "sites": sites,
                "loop_names": [list(n) for n in self.loop_names],
                "status_words": self.status_words, "status_loops": self.status_loops}

    @classmethod
    def from_json(cls, meta: dict, kernel: ir.Kernel) -> "LaunchPlan":
        """The plan of a disk-cache entry whose metadata plan_check.problem accepted."""
        instrs = [i for i, _ in ir.walk(kernel.body)]
        return cls(meta["kernel"], tuple(meta["arg_buffers"]), int(meta["arena_bytes"]), int(meta["n_programs"]),
                   bool(meta["parallel"]), bool(meta["long_running"]), tuple(meta["region_trips"]),
                   frozenset(meta["prefill"]), bool(meta["needs_print"]),
                   tuple(instrs[k] for k in meta["sites"]), tuple(tuple(n) for n in meta["loop_names"]),
                   int(meta["status_words"]), int(meta["status_loops"]))


def region_chunks(trip: int, threads: int) -> list[tuple[int, int]]:
    """Iteration ranges of one run of a parallel region, claimed by at most `threads` threads (one
    range when `threads` is 1: the loop then runs in one call)."""
    return _claimed(trip, threads)


def _claimed(n: int, threads: int) -> list[tuple[int, int]]:
    """`n` units in up to CHUNKS_PER_THREAD chunks per thread (one chunk for one thread)."""
    return _chunks(n, max(1, min(n, threads * CHUNKS_PER_THREAD if threads > 1 else 1)))


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    return [(n * t // parts, n * (t + 1) // parts) for t in range(parts)]


def build(kernel: ir.Kernel, debug: bool, gen) -> LaunchPlan:
    """The plan for `kernel` as traced (before codegen's JIT-only rewrites), with the facts the
    emitter produced (`gen`: codegen's Generated — arg_buffers, arena_bytes, region_trips,
    needs_print, sites, loop_names)."""
    facts = analysis.of(kernel)
    n_programs = int(np.prod(facts.program_space[1] or (1,)))
    parallel = not gen.needs_print and facts.programs_independent
    prefill = frozenset(n for n in kernel.outputs if debug or not facts.fully_written(n))
    return LaunchPlan(kernel.name, tuple(gen.arg_buffers), int(gen.arena_bytes), n_programs, parallel,
                      work(kernel) > LONG_RUNNING_ELEMENTS, tuple(gen.region_trips), prefill,
                      bool(gen.needs_print), tuple(gen.sites), tuple(gen.loop_names))


def work(kernel: ir.Kernel) -> int:
    """Element-steps of one call: output elements of every instruction times its loop trips and the
    grid (M*N*K for matmuls)."""
    grid = int(np.prod(kernel.grid or (1,)))
    total = 0
    for instr, loops in ir.walk(kernel.body):
        if instr.op == "alloc" or not instr.outs:
            continue
        n = int(np.prod(instr.out.shape))
        if instr.op == "nc_matmul" and isinstance(instr.ins[0], ir.Access):
            n *= instr.ins[0].shape[0]
        total += n * grid * int(np.prod([lp.trip for lp in loops] or [1]))
    return total
