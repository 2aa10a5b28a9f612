"""Run public legacy-dialect NKI kernels unmodified in nki_lite and compare with their numpy references.

None of the kernels is part of this repository. Point the script at local extracts (the search
tool's fetch gives bare git dirs; `git --git-dir=... archive <commit> <path> | tar -x -C DIR`):

    python tutorials/check_corpus.py DIR... [--mode=interpret,jit] [--only=SUBSTR]

Each DIR is recognised by its layout:
- NKIBench (zhang677/AccelOpt `NKIBench/`, with `kernels/*.py` and `reference/*_numpy_*.py`): the
  reference's `get_inputs()` builds the inputs, `transform_to_nki_inputs` reshapes them for the
  kernel, `forward(...)` is the numpy result and `transform_nki_outputs` reshapes the kernel's output.
- aws-neuron-sdk (a tree before the new dialect, e.g. `1db4d74e^`, extract `general/nki`): the
  unit tests of `general/nki/test` (their own inputs and numpy references) run under pytest with
  tutorials/corpus_pytest_plugin.py; the tutorial kernels of `general/nki/examples` run with
  check_aws_examples.py's inputs and references.
- nki-samples (e.g. commit 7af4e4d): `test/unit` with `--simulation-only -m simulation` (the tests
  NKI itself runs without a device), and the tutorials of `src/nki_samples/tutorials`.

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


from check_aws_examples import close, load_path as load  # noqa: E402  (one loader and comparison)


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


# ---------------------------------------------------------------- a repository's own tests

def pytest_checks(label: str, testdir: Path, extra: list[str], pythonpath: list[Path]):
    """A runner for a directory of the repository's own tests (their inputs, their numpy references),
    run by pytest in a subprocess per mode with corpus_pytest_plugin."""
    import json
    import subprocess
    import tempfile

    def run(mode: str, only: list[str]):
        with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as f:
            out = f.name
        env = dict(os.environ, NKI_LITE_MODE=mode, NKI_LITE_CORPUS_RESULTS=out,
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).parent)] + [str(p) for p in pythonpath]
                                              + [os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "corpus_pytest_plugin",
               "-W", "ignore", "--import-mode=importlib", "--continue-on-collection-errors", "--tb=line", *extra,
               str(testdir)]
        if only:
            cmd += ["-k", " or ".join(only)]
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=testdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=3600)
        rows = [json.loads(l) for l in open(out) if l.strip()]
        os.unlink(out)
        if not rows:
            yield f"{testdir.name} (collection)", "FAIL", "no test ran (collection failed)", time.perf_counter() - t0
        for r in rows:
            status = "pass" if r["outcome"] == "passed" else "skip" if r["outcome"] == "skipped" else "FAIL"
            yield r["id"], status, r["error"], 0.0
    return label, run


def tutorial_checks(label: str, root: Path):
    """The tutorial kernels, with tutorials/check_aws_examples.py's inputs and numpy references."""
    import check_aws_examples as ex

    def run(mode: str, only: list[str]):
        for check in ex.CHECKS:
            if only and not any(o in check.__name__ for o in only):
                continue
            os.environ["NKI_LITE_MODE"] = mode
            t0 = time.perf_counter()
            try:
                check(root)
                yield check.__name__, "pass", "", time.perf_counter() - t0
            except Exception as e:  # report every failure, keep going
                yield check.__name__, "FAIL", f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}", \
                    time.perf_counter() - t0
    return label, run


def inprocess_checks(label: str, checks):
    def run(mode: str, only: list[str]):
        for name, check in checks:
            if only and not any(o in name for o in only):
                continue
            os.environ["NKI_LITE_MODE"] = mode
            t0 = time.perf_counter()
            try:
                check()
                yield name, "pass", "", time.perf_counter() - t0
            except Exception as e:  # report every failure, keep going
                detail = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
                yield name, "FAIL", detail, time.perf_counter() - t0
    return label, run


# ---------------------------------------------------------------- main

def sources(root: Path):
    """[(source label, runner)] for a directory, by its layout."""
    root = root.resolve()
    for nb in (root, root / "NKIBench"):
        if (nb / "kernels").is_dir() and (nb / "reference").is_dir():
            return [inprocess_checks("NKIBench", list(nkibench_checks(nb)))]
    out = []
    if (root / "general" / "nki" / "test").is_dir():               # aws-neuron-sdk (legacy tree)
        out.append(pytest_checks("sdk-test", root / "general" / "nki" / "test", [], []))
        if (root / "general" / "nki" / "examples").is_dir():
            out.append(tutorial_checks("sdk-examples", root / "general" / "nki" / "examples"))
    if (root / "src" / "nki_samples").is_dir():                    # nki-samples
        out.append(pytest_checks("samples-test", root / "test" / "unit", ["--simulation-only", "-m", "simulation"],
                                 [root / "src"]))
        out.append(tutorial_checks("samples-tutorials", root / "src" / "nki_samples" / "tutorials"))
    if not out:
        raise SystemExit(f"{root}: not an NKIBench, aws-neuron-sdk or nki-samples tree")
    return out


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        print(__doc__)
        return 2
    modes = ([a.split("=", 1)[1] for a in argv[1:] if a.startswith("--mode=")] or ["interpret,jit"])[0].split(",")
    only = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--only=")]
    summary = []
    failures = 0
    for d in dirs:
        for label, run in sources(d):
            counts = {m: [0, 0, 0] for m in modes}
            for mode in modes:
                for name, status, detail, secs in run(mode, only):
                    k = {"pass": 0, "FAIL": 1, "skip": 2}[status]
                    counts[mode][k] += 1
                    failures += status == "FAIL"
                    print(f"{label:17s} {name[-70:]:70s} {mode:9s} {status:5s} {secs:7.2f}s {detail}", flush=True)
            summary.append((label, d, counts))
    print()
    for label, d, counts in summary:
        per = "; ".join(f"{m}: {p} passed, {f} failed" + (f", {sk} skipped" if sk else "")
                        for m, (p, f, sk) in counts.items())
        print(f"{label} ({d}): {per}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main(sys.argv))
