"""JIT compile time and launch overhead (prints a table; never asserts).

    python benchmarks/jit_launch.py

- compile: trace + verify + LLVM optimisation + machine code for a tiled matmul kernel
  (lhsT [512, 256] @ rhs [512, 1024], bf16), a new signature each repetition so nothing is cached;
  split into trace+verify and LLVM parts; at each optimisation level.
- cached call: a 3-argument elementwise kernel on [4, 8] fp32, called repeatedly (the whole Python
  path: signature lookup, output allocation, native call).
Medians of repeated runs; one process.
"""
from __future__ import annotations

import os
import statistics
import time
import timeit

import numpy as np

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.runtime.compiled import CompiledKernel
from nki_lite.stdlib.matmul_kernels import tiled_matmul


def compile_times(opt: int, reps: int = 7):
    os.environ["NKI_LITE_JIT_OPT"] = str(opt)
    trace_ms, llvm_ms = [], []
    for r in range(reps):
        n = 1024 + 512 * (r + 16 * opt)                 # a new signature every time
        t0 = time.perf_counter()
        kern = tiled_matmul.trace(nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, n], nl.bfloat16])
        t1 = time.perf_counter()
        CompiledKernel(kern, debug=False)
        t2 = time.perf_counter()
        trace_ms.append((t1 - t0) * 1e3)
        llvm_ms.append((t2 - t1) * 1e3)
    return statistics.median(trace_ms), statistics.median(llvm_ms)


@nki.jit
def add3(a, b, c):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a) + nl.load(b) + nl.load(c))
    return out


def cached_call_us(reps: int = 7, number: int = 20000) -> float:
    a = np.ones((4, 8), np.float32)
    add3(a, a, a)
    samples = [timeit.timeit(lambda: add3(a, a, a), number=number) / number * 1e6 for _ in range(reps)]
    return statistics.median(samples)


def main() -> None:
    os.environ.setdefault("NKI_LITE_DEBUG", "0")
    tiled_matmul.trace(nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 512], nl.bfloat16])   # warm imports
    print("compile: tiled matmul lhsT[512,256] @ rhs[512,N] bf16 (median of 7, new N each time)")
    print(f"{'opt':>4s} {'trace+verify ms':>16s} {'LLVM opt+codegen ms':>20s} {'total ms':>9s}")
    for opt in (0, 1, 2, 3):
        t, l = compile_times(opt)
        print(f"{opt:4d} {t:16.1f} {l:20.1f} {t + l:9.1f}")
    os.environ["NKI_LITE_JIT_OPT"] = "2"
    print(f"\ncached call of a 3-argument kernel: {cached_call_us():.2f} us (median of 7 x 20000 calls)")


if __name__ == "__main__":
    main()
