"""Loops and SPMD ids: nl.affine_range / sequential_range / static_range, program_id & co.

Contract: `affine_range` and `sequential_range` yield ONE symbolic loop variable and record the
body as an `ir.Loop` (the IR size does not depend on the trip count). A loop marked `.python_loop()`
(the current dialect's ranges, nki/language.py) has Python semantics: where Python needs its variable's
value (`if i:`, `int(i)`, `range(i)`, a bound of an inner loop) the loop is traced unrolled
(lang/index.py `unroll_python_loops`). `static_range` and Python's
`range` unroll at trace time. `program_id(axis)` is a symbolic index over the launch grid;
`num_programs` and `program_ndim` are trace-time ints.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core.affine import Affine
from .api import api
from .index import Index, unroll_python_loops
from .tracer import current, user_text


def _bounds(args, name: str, loc) -> tuple[int, int, int]:
    if not 1 <= len(args) <= 3:
        raise errors.make("bad_loop", f"{name} takes (stop), (start, stop) or (start, stop, step)", loc=loc)
    for a in args:
        if isinstance(a, Index):
            unroll_python_loops(a.expr.vars(), errors.make(
                "bad_loop", f"{name} bounds must be Python ints known at trace time, got the symbolic "
                f"`{user_text(a.expr)}`", loc=loc))
            raise errors.make("bad_loop", f"{name} bounds must be Python ints known at trace time, got the symbolic "
                              f"`{user_text(a.expr)}`", loc=loc, hint="loop bounds cannot depend on other loop variables")
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise errors.make("bad_loop", f"{name} bounds must be Python ints, got {a!r}", loc=loc)
    r = range(*[int(a) for a in args])
    if r.step == 0:
        raise errors.make("bad_loop", f"{name} step must be nonzero", loc=loc)
    return r.start, r.step, len(r)


def _symbolic_range(args, kind: str, name: str, python: bool):
    loc = capture_loc(3)
    tr = current()
    start, step, trip = _bounds(args, name, loc)
    if (loc.file, loc.line) in tr.unroll_locs:        # a loop whose variable steers Python control flow
        for v in range(trip):
            yield start + step * v
        return
    var = tr.open_loop(trip, kind, start, step, loc)
    if python:
        tr.python_loops.add(var)
    finished = False
    try:
        yield Index(Affine.make(start, {var: step}))
        finished = True
    finally:
        if finished or _returning_from_body(loc):
            tr.close_loop(var)
        else:
            # break, return or an exception inside the body: the loop cannot be represented
            tr.broken_loop = loc
            try:
                tr.close_loop(var)
            except Exception:  # the trace is already failing; keep the original error
                pass


def _returning_from_body(loop_loc) -> bool:
    """The loop body executes `return` (NKI traces the body once; a kernel whose body ends in
    `return out` — as two documented legacy examples do — is traced as the loop, then the return).
    Told from break/continue/exceptions by the statement the kernel's frame is executing."""
    import linecache
    import sys
    if sys.exc_info()[0] not in (None, GeneratorExit):
        return False
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename != loop_loc.file:
        f = f.f_back
    if f is None:
        return False
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return line == "return" or line.startswith(("return ", "return(")) and f.f_lineno > loop_loc.line


class _Range:
    def __init__(self, args, kind, name):
        self.args, self.kind, self.name = args, kind, name
        self.python = False

    def python_loop(self) -> "_Range":
        """Give the loop Python semantics (the current dialect: NKI's ranges are aliases of range())."""
        self.python = True
        return self

    def __iter__(self):
        return _symbolic_range(self.args, self.kind, self.name, self.python)

    def __len__(self):
        return len(range(*self.args))


@api("nl.affine_range", ignored=("precise_schedule", "directives"))
def affine_range(*args):
    """Parallel loop (iterations independent except PSUM += accumulation); stays a loop in the IR."""
    return _Range(args, "affine", "nl.affine_range")


@api("nl.sequential_range", ignored=("precise_schedule", "directives"))
def sequential_range(*args):
    """Loop with a carried dependency allowed; stays a loop in the IR, runs in order."""
    return _Range(args, "sequential", "nl.sequential_range")


@api("nl.static_range")
def static_range(*args):
    """Unrolled at trace time (like Python's range)."""
    _bounds(args, "nl.static_range", capture_loc(2))
    return range(*[int(a) for a in args])


@api("nl.program_id")
def program_id(axis: int = 0) -> "Index | int":
    tr = current()
    from .isa_lnc import current_core          # issue #14: a per-core trace of an LNC=2 launch
    if current_core() is not None and axis == 0:
        return current_core()[0]     # the core id is a Python int of this core's trace (shapes, patterns, ds sizes)
    if not 0 <= axis < max(1, len(tr.grid)):
        raise errors.make("argument", f"program_id({axis}) outside a launch grid of rank {len(tr.grid)}",
                          loc=capture_loc(2))
    if not tr.grid or tr.grid[axis] == 1:
        # one program along this axis (a kernel launched as kernel[1]): its id is the int 0, so Python
        # control flow on it (the NKI Library's `if prg_id > 0:` sharding branches) is decided at trace time
        return 0
    return Index(Affine.var(f"pid{axis}"))


@api("nl.num_programs")
def num_programs(axes=None) -> int:
    tr = current()
    grid = tr.grid or (1,)
    from .isa_lnc import current_core          # issue #14: a per-core trace sees both cores
    if current_core() is not None:
        grid = (current_core()[1],)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, (tuple, list)):
        return int(np.prod([grid[a] for a in axes]))
    return int(grid[axes]) if axes < len(grid) else 1


@api("nl.program_ndim")
def program_ndim() -> int:
    from .isa_lnc import current_core          # issue #14: a per-core trace is on a 1-D launch of n cores
    if current_core() is not None:
        return 1
    return len(current().grid)


@api("nl.nc")
class nc:  # noqa: N801 - NKI's spelling
    """nl.nc(n): a launch-grid dimension spread over n physical NeuronCores (runs serially here)."""

    def __init__(self, n: int):
        self.size = int(n)

    def __mul__(self, k: int) -> "spmd_dim":
        return spmd_dim(self, k)

    __rmul__ = __mul__


@api("nl.spmd_dim")
class spmd_dim:  # noqa: N801
    """nl.spmd_dim(a, b): a grid dimension of size a*b (sharding annotations do not change results)."""

    def __init__(self, *dims):
        self.dims = dims
        self.size = int(np.prod([getattr(d, "size", d) for d in dims]))
