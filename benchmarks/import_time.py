"""What `import nki_lite` costs over its dependencies' own import time (prints; never asserts).

    python benchmarks/import_time.py [--reps N]

Each measurement is a fresh interpreter timing one import statement with perf_counter (interpreter
start-up excluded), interleaved (deps, nki_lite, deps, ...) so machine load hits both alike; the
table shows medians. "deps" imports what nki_lite imports at start-up from its dependencies: numpy,
ml_dtypes and llvmlite.binding (the JIT driver's). The budget (issue #17) is deps + 150 ms. Also
reports which optional heavy modules (matplotlib, tqdm, multiprocessing) `import nki_lite` loads.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

BUDGET_MS = 150.0
PROBE = """
import sys, time, json
t0, c0 = time.perf_counter(), time.process_time()
{stmt}
t1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({{"ms": (t1 - t0) * 1e3, "cpu_ms": (c1 - c0) * 1e3,
                  "loaded": [m for m in {watch!r} if m in sys.modules]}}))
"""
WATCH = ["llvmlite", "matplotlib", "tqdm", "multiprocessing", "concurrent.futures"]
DEPS = "import numpy, ml_dtypes, llvmlite.binding"


def once(stmt: str) -> dict:
    env = dict(os.environ, NKI_LITE_DISK_CACHE="0")
    r = subprocess.run([sys.executable, "-c", PROBE.format(stmt=stmt, watch=WATCH)], capture_output=True,
                       text=True, env=env, check=True)
    return json.loads(r.stdout)


def main() -> None:
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 9
    once(DEPS), once("import nki_lite")               # warm the OS file cache and .pyc files
    deps, mine = [], []
    loaded: list[str] = []
    for _ in range(reps):
        deps.append(once(DEPS))
        r = once("import nki_lite")
        mine.append(r)
        loaded = r["loaded"]
    print(f"import time, medians of {reps} fresh interpreters (load average {os.getloadavg()[0]:.1f}; "
          "CPU time is the figure to trust on a busy machine, wall time on a quiet one)")
    print(f"  {'':44s} {'wall ms':>9s} {'CPU ms':>9s}")
    rows = []
    for name, runs in ((f"dependencies ({DEPS})", deps), ("import nki_lite", mine)):
        w, c = statistics.median(x["ms"] for x in runs), statistics.median(x["cpu_ms"] for x in runs)
        rows.append((w, c))
        print(f"  {name:44s} {w:9.1f} {c:9.1f}")
    (dw, dc), (mw, mc) = rows
    verdict = "within" if mc - dc <= BUDGET_MS else "OVER"
    print(f"  {'nki_lite own cost':44s} {mw - dw:9.1f} {mc - dc:9.1f}   budget {BUDGET_MS:.0f} ms: {verdict} (CPU)")
    print(f"  loaded by import nki_lite: {', '.join(loaded) or 'none'} (of {', '.join(WATCH)})")


if __name__ == "__main__":
    main()
