"""A/B of the JIT matmul micro-kernel's register block and group depth, in one process (prints; never asserts).

    python benchmarks/matmul_variants.py [--n 2048] [--reps 9] [--fp8] LANES,MR,NR:KC[:nofwd] ...
    e.g. env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
             python benchmarks/matmul_variants.py 16,8,3:512 16,12,2:256 16,12,2:256:nofwd

It prints the CPU model, the BLAS library and core type, one core's measured FMA peak and both thread counts
first (benchmarks/machine.py's header), as every benchmark table here does.

Each variant (matmul_kernel.Geometry(LANES, MR, NR) and matmul_chain.KC) compiles stdlib.matmul's kernel
(or matmul_fp8's with --fp8) afresh (`:nofwd`: without forwarding loads to nc_matmul operands, pass
forward-loads, so the B panel is copied HBM -> SBUF as traced); then the variants and numpy run interleaved, `--reps` rounds, each
call timed in CPU time (time.process_time: on a machine shared with other jobs, wall time counts their
slices too; with several threads it is the threads' sum). Every variant's output must be bit-identical to
the first one's (the geometry and KC change the speed only). nki_lite's threads: NKI_LITE_NUM_THREADS
(default 1); numpy's: its BLAS's environment (OPENBLAS_NUM_THREADS=1 for one thread).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("NKI_LITE_NUM_THREADS", "1")
os.environ["NKI_LITE_DISK_CACHE"] = "0"             # every variant is compiled here, never loaded

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import header, threads_line  # noqa: E402

import nki_lite.stdlib as S  # noqa: E402
from nki_lite.core.ops import OPS  # noqa: E402
from nki_lite.lower.llvm import matmul_chain as MC, matmul_kernel as MK  # noqa: E402
from nki_lite.runtime import jit as J  # noqa: E402


def parse(spec: str) -> tuple[MK.Geometry, int, bool]:
    geom, kc, *flags = spec.split(":")
    return MK.Geometry(*map(int, geom.split(","))), int(kc), "nofwd" not in flags


def compile_variant(kir, spec: str):
    """The kernel compiled with this variant's geometry and KC (restored afterwards)."""
    geom, kc, fwd = parse(spec)
    mm = OPS["nc_matmul"]
    saved = MK.host_geometry, MC.KC, mm.plain_reads
    MK.host_geometry, MC.KC = (lambda: geom), kc
    mm.plain_reads = mm.plain_reads and fwd        # the trait forward-loads reads for each reader
    try:
        J.CACHE.clear()
        return J.lookup(kir)[0]
    finally:
        MK.host_geometry, MC.KC, mm.plain_reads = saved
        J.CACHE.clear()


def run(specs: list[str], n: int, reps: int, fp8: bool) -> dict:
    """{spec: (min s, median s, bit-identical to the first)} plus "numpy": (min s, median s, True)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    if fp8:
        import ml_dtypes
        a, b = a.astype(ml_dtypes.float8_e4m3), b.astype(ml_dtypes.float8_e4m3)
        call = S.matmul_fp8.plan(a, b)

        def ref():                      # numpy's side widens, as benchmarks/stdlib.py's does
            return a.astype(np.float32) @ b.astype(np.float32)
    else:
        call = S.matmul.plan(a, b)

        def ref():
            return a @ b
    kernel = call.kernel
    kir = kernel.trace(*call.args)
    inputs = kernel._jit_inputs(kir, kernel.bind(call.args, {}))
    compiled, first, same = [], None, {}
    for spec in specs:
        ck = compile_variant(kir, spec)
        out = np.asarray(next(iter(ck.launch(dict(inputs)).values()))).copy()
        first = out if first is None else first
        same[spec] = out.tobytes() == first.tobytes()
        compiled.append((spec, ck))
    times: dict = {spec: [] for spec in specs}
    times["numpy"] = []
    for _ in range(reps):
        for spec, ck in compiled:
            t = time.process_time()
            ck.launch(dict(inputs))
            times[spec].append(time.process_time() - t)
        t = time.process_time()
        ref()
        times["numpy"].append(time.process_time() - t)
    return {k: (min(v), sorted(v)[len(v) // 2], same.get(k, True)) for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="LANES,MR,NR:KC")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--fp8", action="store_true")
    args = ap.parse_args(argv)
    print(header("stdlib.matmul micro-kernel variants vs numpy (benchmarks/matmul_variants.py)"))
    print(threads_line(int(os.environ["NKI_LITE_NUM_THREADS"])))
    res = run(args.variants, args.n, args.reps, args.fp8)
    gf = 2 * args.n ** 3 / 1e9
    nmin, nmed, _ = res["numpy"]
    print(f"{'matmul_fp8 e4m3' if args.fp8 else 'matmul fp32'} {args.n}^3, CPU time, {args.reps} interleaved rounds; "
          f"nki_lite threads {os.environ['NKI_LITE_NUM_THREADS']}")
    print(f"{'numpy':16s} min {gf / nmin:7.1f} GFLOP/s  median {gf / nmed:7.1f}")
    for spec in args.variants:
        tmin, tmed, same = res[spec]
        print(f"{spec:16s} min {gf / tmin:7.1f} GFLOP/s  median {gf / tmed:7.1f}  ratio min {nmin / tmin:.3f} "
              f"median {nmed / tmed:.3f}  bit-identical to the first: {same}")


if __name__ == "__main__":
    main()
