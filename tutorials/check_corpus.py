"""Run public legacy-dialect NKI kernels unmodified in nki_lite and compare with their numpy references.

None of the kernels is part of this repository. Point the script at local extracts (the search
tool's fetch gives bare git dirs; `git --git-dir=... archive <commit> <path> | tar -x -C DIR`):

    python tutorials/check_corpus.py DIR... [--mode=interpret,jit] [--only=SUBSTR] [-v]

Each DIR is recognised by its layout:
- NKIBench (zhang677/AccelOpt `NKIBench/`, with `kernels/*.py` and `reference/*_numpy_*.py`): the
  reference's `get_inputs()` builds the inputs, `transform_to_nki_inputs` reshapes them for the
  kernel, `forward(...)` is the numpy result and `transform_nki_outputs` reshapes the kernel's output.
- nki-samples / aws-neuron-sdk trees: each kernel has a check in CORPUS_CHECKS (tutorials/
  corpus_checks.py) that builds the inputs its own test builds and a numpy reference of its own.

`import neuronxcc.nki ...` resolves to nki_lite through nki_lite.compat.install(). Prints one line
per kernel and mode (pass/FAIL with the first error line), then a summary per source; exits
non-zero if any check fails. Large NKIBench shapes take minutes in interpret mode.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

import nki_lite.compat

nki_lite.compat.install()


def load(path: Path, name: str | None = None):
    spec = importlib.util.spec_from_file_location(name or path.stem.replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def close(a, b, rtol=1e-4, atol=1e-4):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} vs {b.shape}")
    bad = ~(np.abs(a - b) <= atol + rtol * np.abs(b))
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), a.shape)
        raise AssertionError(f"mismatch: {int(bad.sum())} of {a.size} elements outside rtol={rtol} atol={atol}, "
                             f"first at {tuple(int(x) for x in i)}: {a[i]!r} vs {b[i]!r}")


# ---------------------------------------------------------------- NKIBench

def nkibench_checks(root: Path):
    """(name, check) for every NKIBench kernel with a numpy reference."""
    refs = {p.name.split("_numpy_")[0]: p for p in sorted((root / "reference").glob("*_numpy_*.py"))}
    for kp in sorted((root / "kernels").glob("*.py")):
        stem = kp.stem.rsplit("_", 1)[0]
        ref = refs.get(stem)
        if ref is None:
            continue

        def check(kp=kp, ref=ref):
            r = load(ref, "ref_" + ref.stem)
            np.random.seed(0)
            inputs = r.get_inputs()
            want = r.forward(*[np.array(x, copy=True) for x in inputs])
            args = r.transform_to_nki_inputs(inputs)
            k = load(kp, "kern_" + kp.stem)
            got = k.kernel(*args)
            outs = r.transform_nki_outputs(got, want)
            wants = want if isinstance(want, tuple) else (want,)
            if len(outs) != len(wants):
                raise AssertionError(f"{len(outs)} outputs vs {len(wants)}")
            for o, w in zip(outs, wants):
                # fp32 kernels summing thousands of products in another order: scaled tolerance
                close(o, w, 2e-3, 2e-3 * max(1.0, float(np.max(np.abs(w)))))
        yield stem, check


# ---------------------------------------------------------------- main

def sources(root: Path):
    """(source label, [(name, check)]) for a directory, by its layout."""
    if (root / "kernels").is_dir() and (root / "reference").is_dir():
        return "NKIBench", list(nkibench_checks(root))
    nb = root / "NKIBench"
    if nb.is_dir():
        return "NKIBench", list(nkibench_checks(nb))
    from corpus_checks import checks_for   # the nki-samples / aws-neuron-sdk checks
    return checks_for(root)


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        print(__doc__)
        return 2
    modes = ([a.split("=", 1)[1] for a in argv[1:] if a.startswith("--mode=")] or ["interpret,jit"])[0].split(",")
    only = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--only=")]
    verbose = "-v" in argv
    summary = []
    failures = 0
    for d in dirs:
        label, checks = sources(d)
        counts = {m: [0, 0] for m in modes}
        for name, check in checks:
            if only and not any(o in name for o in only):
                continue
            for mode in modes:
                os.environ["NKI_LITE_MODE"] = mode
                t0 = time.perf_counter()
                try:
                    check()
                    status, detail = "pass", ""
                    counts[mode][0] += 1
                except Exception as e:  # report every failure, keep going
                    failures += 1
                    counts[mode][1] += 1
                    status = "FAIL"
                    detail = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
                    if verbose:
                        tb = traceback.format_exc().splitlines()
                        detail += " | " + " / ".join(l.strip() for l in tb[-8:-1])[:600]
                print(f"{label:10s} {name:48s} {mode:9s} {status:5s} {time.perf_counter() - t0:7.2f}s {detail}",
                      flush=True)
        summary.append((label, d, counts))
    print()
    for label, d, counts in summary:
        per = ", ".join(f"{m}: {p} passed, {f} failed" for m, (p, f) in counts.items())
        print(f"{label} ({d}): {per}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main(sys.argv))
