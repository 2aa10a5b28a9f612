"""The LLVM emitter's explicit state: what a rule may read about *how* it is being emitted, and the
per-function state of the function being written.

Contract:
- `LoopEnv(env, names)`: the loop values in scope (name -> i64 SSA value) and their names in
  nesting order (error reports store them). Rules receive it as `ctx`.
- `EmitContext` (immutable): the emission mode. `W` is the vector width (1: scalar values, else
  `<W x T>` vectors along axis variable `vaxis`); `row` is the current partition inside a row-major
  body (rowmajor.py); `capturing` is a list while fusion (fusion.py) collects the rules' value
  functions instead of letting them emit; `fused` maps a fused run's output accesses to their values;
  `in_region` is true while a parallel region's function is written. The emitter changes it only
  with `with em.context(W=..., ...)`, which restores the previous context on exit (exceptions
  included), so no rule flips emitter attributes by hand.
- `Module`: what the generated functions add to the module: helper functions by name, `declare`
  lines, outlined parts (parts.py), error sites with their loop names, whether device_print is
  used, and the enclosing loop names of each dispatched parallel region.
- `Function`: the state of one LLVM function being written (its builder, buffer pointers made in
  its entry block, entry allocas, the status words it loaded). A nested function (a part, parts.py)
  gets a fresh one and the caller's is put back afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoopEnv:
    env: dict
    names: list                                   # env names in order (for error reports)


@dataclass(frozen=True)
class EmitContext:
    W: int = 1
    vaxis: str | None = None
    row: str | None = None
    capturing: list | None = None
    fused: dict | None = None
    in_region: bool = False


@dataclass
class Function:
    b: object                                     # irbuilder.FnBuilder
    private: set                                  # root buffers in the thread's own arena
    pin_mxcsr: bool = False
    ptrs: dict = field(default_factory=dict)      # root buffer -> its pointer (made on first use)
    ptr_lines: list = field(default_factory=list)
    ptr_at: int = 0                               # line of the entry block the pointer lines go to
    allocas: list = field(default_factory=list)
    stop_ptr: str = "false"
    has_stop: str = "false"
    dispatch_word: str = "0"


@dataclass
class Module:
    functions: dict = field(default_factory=dict)     # helper name -> its text (Emitter.use)
    declares: set = field(default_factory=set)
    part_texts: list = field(default_factory=list)    # outlined parts of long bodies (parts.py)
    sites: list = field(default_factory=list)         # traced instruction per error site
    site_names: list = field(default_factory=list)    # per site: loop names stored on error
    needs_print: bool = False
    region_names: dict = field(default_factory=dict)  # region index -> enclosing loop names
