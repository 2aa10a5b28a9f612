"""Throughput of the JIT dtype conversions (nki_lite.lower.llvm.convert) against numpy / ml_dtypes.

Prints, never asserts. One thread, 16 M elements, median (min-max) of 7 runs, Gelem/s.
The JIT side is `void @run(ptr in, ptr out, i64 n)`: a 16-wide vector body plus a scalar tail over
the generated functions (the driver the tests use), called through ctypes on preallocated numpy
buffers. The reference side is `astype` (allocates its result, as the interpreter does) and, for
the float formats, a cast into a preallocated array (`np.copyto(out, x, casting="unsafe")`).

    .venv/bin/python benchmarks/llvm_convert.py [--n 16777216] [--reps 7]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time

import ml_dtypes  # noqa: F401  (registers the dtypes)
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from nki_lite.core import dtypes as D
from nki_lite.lower.llvm import convert as LC  # noqa: E402
from nki_lite.lower.llvm import target  # noqa: E402
from nki_lite.numerics import convert  # noqa: E402

VW = 16
_RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
def build(kind: str, name: str):
    ir = LC.array_driver(kind, name, VW)
    m = target.compile_module(ir, f"bench_{kind}_{name}")
    return m, _RUN(m.address("run"))


def timeit(fn, reps: int) -> list[float]:
    fn()                                          # warm-up (page faults, caches)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def fmt(n: int, ts: list[float]) -> str:
    g = sorted(n / t / 1e9 for t in ts)
    return f"{statistics.median(g):6.2f} ({g[0]:.2f}-{g[-1]:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    n, reps = args.n, args.reps
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        pass
    rng = np.random.default_rng(0)
    xf = rng.standard_normal(n).astype(np.float32) * np.float32(8.0)   # typical activations
    print(f"host {target.host_info()['cpu']}, LLVM {target.host_info()['llvm']}, n = {n}, "
          f"median (min-max) of {reps}, Gelem/s, 1 thread")
    print(f"{'conversion':34s} {'JIT':>22s} {'astype':>22s} {'cast into prealloc':>22s} {'JIT/astype':>10s}")

    def row(label, jit_ts, ref_ts, pre_ts):
        mj = statistics.median(jit_ts)
        mr = statistics.median(ref_ts)
        pre = fmt(n, pre_ts) if pre_ts else "-"
        print(f"{label:34s} {fmt(n, jit_ts):>22s} {fmt(n, ref_ts):>22s} {pre:>22s} {mr / mj:9.1f}x")

    floats = ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "tfloat32"]
    for name in floats:                           # ---- encode fp32 -> name
        m, run = build("enc", name)
        st = D.storage(name)
        out = np.empty(n, st)
        ref = (lambda: convert.round_to(xf, name)) if name == "tfloat32" else (lambda: xf.astype(st))
        pre = None if name == "tfloat32" else (lambda: np.copyto(out, xf, casting="unsafe"))
        jt = timeit(lambda: run(xf.ctypes.data, out.ctypes.data, n), reps)
        row(f"encode float32 -> {name}", jt, timeit(ref, reps), timeit(pre, reps) if pre else None)
        m.dispose()
    for name in floats:                           # ---- decode name -> fp32
        m, run = build("dec", name)
        st = D.storage(name)
        codes = convert.round_to(xf, name) if name == "tfloat32" else \
            rng.integers(0, 1 << (8 * st.itemsize), n, dtype=np.uint64).astype(
                np.uint8 if st.itemsize == 1 else np.uint16).view(st)
        out = np.empty(n, np.float32)
        with np.errstate(invalid="ignore"):
            jt = timeit(lambda: run(codes.ctypes.data, out.ctypes.data, n), reps)
            rt = timeit(lambda: codes.astype(np.float32), reps)
            pt = timeit(lambda: np.copyto(out, codes, casting="unsafe"), reps)
        row(f"decode {name} -> float32", jt, rt, pt)
        m.dispose()
    for name in ["int8", "int32", "uint32", "bool"]:   # ---- float -> int (reference: round_to)
        m, run = build("f2i", name)
        out = np.empty(n, D.storage(name))
        xi = xf * np.float32(1e3)
        jt = timeit(lambda: run(xi.ctypes.data, out.ctypes.data, n), reps)
        row(f"float32 -> {name} (ref round_to)", jt, timeit(lambda: convert.round_to(xi, name), reps), None)
        m.dispose()
    for name in ["int8", "int32", "uint32"]:           # ---- int -> float32 (reference: astype)
        m, run = build("i2f", name)
        ii = np.iinfo(name)
        v = rng.integers(ii.min, int(ii.max) + 1, n, dtype=np.int64).astype(name)
        out = np.empty(n, np.float32)
        jt = timeit(lambda: run(v.ctypes.data, out.ctypes.data, n), reps)
        row(f"{name} -> float32", jt, timeit(lambda: v.astype(np.float32), reps),
            timeit(lambda: np.copyto(out, v, casting="unsafe"), reps))
        m.dispose()


if __name__ == "__main__":
    main()
