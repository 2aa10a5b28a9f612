"""nki_lite.stdlib vs numpy, one process (prints tables; never asserts).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/stdlib.py [--quick] [--reps N] [--only=WORD]

`--only=matmul` keeps the cases whose name contains the word (e.g. matmul, softmax, attention).

First at one thread on both sides (numpy's BLAS limited by threadpoolctl, nki_lite by
NKI_LITE_NUM_THREADS=1), then at all cores. Each row is the median of interleaved repeats
(nki_lite, numpy, nki_lite, ...) after a warm-up call that compiles. Rows marked "prealloc" pass
preallocated outputs on both sides (numpy `out=` everywhere, nki_lite's kernel `out=`); the other
rows allocate as a user would. Ratios > 1 mean nki_lite is faster. The header names the CPU, the BLAS
library, its core type and the thread counts. Ends with the engine model's trn2 summaries
(TensorE active %) for the issue's targets.
"""
from __future__ import annotations

import math
import os
import sys

import ml_dtypes
import numpy as np

os.environ.setdefault("NKI_LITE_DEBUG", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jit import numpy_softmax  # noqa: E402  (the careful numpy softmax of the JIT table)
from machine import fma_peak_gflops, header, interleaved, settle_seconds, SETTLE_SECONDS, threads_line  # noqa: E402

import nki_lite.stdlib as S  # noqa: E402


def np_softmax(x, out=None, tmp=None):
    """The careful numpy softmax, allocating its output when none is given (as a user would)."""
    out = np.empty_like(x) if out is None else out
    numpy_softmax(x, out, np.empty((x.shape[0], 1), x.dtype) if tmp is None else tmp)
    return out


def np_attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2)
    s *= np.float32(1 / math.sqrt(q.shape[-1]))
    if causal:
        S_ = s.shape[-1]
        s[..., ~np.tri(S_, dtype=bool)] = -np.inf
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    return s @ v


def np_rmsnorm(x, w, eps=1e-6):
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x * (1 / np.sqrt(ms + np.float32(eps))) * w


def np_layernorm(x, w, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    return (x - m) * (1 / np.sqrt(v + np.float32(eps))) * w + b


def cases(quick: bool):
    """(name, nki_lite callable, numpy callable, flops or None)."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    out = []
    for n in ((512,) if quick else (1024, 2048)):
        a, b = rng.standard_normal((n, n)).astype(f32), rng.standard_normal((n, n)).astype(f32)
        out.append((f"matmul fp32 {n}^3", lambda a=a, b=b: S.matmul(a, b), lambda a=a, b=b: a @ b, 2 * n ** 3))
        a8, b8 = a.astype(ml_dtypes.float8_e4m3), b.astype(ml_dtypes.float8_e4m3)
        out.append((f"matmul_fp8 e4m3 {n}^3", lambda a8=a8, b8=b8: S.matmul_fp8(a8, b8),
                    lambda a8=a8, b8=b8: a8.astype(f32) @ b8.astype(f32), 2 * n ** 3))
    for r, c in (((1024, 1024),) if quick else ((4096, 4096), (8192, 1024))):
        x = rng.standard_normal((r, c)).astype(f32)
        o1, o2, tmp = np.empty_like(x), np.empty_like(x), np.empty((r, 1), f32)
        call = S.softmax.plan(x)
        out.append((f"softmax {r}x{c} fp32 prealloc", lambda call=call, o1=o1: call.kernel(*call.args, out=o1),
                    lambda x=x, o2=o2, tmp=tmp: np_softmax(x, o2, tmp), None))
        out.append((f"softmax {r}x{c} fp32 allocating", lambda x=x: S.softmax(x), lambda x=x: np_softmax(x), None))
    S_ = 512 if quick else 2048
    q, k, v = (rng.standard_normal((1, 8, S_, 128)).astype(f32) for _ in range(3))
    for causal in (False, True):
        # useful work: QK^T and PV over the (query, key) pairs attended; causal attends S(S+1)/2 of S^2
        pairs = S_ * (S_ + 1) // 2 if causal else S_ * S_
        out.append((f"attention B1 H8 S{S_} d128 fp32{' causal' if causal else ''}",
                    lambda causal=causal: S.attention(q, k, v, causal=causal),
                    lambda causal=causal: np_attention(q, k, v, causal), 4 * pairs * 128 * 8))
    r, c = (1024, 1024) if quick else (8192, 4096)
    x = rng.standard_normal((r, c)).astype(f32)
    w, b = rng.standard_normal(c).astype(f32), rng.standard_normal(c).astype(f32)
    out.append((f"rmsnorm {r}x{c} fp32", lambda: S.rmsnorm(x, w), lambda: np_rmsnorm(x, w), None))
    out.append((f"layernorm {r}x{c} fp32", lambda: S.layernorm(x, w, b), lambda: np_layernorm(x, w, b), None))
    return out


def _only() -> str | None:
    for a in sys.argv[1:]:
        if a.startswith("--only="):
            return a.split("=", 1)[1]
    return None


def run(quick: bool, reps: int, threads: int):
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    os.environ["NKI_LITE_NUM_THREADS"] = str(threads)
    limiter = threadpool_limits(threads or None) if threadpool_limits else None
    rows = []
    try:
        label = threads_line(threads)
        for name, mine, theirs, flops in cases(quick):
            if _only() and _only() not in name:
                continue
            a, b = interleaved(mine, theirs, reps, settle_seconds(threads))
            rows.append((name, a, b, flops))
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return label, rows


def table(label: str, measured, one_thread: bool) -> str:
    threads, rows = measured
    peak = fma_peak_gflops()
    lines = [f"\n{label}; {threads}",
             f"{'case':44s} {'nki_lite ms':>12s} {'numpy ms':>10s} {'ratio':>7s} {'nki GFLOP/s':>12s} {'numpy GFLOP/s':>14s}"]
    for name, a, b, flops in rows:
        gf = f"{flops / a * 1e-9:12.1f} {flops / b * 1e-9:14.1f}" if flops else f"{'':12s} {'':14s}"
        flag = ""
        if one_thread and flops and peak and max(flops / a, flops / b) * 1e-9 > peak[0]:
            flag = "  !! above one core's FMA peak: check the measurement"
        lines.append(f"{name:44s} {a * 1e3:12.2f} {b * 1e3:10.2f} {b / a:6.2f}x {gf}{flag}")
    return "\n".join(lines)


def engine_summaries() -> str:
    """The issue's engine-model targets on trn2 (placeholders: nothing runs)."""
    f8 = ml_dtypes.float8_e4m3
    bf = ml_dtypes.bfloat16
    lines = ["\nengine model (trn2)"]
    a = np.zeros((4096, 4096), f8)
    est = S.matmul_fp8.estimate(a, a, target="trn2")
    lines.append(_summary_line("matmul_fp8 4096^3 e4m3", est))
    q = np.zeros((1, 1, 4096, 128), bf)
    est = S.attention.estimate(q, q, q, target="trn2")
    lines.append(_summary_line("attention S4096 d128 bf16", est))
    return "\n".join(lines)


def _summary_line(name, est) -> str:
    s = est.summary()
    active = est.engine_busy_ns("tensor") / max(est.total_time_ns, 1e-9) * 100
    return f"{name:32s} {s['total_time'] * 1e6:10.1f} us  TensorE active {active:5.1f}%  bottleneck: {est.bottleneck}"


def main() -> None:
    quick = "--quick" in sys.argv
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else (3 if quick else 7)
    print(header("nki_lite.stdlib vs numpy (benchmarks/stdlib.py)"))
    print(f"medians of {reps} interleaved repeats; ratio = numpy time / nki_lite time; each timed call "
          f"follows {SETTLE_SECONDS:g} s of untimed calls of the same function (numpy's BLAS "
          f"workers spin after each call; tools/bench.py)")
    print(table("one thread", run(quick, reps, 1), one_thread=True))
    print(table(f"all cores ({os.cpu_count()})", run(quick, reps, 0), one_thread=False))
    print(engine_summaries())


if __name__ == "__main__":
    main()
