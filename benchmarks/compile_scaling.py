"""Compile-time scaling with the number of unrolled instructions (prints a table; never asserts).

    python benchmarks/compile_scaling.py [--sizes 100,1000,10000] [--big] [--variant chain|tiles|both]

A kernel of N unrolled elementwise ops on one [128, 512] fp32 tile, in a Python `range` loop:
- chain: `t = t + 1.0` N times (every op a fresh temporary, as tracing makes it);
- tiles: N explicitly declared SBUF tiles, `u[...] = nl.multiply(t, 1.0001)` / `nl.add`, `t = u`.
Each size runs in its own child processes (so peak RSS is per phase and nothing is shared):
- trace s:   tracing the Python function into the IR, plus the default passes;
- verify s:  the hardware-rule verifier;
- codegen s: nki_lite's LLVM IR text generation;
- LLVM s:    llvmlite parse + optimise (NKI_LITE_JIT_OPT, default 2) + object emission + load (wall;
             "LLVM cpu" is this process's CPU time for it: on a shared host the two differ);
- run s:     one call of the compiled kernel (JIT) and one interpreter run;
- RSS MB:    peak resident set of the interpreter process (trace + interpret) and of the JIT process
             (trace + verify + codegen + LLVM + run).
`--big` adds N = 100,000 (minutes). The disk cache is disabled in the children.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import json, resource, sys, time
import numpy as np
import nki_lite as nki
import nki_lite.language as nl
from nki_lite.lang.trace import trace
from nki_lite.lower.passes.pipeline import run_shared
from nki_lite.lower.verify import verify

n, variant, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def chain(a, n):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in range(n):
        t = t + 1.0
    nl.store(out, t)
    return out

def tiles(a, n):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for k in range(n):
        u = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        u[...] = nl.multiply(t, 1.0001) if k % 2 else nl.add(t, 0.5)
        t = u
    nl.store(out, t)
    return out

k = nki.jit(chain if variant == "chain" else tiles)
a = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
res = {}
try:
    from nki_lite.gcpause import paused           # what Kernel._traced does around tracing
except ImportError:                               # (an older nki_lite, for the "before" table)
    import contextlib
    paused = contextlib.nullcontext
t0 = time.perf_counter()
bound = k.bind((a, n), {})
with paused():
    kern = run_shared(trace(k.fn, bound, (), "trn2"))
t1 = time.perf_counter()
res["trace"] = t1 - t0
if mode == "interpret":
    from nki_lite.runtime.interpreter import run
    t2 = time.perf_counter()
    run(kern, {"a": a})
    res["interp"] = time.perf_counter() - t2
else:
    with paused():                                # Kernel._traced verifies under the same pause
        verify(kern)
    t2 = time.perf_counter()
    res["verify"] = t2 - t1
    from nki_lite.runtime.compiled import source_text
    from nki_lite.lower.llvm import target as T
    from nki_lite import config
    gen, text, tramp = source_text(kern, False)
    t3 = time.perf_counter()
    res["codegen"] = t3 - t2
    res["llvm_lines"] = text.count("\n")
    c3 = time.process_time()
    mod = T.compile_object(text, "bench", opt=config.get("NKI_LITE_JIT_OPT"))
    t4 = time.perf_counter()
    res["llvm"] = t4 - t3
    res["llvm_cpu"] = time.process_time() - c3
    from nki_lite.runtime.compiled import CompiledKernel
    ck = CompiledKernel.__new__(CompiledKernel)     # CompiledKernel(kern, False) with the parts timed above
    ck.kernel, ck.debug, ck.opt, ck.module = kern, False, mod.opt, mod
    ck._bind(gen.plan, tramp, from_disk=False)
    del text
    t5 = time.perf_counter()
    ck.launch({"a": a})
    res["run"] = time.perf_counter() - t5
res["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(res))
'''


def child(n: int, variant: str, mode: str, timeout: float) -> dict:
    env = {**os.environ, "NKI_LITE_DISK_CACHE": "0"}
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(n), variant, mode], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:.0f}s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:60]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt(d: dict, k: str) -> str:
    return f"{d[k]:8.2f}" if k in d else f"{'-':>8}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--big", action="store_true", help="also N = 100000")
    ap.add_argument("--variant", default="both", choices=("chain", "tiles", "both"))
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] + ([100000] if args.big else [])
    variants = ("chain", "tiles") if args.variant == "both" else (args.variant,)
    print(f"NKI_LITE_JIT_OPT={os.environ.get('NKI_LITE_JIT_OPT', '2')}")
    print(f"{'variant':8} {'ops':>7} {'trace s':>8} {'verify s':>8} {'codegen s':>9} {'LLVM s':>8} {'LLVM cpu':>8} "
          f"{'run s':>8} {'interp s':>8} {'RSS interp MB':>13} {'RSS JIT MB':>10}  note")
    for v in variants:
        for n in sizes:
            it = child(n, v, "interpret", args.timeout)
            jt = child(n, v, "jit", args.timeout)
            note = "; ".join(x for x in (it.get("error", ""), jt.get("error", "")) if x)
            print(f"{v:8} {n:7d} {fmt(jt, 'trace')} {fmt(jt, 'verify')} {fmt(jt, 'codegen'):>9} {fmt(jt, 'llvm')} {fmt(jt, 'llvm_cpu')} "
                  f"{fmt(jt, 'run')} {fmt(it, 'interp')} {fmt(it, 'rss_mb'):>13} {fmt(jt, 'rss_mb'):>10}  {note}",
                  flush=True)


if __name__ == "__main__":
    main()
