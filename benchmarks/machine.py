"""What every benchmark shares: `interleaved` timing, and the header every table carries: CPU model, the BLAS numpy uses (library, version, core
type as threadpoolctl reports it), thread counts, and whether the OPENBLAS_* overrides are set.

Benchmarks compare with numpy as users have it: run them with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
unset (`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/...`); `header()` says so
when either is set, because they slow numpy's BLAS on some processors.
"""
from __future__ import annotations

import os
import platform
import statistics
import time


def interleaved(fa, fb, reps: int):
    """Medians of `reps` interleaved timings (fa, fb, fa, fb, ...) after one warm-up call of each."""
    fa(), fb()
    ta, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fa()
        t1 = time.perf_counter()
        fb()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return statistics.median(ta), statistics.median(tb)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_lines() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["BLAS: unknown (threadpoolctl not installed; `make bench` installs it)"]
    out = []
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            out.append(f"BLAS: {lib.get('internal_api')} {lib.get('version')} core type "
                       f"{lib.get('architecture', '?')}, {lib.get('num_threads')} threads ({lib.get('filepath')})")
    return out or ["BLAS: none found by threadpoolctl"]


def header(title: str) -> str:
    import numpy as np
    lines = [f"== {title}", f"CPU: {cpu_model()} ({os.cpu_count()} logical cores), numpy {np.__version__}"]
    lines += blas_lines()
    overrides = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if overrides:
        lines.append(f"WARNING: {overrides} set: numpy's BLAS is not running as users have it; rerun with "
                     "`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...`")
    else:
        lines.append("OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: unset (numpy's BLAS on its native kernel)")
    return "\n".join(lines)
