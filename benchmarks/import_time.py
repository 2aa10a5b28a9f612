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
t0 = time.perf_counter()
{stmt}
t1 = time.perf_counter()
print(json.dumps({{"ms": (t1 - t0) * 1e3, "loaded": [m for m in {watch!r} if m in sys.modules]}}))
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
        deps.append(once(DEPS)["ms"])
        r = once("import nki_lite")
        mine.append(r["ms"])
        loaded = r["loaded"]
    d, m = statistics.median(deps), statistics.median(mine)
    print(f"import time, medians of {reps} fresh interpreters (load average {os.getloadavg()[0]:.1f})")
    print(f"  dependencies ({DEPS}): {d:8.1f} ms  (min {min(deps):.1f})")
    print(f"  import nki_lite:                       {m:8.1f} ms  (min {min(mine):.1f})")
    print(f"  nki_lite's own cost:                   {m - d:8.1f} ms  (budget {BUDGET_MS:.0f} ms: "
          f"{'within' if m - d <= BUDGET_MS else 'OVER'})")
    print(f"  loaded by import nki_lite: {', '.join(loaded) or 'none'} (of {', '.join(WATCH)})")


if __name__ == "__main__":
    main()
