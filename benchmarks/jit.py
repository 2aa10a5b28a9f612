"""nki_lite JIT vs numpy, one process (prints tables; never asserts).

    python benchmarks/jit.py [--quick]

Checks that the all-cores outputs are bit-identical to the one-thread ones. Ends with the compile
time, the cached-call overhead and a new process's first call (from
jit_launch.py and jit_first_call.py).

First at one thread on both sides (BLAS via threadpoolctl, if installed; nki_lite via
NKI_LITE_NUM_THREADS=1), then at all cores. Each row: median of >= 7 interleaved runs (nki_lite, numpy,
nki_lite, ...); outputs preallocated on both sides (numpy `out=` everywhere, the "careful" form;
nki_lite `kernel(..., out=buf)`).
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np

os.environ.setdefault("NKI_LITE_DEBUG", "0")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import fma_peak_gflops, header, interleaved, settle_seconds, threads_line  # noqa: E402

import nki_lite as nki  # noqa: E402
import nki_lite.language as nl  # noqa: E402
from nki_lite.stdlib.matmul_kernels import tiled_matmul  # noqa: E402
from nki_lite.stdlib.softmax_kernels import row_softmax  # noqa: E402


@nki.jit
def chain5(x, y):
    """((x * y + x) * 0.5 - y) max 0, over [128, F] tiles: 5 elementwise ops per element."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    for i in nl.affine_range(rows // 128):
        for j in nl.affine_range(cols // 2048):
            a = nl.load(x[i * 128:(i + 1) * 128, j * 2048:(j + 1) * 2048])
            b = nl.load(y[i * 128:(i + 1) * 128, j * 2048:(j + 1) * 2048])
            t = nl.maximum(nl.subtract(nl.multiply(nl.add(nl.multiply(a, b), a), 0.5), b), 0.0)
            nl.store(out[i * 128:(i + 1) * 128, j * 2048:(j + 1) * 2048], t)
    return out


def numpy_softmax(x, out, tmp):
    np.max(x, axis=1, keepdims=True, out=tmp)
    np.subtract(x, tmp, out=out)
    np.exp(out, out=out)
    np.sum(out, axis=1, keepdims=True, out=tmp)
    np.reciprocal(tmp, out=tmp)
    np.multiply(out, tmp, out=out)


def numpy_chain(x, y, out):
    np.multiply(x, y, out=out)
    np.add(out, x, out=out)
    np.multiply(out, 0.5, out=out)
    np.subtract(out, y, out=out)
    np.maximum(out, 0.0, out=out)


def run_cases(quick: bool, reps: int) -> list:
    """Rows of (name, nki_lite seconds, numpy seconds, nki_lite's output bits)."""
    rng = np.random.default_rng(0)
    rows = []

    n = 1024 if quick else 4096
    x = rng.standard_normal((n, n)).astype(np.float32)
    out, tmp, mine = np.empty_like(x), np.empty((n, 1), np.float32), np.empty_like(x)
    a, b = interleaved(lambda: row_softmax(x, out=mine), lambda: numpy_softmax(x, out, tmp), reps, _settle())
    rows.append((f"row softmax {n}x{n} fp32", a, b, mine.tobytes(), None))

    m = 4096 * 4096 if not quick else 1024 * 1024            # 64 MB per fp32 operand (quick: 4 MB)
    r = 128 * (m // (128 * 2048) or 1)
    cols = m // r // 2048 * 2048
    xs = rng.standard_normal((r, cols)).astype(np.float32)
    ys = rng.standard_normal((r, cols)).astype(np.float32)
    oc, mc = np.empty_like(xs), np.empty_like(xs)
    a, b = interleaved(lambda: chain5(xs, ys, out=mc), lambda: numpy_chain(xs, ys, oc), reps, _settle())
    rows.append((f"elementwise chain (5 ops) {r}x{cols} fp32 ({xs.nbytes >> 20} MB)", a, b, mc.tobytes(), None))

    for size in ((1024,) if quick else (1024, 2048)):
        lhsT = rng.standard_normal((size, size)).astype(np.float32)
        rhs = rng.standard_normal((size, size)).astype(np.float32)
        mo, mm = np.empty((size, size), np.float32), np.empty((size, size), np.float32)
        a, b = interleaved(lambda: tiled_matmul(lhsT, rhs, out=mm), lambda: np.matmul(lhsT.T, rhs, out=mo), reps, _settle())
        rows.append((f"tiled matmul {size}^3 fp32", a, b, mm.tobytes(), 2 * size ** 3))
        l8 = lhsT.astype(ml_dtypes.float8_e4m3)
        r8 = rhs.astype(ml_dtypes.float8_e4m3)
        a, b = interleaved(lambda: tiled_matmul(l8, r8, out=mm),
                           lambda: np.matmul(l8.astype(np.float32).T, r8.astype(np.float32), out=mo), reps,
                           _settle())
        rows.append((f"tiled matmul {size}^3 fp8 e4m3 inputs", a, b, mm.tobytes(), 2 * size ** 3))

    return rows


def _settle() -> float:
    """Idle before each timed call at this run's thread count (tools/bench.py settle_seconds)."""
    return settle_seconds(int(os.environ.get("NKI_LITE_NUM_THREADS", "0")))


def main() -> None:
    quick = "--quick" in sys.argv
    reps = 7
    print(header("nki_lite JIT vs numpy (benchmarks/jit.py)"))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
        print("(threadpoolctl not installed: numpy's BLAS may use several threads)")
    first = None
    for label, threads in (("one thread", 1), (f"all cores ({os.cpu_count()})", 0)):
        os.environ["NKI_LITE_NUM_THREADS"] = str(threads)
        limiter = threadpool_limits(threads or None) if threadpool_limits else None
        tl = threads_line(threads)
        rows = run_cases(quick, reps)
        if limiter is not None:
            limiter.restore_original_limits()
        print(f"\n{label}; {tl}")
        print(f"{'case':52s} {'nki_lite ms':>12s} {'numpy ms':>10s} {'speedup':>8s} {'nki GFLOP/s':>12s} "
              f"{'numpy GFLOP/s':>14s}")
        peak = fma_peak_gflops()
        for name, a, b, _, flops in rows:
            gf = f" {flops / a * 1e-9:12.1f} {flops / b * 1e-9:14.1f}" if flops else ""
            if threads == 1 and flops and peak and max(flops / a, flops / b) * 1e-9 > peak[0]:
                gf += "  !! above one core's FMA peak: check the measurement"
            print(f"{name:52s} {a * 1e3:12.2f} {b * 1e3:10.2f} {b / a:7.2f}x{gf}")
        if first is None:
            first = rows
        else:
            same = all(r1[3] == r2[3] for r1, r2 in zip(first, rows))
            print(f"nki_lite outputs bit-identical to the one-thread run: {'yes' if same else 'NO'}")
    launch_figures(quick)


def launch_figures(quick: bool) -> None:
    """Compile time, cached-call overhead and a second process's first call (the other two
    benchmark scripts, summarised here so one run gives the whole table)."""
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import jit_launch
    trace_ms, llvm_ms = jit_launch.compile_times(int(os.environ.get("NKI_LITE_JIT_OPT", "2")), reps=3 if quick else 7)
    print(f"\ncompile (tiled matmul, trace + verify + LLVM + codegen): {trace_ms + llvm_ms:.1f} ms")
    print(f"cached call of a 3-argument kernel: {jit_launch.cached_call_us(reps=3 if quick else 7):.2f} us")
    out = subprocess.run([sys.executable, os.path.join(here, "jit_first_call.py"), "--runs", "3" if quick else "7"],
                         capture_output=True, text=True, timeout=600)
    print("first call in a new process (benchmarks/jit_first_call.py):")
    print("\n".join("  " + line for line in out.stdout.strip().splitlines()))


if __name__ == "__main__":
    main()
