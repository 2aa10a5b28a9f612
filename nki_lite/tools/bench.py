"""`nki-lite bench`: the stdlib against numpy on this machine, as a table (never asserts).

Contract: `cases(size)` builds (name, nki_lite call, numpy call) for matmul, matmul_fp8, softmax,
rmsnorm, layernorm and attention at `size` "quick" (seconds) or "full" (the shapes of
benchmarks/stdlib.py's main table); `run(size, reps)` times each pair interleaved (one warm-up call
each, which compiles, then the median of `reps` alternating calls) with a progress bar and returns
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


def interleaved(fa, fb, reps: int) -> tuple[float, float]:
    """Medians of `reps` interleaved timings (fa, fb, fa, fb, ...) after one warm-up call of each."""
    fa(), fb()
    ta, tb = [], []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fa()
        t1 = time.perf_counter()
        fb()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return statistics.median(ta), statistics.median(tb)


def run(size: str = "quick", reps: int = 3, only: str | None = None) -> str:
    todo = [c for c in cases(size) if not only or only in c[0]]
    threads = os.environ.get("NKI_LITE_NUM_THREADS", "0")
    lines = [f"nki_lite.stdlib vs numpy ({size}; median of {reps} interleaved calls after a warm-up; "
             f"NKI_LITE_NUM_THREADS={threads}; ratio = numpy / nki_lite)",
             f"{'case':36s} {'nki_lite ms':>12s} {'numpy ms':>10s} {'ratio':>7s}"]
    for name, mine, theirs in progress(todo, total=len(todo), desc="bench"):
        ta, tb = interleaved(mine, theirs, reps)
        lines.append(f"{name:36s} {ta * 1e3:12.2f} {tb * 1e3:10.2f} {tb / ta:6.2f}x")
    return "\n".join(lines)
