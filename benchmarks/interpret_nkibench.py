"""CPU seconds of every NKIBench kernel in interpret mode, with a digest of its outputs (issue #13).

    python benchmarks/interpret_nkibench.py NKIBENCH_DIR [--only=SUBSTR ...] [--json=FILE] [--profile=DIR]

For each kernel (zhang677/AccelOpt `NKIBench/`: `kernels/*.py`, `reference/*_numpy_*.py`) the
reference's `get_inputs()` (numpy seed 0) builds the inputs, and the kernel runs once with
NKI_LITE_MODE=interpret. Printed per kernel: CPU seconds of the call (time.process_time, trace
included: this process only, so a loaded machine inflates it less than wall time), wall seconds, and
the sha256 of the output bytes. The digest is the point of `--json`: two runs (before / after an
interpreter change) must give the same digests, which checks bit-identity on the full-size kernels
and not only on the unit tests' small shapes. `--profile=DIR` writes a cProfile file per kernel.
Correctness against the numpy reference is tutorials/check_corpus.py's job, not this script's.
"""
from __future__ import annotations

import cProfile
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import nki_lite.compat
from nki_lite.tools.checkdir import load_module

nki_lite.compat.install()


def kernels(root: Path):
    refs = {p.name.split("_numpy_")[0]: p for p in sorted((root / "reference").glob("*_numpy_*.py"))}
    for kp in sorted((root / "kernels").glob("*.py")):
        stem = kp.stem.rsplit("_", 1)[0]
        if stem in refs:
            yield stem, kp, refs[stem]


def digest(out) -> str:
    h = hashlib.sha256()
    for o in out if isinstance(out, (tuple, list)) else (out,):
        a = np.ascontiguousarray(np.asarray(o))
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def main(argv: list[str]) -> int:
    root = Path(next(a for a in argv[1:] if not a.startswith("--")))
    only = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--only=")]
    jpath = next((a.split("=", 1)[1] for a in argv[1:] if a.startswith("--json=")), None)
    pdir = next((a.split("=", 1)[1] for a in argv[1:] if a.startswith("--profile=")), None)
    os.environ["NKI_LITE_MODE"] = "interpret"
    rows = {}
    for stem, kp, ref in kernels(root):
        if only and not any(o in stem for o in only):
            continue
        r = load_module(str(ref))
        np.random.seed(0)
        args = r.transform_to_nki_inputs(r.get_inputs())
        k = load_module(str(kp))
        prof = cProfile.Profile(time.process_time) if pdir else None      # CPU-time attribution
        c0, w0 = time.process_time(), time.perf_counter()
        if prof:
            prof.enable()
        out = k.kernel(*args)
        if prof:
            prof.disable()
            prof.dump_stats(str(Path(pdir) / f"{stem}.prof"))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        rows[stem] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "digest": digest(out)}
        print(f"{stem:45s} cpu {cpu:8.2f}s  wall {wall:8.2f}s  {rows[stem]['digest']}", flush=True)
        del out, args, k, r
    if jpath:
        Path(jpath).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
