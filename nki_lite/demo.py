"""`python -m nki_lite.demo` (what `make demo` runs): trace and run real kernels, compare with
numpy, and print an engine profile when the engine model is available."""
from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import nki_lite
from .core import ir
from nki_lite.stdlib.elementwise import spmd_add
from nki_lite.stdlib.matmul_kernels import tiled_matmul
from nki_lite.stdlib.norm_kernels import rmsnorm_tutorial as rmsnorm
from nki_lite.stdlib.reference import matmul_ref, rmsnorm_ref, row_softmax_ref
from nki_lite.stdlib.softmax_kernels import row_softmax
from nki_lite.testing import assert_close


def _cases(rng):
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    yield "spmd_add[2,2] fp32", spmd_add[2, 2], (a, b), a.astype(np.float64) + b, {}
    for dt, name in ((ml_dtypes.bfloat16, "bf16"), (ml_dtypes.float8_e4m3, "fp8_e4m3")):
        lhsT = rng.standard_normal((512, 256)).astype(dt)
        rhs = rng.standard_normal((512, 1024)).astype(dt)
        yield f"tiled_matmul {name} 512x256x1024", tiled_matmul, (lhsT, rhs), matmul_ref(lhsT, rhs), \
            dict(rtol=1e-5, atol=1e-4)
    x = (rng.standard_normal((300, 700)) * 3).astype(np.float32)
    yield "row_softmax 300x700 (ragged)", row_softmax, (x,), row_softmax_ref(x), dict(rtol=2e-5, atol=1e-7)
    g = rng.standard_normal(512).astype(np.float32)
    xa = rng.standard_normal((300, 512)).astype(np.float32)
    yield "rmsnorm 300x512 (ragged)", rmsnorm, (xa, g), rmsnorm_ref(xa, g), dict(rtol=5e-5, atol=1e-6)


def main() -> int:
    rng = np.random.default_rng(0)
    print(f"nki_lite {nki_lite.__version__}: kernels compiled by the LLVM JIT, checked against the numpy "
          "interpreter (bitwise) and numpy float64 (tolerance)\n")
    print(f"{'kernel':34s} {'instrs':>6s} {'compile+run':>12s} {'cached run':>11s} {'max |err|':>10s} "
          f"{'jit==interp':>11s}  result")
    failures = 0
    for name, kern, args, ref, tol in _cases(rng):
        t0 = time.perf_counter()
        out = kern(*args, mode="jit")
        t1 = time.perf_counter()
        out = kern(*args, mode="jit")
        t2 = time.perf_counter()
        oracle = kern(*args, mode="interpret")
        same = np.array_equal(out.view(np.uint8), oracle.view(np.uint8))
        n_instr = ir.count_instrs(kern.trace(*args))
        err = float(np.max(np.abs(out.astype(np.float64) - ref)))
        try:
            assert_close(out, ref, **tol)
            verdict = "ok" if same else "JIT DIFFERS FROM INTERPRETER"
            failures += not same
        except AssertionError as e:
            failures += 1
            verdict = "MISMATCH\n" + str(e)
        print(f"{name:34s} {n_instr:6d} {(t1 - t0) * 1e3:10.1f}ms {(t2 - t1) * 1e3:9.2f}ms {err:10.2e} "
              f"{'yes' if same else 'NO':>11s}  {verdict}")
    estimate = getattr(nki_lite, "estimate", None)
    print()
    if estimate is None:
        print("engine model: not built yet (see docs/status.md)")
    else:
        import nki_lite.language as nl
        import nki_lite.typing as nt
        est = estimate(tiled_matmul, nt.tensor[[4096, 1024], nl.bfloat16], nt.tensor[[4096, 4096], nl.bfloat16],
                       target="trn2")
        print("engine profile: tiled_matmul bf16 lhsT[4096,1024] @ rhs[4096,4096] on trn2 (estimated)")
        print(est.table())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
