"""The pass pipeline: every Kernel -> Kernel rewrite, in the one order they run.

Contract:
- `PIPELINE` lists the passes in order; each `Pass` names the backends it applies to ("interpret",
  "cost", "llvm"). Passes for every backend come first (checked below): they run once per trace,
  before verification, and their result is what the trace cache holds and every backend sees.
  The backend-specific passes that follow run after verification, on the verified kernel.
- `run_shared(kernel)`: the passes for every backend (the runtime's `Kernel._traced`).
- `run_backend(kernel, backend) -> (kernel, origin)`: the passes specific to `backend`, in order
  (lower/llvm/codegen.py for "llvm"; runtime/interpreter.py through `prepared` for "interpret"); `origin` maps id(rewritten instruction) to the traced one, so
  run-time errors and disk-cache entries name the instruction the user wrote (origin.py).
- `run_through(kernel, name)`: a freshly traced kernel after the passes up to and including `name`
  that apply to the backends of `name` — what `kernel.inspect_ir(..., after=name)` shows. An unknown
  name is an `argument` error listing the pass names.
- Every pass keeps every result bit and every error report of every backend it applies to (the
  interpreter and the engine model see no JIT-only pass; tests compare before and after).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ... import errors
from ...core.ir import Kernel
from .accumulation_start import start_accumulation_groups
from .compact_blocks import compact_blocks
from .drop_empty import drop_empty
from .fold_copies import fold_copies
from .forward_loads import forward_loads
from .true_masks import drop_true_masks

BACKENDS = frozenset({"interpret", "cost", "llvm"})


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Kernel, dict], Kernel]      # (kernel, origin) -> kernel; records replaced instructions
    backends: frozenset
    doc: str

    @property
    def shared(self) -> bool:
        return self.backends == BACKENDS


def _untracked(fn) -> Callable[[Kernel, dict], Kernel]:
    """A pass that runs before verification: what it rewrites is what the user's trace is."""
    return lambda kernel, origin: fn(kernel)


PIPELINE: tuple[Pass, ...] = (
    Pass("drop-empty", _untracked(drop_empty), BACKENDS,
         "instructions that write nothing disappear; a non-empty result from an empty operand is an error"),
    Pass("fold-copies", _untracked(fold_copies), BACKENDS,
         "`tmp = op(...); view[...] = tmp` becomes `view[...] = op(...)`"),
    Pass("accumulation-start", _untracked(start_accumulation_groups), BACKENDS,
         "a fresh PSUM tile first written by an accumulating matmul starts at zero (the group's first matmul overwrites)"),
    Pass("compact-blocks", compact_blocks, frozenset({"interpret", "llvm"}),
         "a block tensor whose blocks each belong to one loop iteration holds only that iteration's blocks"),
    Pass("drop-true-masks", drop_true_masks, frozenset({"llvm"}),
         "masks that hold over the whole iteration space are removed"),
    Pass("forward-loads", forward_loads, frozenset({"llvm"}),
         "reads of an exact on-chip copy of an HBM view read the view itself"),
)
NAMES = tuple(p.name for p in PIPELINE)

_first_specific = next((k for k, p in enumerate(PIPELINE) if not p.shared), len(PIPELINE))
assert all(not p.shared for p in PIPELINE[_first_specific:]), "shared passes must precede backend passes"
assert all(p.backends <= BACKENDS for p in PIPELINE)


def run_shared(kernel: Kernel) -> Kernel:
    origin: dict = {}
    for p in PIPELINE[:_first_specific]:
        kernel = p.run(kernel, origin)
    return kernel


def prepared(kernel: Kernel, backend: str) -> Kernel:
    """`run_backend(kernel, backend)[0]`, made once per kernel object (the interpreter's calls)."""
    cache = kernel.__dict__.setdefault("_nki_lite_prepared", {})
    if backend not in cache:
        cache[backend] = run_backend(kernel, backend)[0]
    return cache[backend]


def run_backend(kernel: Kernel, backend: str) -> tuple[Kernel, dict]:
    origin: dict = {}
    for p in PIPELINE[_first_specific:]:
        if backend in p.backends:
            kernel = p.run(kernel, origin)
    return kernel, origin


def find(name: str, loc=None) -> Pass:
    for p in PIPELINE:
        if p.name == name:
            return p
    raise errors.make("argument", f"unknown pass {name!r} for inspect_ir(after=...)", loc=loc,
                      hint="the passes, in order: " + ", ".join(NAMES))


def run_through(kernel: Kernel, name: str, loc=None) -> Kernel:
    last = find(name, loc)
    origin: dict = {}
    for p in PIPELINE:
        if last.backends <= p.backends:
            kernel = p.run(kernel, origin)
        if p is last:
            return kernel
    raise AssertionError(name)
