"""The analysis layer: facts about one traced kernel, each computed once and shared by every reader.

Contract: `of(kernel)` is the kernel's `KernelAnalysis`, made on first use and cached on the
`ir.Kernel` itself (a kernel is an immutable value, so a fact about it never goes stale; the cache
lives and dies with the kernel object, like `Kernel.buffer_map`). Each fact is a lazily computed
attribute, so a reader pays only for what it asks:
- `program`: every instruction as a `Site` with its loops and position (program.py) — read by the
  verifier (verify_common.Ctx), the capacity footprints and the dependence/coverage analyses;
- `root(name)` / `flat(acc)`: root buffers and flat indexing (accesses.py) — verifier, parallel
  planner, cost schedule, liveness;
- `fully_written(name)`: an output provably written everywhere (coverage.py) — the JIT's pre-fill;
- `programs_independent` / `program_space`: SPMD programs that may run on threads (dependence.py,
  decided by lower/parallel.py) — the JIT;
- `liveness`: live ranges of on-chip tiles in program order (liveness.py) — the interpreter's
  freeing; the JIT's arena asks `liveness_for(units)` with its own schedule units.
The range solver (ranges.py) is a pure library the analyses and verifier rules call.
"""
from __future__ import annotations

import functools

from ...core.ir import Access, Buffer, Kernel
from .accesses import access_flat_index, root_of

_KEY = "_nki_lite_analysis"


class KernelAnalysis:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self._coverage: dict[str, bool] = {}

    @functools.cached_property
    def program(self):
        from .program import Program
        return Program.build(self.kernel)

    def root(self, name: str) -> Buffer:
        return root_of(self.kernel.buffer_map, name)

    def flat(self, acc: Access):
        return access_flat_index(self.kernel.buffer_map, acc)

    def fully_written(self, name: str) -> bool:
        if name not in self._coverage:
            from .coverage import fully_written
            self._coverage[name] = fully_written(self.kernel, name)
        return self._coverage[name]

    @functools.cached_property
    def program_space(self):
        from .dependence import program_space
        return program_space(self.kernel)

    @functools.cached_property
    def programs_independent(self) -> bool:
        from .dependence import programs_independent
        return programs_independent(self.kernel)

    @functools.cached_property
    def liveness(self):
        from .liveness import live_ranges
        return live_ranges(self.kernel)


def of(kernel: Kernel) -> KernelAnalysis:
    """The kernel's analyses (cached on the kernel object; `Kernel` is a frozen dataclass, so the
    cache is kept in its instance dict the way functools.cached_property keeps `buffer_map`)."""
    a = kernel.__dict__.get(_KEY)
    if a is None:
        a = KernelAnalysis(kernel)
        kernel.__dict__[_KEY] = a
    return a
