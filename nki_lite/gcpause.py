"""`paused()`: a context manager that holds Python's cyclic garbage collector off while nki_lite builds
a large acyclic structure (tracing a kernel, generating its LLVM IR).

Why: an unrolled kernel of 10^5 instructions creates millions of small objects; every collection of
the oldest generation walks all of them, which made tracing superlinear (10^4 ops: 3.8 s with the
collector, 2.0 s without). The IR holds no reference cycles, so nothing is lost: memory is freed by
reference counting as usual, and cycles made meanwhile are collected once the collector runs again.
Nesting and threads: the collector is re-enabled only by the outermost holder, and only if it was
enabled when that holder started.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_LOCK = threading.Lock()
_DEPTH = 0
_WAS_ENABLED = False


@contextlib.contextmanager
def paused():
    global _DEPTH, _WAS_ENABLED
    with _LOCK:
        if _DEPTH == 0:
            _WAS_ENABLED = gc.isenabled()
            gc.disable()
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0 and _WAS_ENABLED:
                gc.enable()
