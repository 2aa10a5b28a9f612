"""Per-case budgets and records for a corpus sweep (tools/checkdir.py, tools/corpus_plugin.py).

Contract:
- `deadline(seconds)`: a context manager that raises CaseTimeout inside its block once the block has run
  `seconds` of wall-clock time (None or <= 0: no limit). It uses SIGALRM, so it only arms in the main thread
  of a process that has SIGALRM (elsewhere it is a no-op), and the exception is delivered when the
  interpreter next runs Python bytecode: one long native call (a JIT'd kernel, a numpy op) finishes first.
  A previous alarm handler and timer are restored on exit.
- `record_warnings()`: a context manager yielding a list that receives one "Category: first line" string
  per distinct warning emitted in the block (every warning is recorded, whatever the process's filters;
  the filters are restored on exit). The sweep's false-positive audit is built from these lists.
- `excluded(table, label, name, mode)`: the reason a case is left out of a sweep, or None. `table` holds
  Exclusion rows; a row matches when its `label` equals the source label, its `pattern` (a regular
  expression) is found in the case name (re.search) and `mode` is in its `modes` (empty: every mode).
"""
from __future__ import annotations

import contextlib
import re
import signal
import threading
import warnings
from dataclasses import dataclass, field
from typing import Iterator


class CaseTimeout(Exception):
    """A corpus case ran past its wall-clock budget (reported as a FAIL with this message)."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    usable = bool(seconds and seconds > 0) and hasattr(signal, "SIGALRM") \
        and threading.current_thread() is threading.main_thread()
    if not usable or seconds is None:
        yield
        return

    def fire(signum, frame):
        raise CaseTimeout(f"over the per-case budget of {seconds:g} s wall clock (stopped)")

    old = signal.signal(signal.SIGALRM, fire)
    old_timer = signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_timer[0] > 0:                 # an outer timer keeps its remaining time
            signal.setitimer(signal.ITIMER_REAL, *old_timer)


def warning_line(w: warnings.WarningMessage) -> str:
    text = (str(w.message).splitlines() or [""])[0].strip()
    return f"{w.category.__name__}: {text[:240]}"


@contextlib.contextmanager
def record_warnings() -> Iterator[list[str]]:
    out: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")      # a filter set to "ignore" or "once" would hide a false positive
        try:
            yield out
        finally:
            for w in caught:
                line = warning_line(w)
                if line not in out:
                    out.append(line)


@dataclass(frozen=True)
class Exclusion:
    label: str                  # the source, e.g. "samples-test"
    pattern: str                # a regular expression searched in the case name (pytest node id or check name)
    reason: str                 # printed in the sweep's summary: why the case cannot run here
    modes: tuple[str, ...] = field(default=())


def excluded(table, label: str, name: str, mode: str) -> str | None:
    for row in table or ():
        if row.label == label and re.search(row.pattern, name) and (not row.modes or mode in row.modes):
            return row.reason
    return None
