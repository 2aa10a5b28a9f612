"""The registry of NKI_LITE_* knobs, read at call time (never cached at import).

Contract: `get(name)` reads the environment now and parses the value by the knob's declared type;
unknown or malformed values raise ArgumentError naming the knob and its allowed values.
`KNOBS` is the single table the docs list (docs/configuration.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    choices: tuple[str, ...] | None
    doc: str
    parse: Callable[[str], object] = str


def _bool(v: str) -> bool:
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(v)


def _seed(v: str) -> str:
    return v if v == "" else str(int(v))


KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("NKI_LITE_MODE", "auto", ("auto", "interpret", "jit"),
         "backend used when a kernel does not pass mode=: auto picks the best available (today: interpret)"),
    Knob("NKI_LITE_TARGET", "", ("", "trn1", "trn2", "trn3"),
         "default target when neither the kernel nor NEURON_PLATFORM_TARGET_OVERRIDE chooses one (trn2)"),
    Knob("NEURON_PLATFORM_TARGET_OVERRIDE", "", ("", "trn1", "inf2", "gen2", "trn2", "gen3", "trn3", "gen4"),
         "NKI's own target override, honoured as in NKI"),
    Knob("NKI_LITE_TRACE_CACHE_SIZE", "256", None, "traced kernels kept per kernel (LRU)", int),
    Knob("NKI_LITE_JIT_CACHE_SIZE", "128", None, "compiled kernels kept per process (LRU; evicted code is freed)",
         int),
    Knob("NKI_LITE_JIT_OPT", "2", ("0", "1", "2", "3"),
         "LLVM optimisation level of JIT code (results are identical at every level; 2 balances compile time "
         "and speed)", int),
    Knob("NKI_LITE_NUM_THREADS", "0", None,
         "threads for SPMD programs proven independent (0: one per core); results are identical for every count",
         int),
    Knob("NKI_LITE_DEBUG", "0", None, "JIT debug mode: fill new tiles with NaN like the interpreter", _bool),
    Knob("NKI_LITE_DEBUG_NANS", "0", None, "raise NL-E903 at the first instruction that creates a NaN from non-NaN "
         "inputs (JIT calls then run in the interpreter; docs/debugging.md)", _bool),
    Knob("NKI_LITE_DEBUG_UNINIT", "0", None, "raise NL-E902 when a value computed from never-written memory "
         "reaches a kernel output (interpreter; JIT calls then run there; docs/debugging.md)", _bool),
    Knob("NKI_LITE_SHUFFLE", "", None, "an integer seed: run affine_range iterations and SPMD programs in a seeded "
         "random order and raise NL-E601/NL-E602 on cross-iteration races (interpreter; JIT calls then run there)",
         _seed),
    Knob("NKI_LITE_DISK_CACHE", "1", None, "keep JIT object code in the per-user disk cache so later processes "
         "skip LLVM (0 disables; see docs/jit_cache.md)", _bool),
    Knob("NKI_LITE_CACHE_DIR", "", None, "directory of the disk cache (default: $XDG_CACHE_HOME/nki_lite or "
         "~/.cache/nki_lite); created 0700, refused if group/world-writable or owned by another user"),
    Knob("NKI_LITE_CACHE_MAX_MB", "512", None, "size bound of the disk cache directory: the least recently "
         "used entries are deleted beyond it (0: unbounded)", int),
    Knob("NKI_LITE_MAX_ALLOC_BYTES", "0", None, "largest host allocation (bytes) of one tensor, tile or JIT arena; "
         "beyond it a kernel fails with NL-E403 at the line that creates the tensor (0: 3/4 of physical memory)",
         int),

    Knob("NKI_LITE_STRICT_CAPACITY", "0", None, "SBUF/PSUM over capacity is an error (NL-E401/402) instead of a "
         "CapacityWarning (NL-W401) for automatically allocated kernels", _bool),
    Knob("NKI_LITE_PROGRESS", "auto", ("auto", "plain", "off"),
         "progress bars of long work (nki-lite check/bench, autotune sweeps) on stderr: auto uses tqdm when "
         "installed, else a plain counter; plain always the counter; off none"),
    Knob("NKI_LITE_AUTOTUNE_WORKERS", "0", None, "processes an autotune sweep of many configs uses (0: one per "
         "core, 1: in this process)", int),
    Knob("NKI_LITE_SLOW_TESTS", "0", None, "run the slow exhaustive/property test profile", _bool),
    Knob("NKI_LITE_LOG_LEVEL", "", ("", "DEBUG", "INFO", "WARNING", "ERROR"),
         "level of the 'nki_lite' logger if set (otherwise the application's logging config applies)"),
]}

_TARGET_ALIASES = {"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


def get(name: str):
    from . import errors
    knob = KNOBS[name]
    raw = os.environ.get(name, knob.default)
    if knob.choices is not None and raw not in knob.choices:
        raise errors.make("argument", f"environment variable {name}={raw!r} is not one of {knob.choices}")
    try:
        return knob.parse(raw)
    except ValueError:
        raise errors.make("argument", f"environment variable {name}={raw!r} is malformed") from None


def default_target() -> str:
    t = get("NEURON_PLATFORM_TARGET_OVERRIDE") or get("NKI_LITE_TARGET") or "trn2"
    return _TARGET_ALIASES.get(t, t)


def render_docs() -> str:
    lines = ["# Configuration knobs", "", "Read at call time; generated from `nki_lite/config.py`.", "",
             "| variable | default | values | meaning |", "|---|---|---|---|"]
    for k in KNOBS.values():
        vals = ", ".join(c or "(unset)" for c in k.choices) if k.choices else "see meaning"
        lines.append(f"| `{k.name}` | `{k.default}` | {vals} | {k.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_docs())
