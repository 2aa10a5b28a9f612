"""Print the engine model's validation table: the NKI matmul tutorial's four kernels on trn1.

    .venv/bin/python benchmarks/estimate_matmul.py [--target trn1] [--trace DIR]

Nothing runs on data: the kernels are traced from `nt.tensor` placeholders of the tutorial's full
problem (lhsT [8192, 4096], rhs [8192, 8192], BF16) and estimated. The table compares with the
tutorial's published latencies and HFU (docs/engine_model.md, "Validation").
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nki_lite as nki  # noqa: E402
import nki_lite.language as nl  # noqa: E402
import nki_lite.typing as nt  # noqa: E402
from nki_lite.lower.cost import validation as V  # noqa: E402
from tests.kernels import matmul_tutorial as MT  # noqa: E402


def run(target: str = "trn1", trace_dir: str | None = None, verbose: bool = True):
    lhsT = nt.tensor[list(V.PROBLEM["lhsT"]), nl.bfloat16]
    rhs = nt.tensor[list(V.PROBLEM["rhs"]), nl.bfloat16]
    ms, hfu, secs, ests = {}, {}, {}, {}
    for key in V.ORDER:
        t0 = time.perf_counter()
        est = nki.estimate(MT.KERNELS[key], lhsT, rhs, target=target)
        secs[key] = time.perf_counter() - t0
        s = est.summary()
        ms[key] = s["total_time"] * 1e3
        hfu[key] = s["hfu_estimated_percent"]
        ests[key] = est
        if trace_dir:
            os.makedirs(trace_dir, exist_ok=True)
            est.save_trace(os.path.join(trace_dir, f"matmul_{key}.json"))
    rows, steps, checks = V.compare(ms, hfu)
    if verbose:
        print(f"NKI matmul tutorial, {target}, BF16, lhsT {V.PROBLEM['lhsT']} @ rhs {V.PROBLEM['rhs']}\n")
        print(V.render(rows, steps, checks))
        print()
        for key in V.ORDER:
            print(f"{key:>11}: estimated in {secs[key]:.2f} s; {ests[key].bottleneck}")
    return rows, steps, checks, secs, ests


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--trace", default=None, help="directory for Chrome traces of the four estimates")
    a = ap.parse_args()
    run(a.target, a.trace)
