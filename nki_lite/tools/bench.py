"""`nki-lite bench`: the stdlib against numpy on this machine, as a table (never asserts).

Contract: `cases(size)` builds (name, nki_lite call, numpy call) for matmul, matmul_fp8, softmax,
rmsnorm, layernorm and attention at `size` "quick" (seconds) or "full" (the shapes of
benchmarks/stdlib.py's main table); `run(size, reps)` times each pair interleaved (one warm-up call
each, which compiles, then the median of `reps` alternating calls, each after `settle_seconds`
of untimed calls) with a progress bar and returns
the table text; ratio = numpy time / nki_lite time (> 1: nki_lite is faster). Threads are what the
process has (NKI_LITE_NUM_THREADS, numpy's BLAS defaults). benchmarks/stdlib.py is the longer
one- and all-thread study with FMA-peak checks.
"""
from __future__ import annotations

import os
import statistics
import time

import ml_dtypes
import numpy as np

from .progress import progress


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_attention(q, k, v):
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1 / np.sqrt(q.shape[-1]))
    return _np_softmax(s) @ v


def cases(size: str):
    from .. import stdlib as S
    rng = np.random.default_rng(0)
    f32 = np.float32
    n = 256 if size == "quick" else 2048
    r, c = (256, 512) if size == "quick" else (4096, 4096)
    seq = 256 if size == "quick" else 2048
    a, b = rng.standard_normal((n, n)).astype(f32), rng.standard_normal((n, n)).astype(f32)
    a8, b8 = a.astype(ml_dtypes.float8_e4m3), b.astype(ml_dtypes.float8_e4m3)
    x = rng.standard_normal((r, c)).astype(f32)
    w, bias = rng.standard_normal(c).astype(f32), rng.standard_normal(c).astype(f32)
    q, k, v = (rng.standard_normal((1, 2, seq, 128)).astype(f32) for _ in range(3))
    return [
        (f"matmul fp32 {n}^3", lambda: S.matmul(a, b), lambda: a @ b),
        (f"matmul_fp8 e4m3 {n}^3", lambda: S.matmul_fp8(a8, b8), lambda: a8.astype(f32) @ b8.astype(f32)),
        (f"softmax {r}x{c} fp32", lambda: S.softmax(x), lambda: _np_softmax(x)),
        (f"rmsnorm {r}x{c} fp32", lambda: S.rmsnorm(x, w),
         lambda: x / np.sqrt(np.mean(x * x, -1, keepdims=True) + f32(1e-6)) * w),
        (f"layernorm {r}x{c} fp32", lambda: S.layernorm(x, w, bias),
         lambda: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + f32(1e-5)) * w + bias),
        (f"attention B1 H2 S{seq} d128 fp32", lambda: S.attention(q, k, v), lambda: _np_attention(q, k, v)),
    ]


# Warm-up time before each timed call when more than one thread runs. numpy's OpenBLAS keeps its
# worker threads spinning for a while after every call (its THREAD_TIMEOUT); a call timed right after
# one shares the cores with them. Measured here (2 cores): stdlib attention on two threads took 85 ms
# alone and 123 ms right after a 1024^3 `a @ a`. Idling instead (time.sleep) is worse on these VMs:
# a numpy rmsnorm that takes 110 ms ran 420-460 ms in one call of three after 0.3-1 s asleep. So the
# timer runs the function itself, untimed, until `settle` seconds have passed since the other side's
# call ended: the other side's workers stop spinning and this side's memory and threads stay warm.
# nki_lite's pool threads sleep when idle (numpy's `a @ a` took 44 ms alone, 43 ms right after).
SETTLE_SECONDS = 1.0


def settle_seconds(threads: int) -> float:
    """The warm-up `interleaved` uses for a run at `threads` (0: all cores): SETTLE_SECONDS on a
    machine with several cores — at one thread too, although no worker thread spins then, so that
    one- and all-thread figures (and the scaling between them) are measured the same way — and none
    on a single core."""
    return 0.0 if (os.cpu_count() or 1) == 1 else SETTLE_SECONDS


def interleaved(fa, fb, reps: int, settle: float = 0.0) -> tuple[float, float]:
    """Medians of `reps` interleaved timings (fa, fb, fa, fb, ...) after one warm-up call of each;
    with `settle` > 0, before every timed call the same function runs untimed until `settle` seconds
    have passed since the previous timed call ended (see SETTLE_SECONDS)."""
    fa(), fb()
    ta: list[float] = []
    tb: list[float] = []
    last_end = time.perf_counter()
    for _ in range(max(1, reps)):
        for f, times in ((fa, ta), (fb, tb)):
            while settle > 0 and time.perf_counter() - last_end < settle:
                f()
            t0 = time.perf_counter()
            f()
            last_end = time.perf_counter()
            times.append(last_end - t0)
    return statistics.median(ta), statistics.median(tb)


def run(size: str = "quick", reps: int = 3, only: str | None = None) -> str:
    todo = [c for c in cases(size) if not only or only in c[0]]
    threads = os.environ.get("NKI_LITE_NUM_THREADS", "0")
    settle = settle_seconds(int(threads) if threads.isdigit() else 0)
    lines = [f"nki_lite.stdlib vs numpy ({size}; median of {reps} interleaved calls after a warm-up; "
             f"NKI_LITE_NUM_THREADS={threads}; {settle:g} s of untimed calls before each timed call; ratio = numpy / nki_lite)",
             f"{'case':36s} {'nki_lite ms':>12s} {'numpy ms':>10s} {'ratio':>7s}"]
    for name, mine, theirs in progress(todo, total=len(todo), desc="bench"):
        ta, tb = interleaved(mine, theirs, reps, settle)
        lines.append(f"{name:36s} {ta * 1e3:12.2f} {tb * 1e3:10.2f} {tb / ta:6.2f}x")
    return "\n".join(lines)
