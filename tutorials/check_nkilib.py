"""Run the NKI Library's own fast tests in its CPU-simulation mode on nki_lite, kernel by kernel.

The library is not part of this repository. Point the script at a local extract of aws-neuron/nki-library
(its `src/` and `test/`; `git --git-dir=<bare clone> archive HEAD src test | tar -x -C DIR`):

    python tutorials/check_nkilib.py LIBDIR [--mode=interpret,jit] [--only=SUBSTR,...] [--tests]

For each mode (NKI_LITE_MODE=interpret / jit) the script copies LIBDIR to a scratch directory (the
library's harness writes its artifacts beside the tests) and runs, from there,

    python -m pytest -p nkilib_pytest_plugin test/integration --test-mode simulation -m fast

The library's own harness (test/utils/test_orchestrator.py, simulation_setup.py) then runs each kernel
through `nki.cpu_simulate(kernel)[lnc]`, which the plugin (tutorials/nkilib_pytest_plugin.py) makes
nki_lite's launch, and compares the outputs with the tests' own torch/numpy references. torch is needed
by the tests (a CPU wheel in the venv; it is not an nki_lite dependency and CI does not run this), and the
library's harness imports pytest-html, fabric2, boto3, aws-embedded-metrics, allpairspy, plotext, filelock,
debugpy, scipy, paramiko and attrs (pytest-timeout enforces --case-timeout).

A "kernel" is a test file of test/integration/nkilib/** that has `@pytest.mark.fast` cases; it passes in
a mode when every fast case that ran passed. By default the first --max-cases=3 fast cases of each file
that the library's conftest does not skip as slow in simulation run (the full fast set takes hours on two
shared cores); --max-cases=0 runs them all. A file whose fast cases the library skips, all of them, as too
large for AWS's CPU simulator runs its first --max-cases of them anyway (that skip is about the other
simulator's speed; `--keep-slow-skips` keeps it). A case over --case-timeout seconds fails. Multi-core kernels (MULTI_CORE below: collectives, LNC=2-only) are reported but not
counted among the single-core kernels. The summary prints, per mode, kernels passing / single-core
kernels, then per kernel: pass / fail with the first error of its first failing case.
Exits 0: the output is a report.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = "test/integration/nkilib"
# Test files whose kernels need more than one NeuronCore (not counted as single-core kernels), with why.
MULTI_CORE = {
    "experimental/collectives/test_collectives.py": "collectives (all-reduce / all-gather across ranks)",
    "experimental/collectives/test_fg_allgather.py": "collectives (fine-grained all-gather)",
    "experimental/collectives/test_fgcc.py": "collectives (fine-grained collective compute)",
    "experimental/collectives/test_sb2sb_allgather.py": "collectives (SBUF-to-SBUF all-gather)",
}

# Test files that cannot run at nki-library d2ad3a5 whatever the simulator (the library's own defects,
# seen as collection errors): reported, and left out of the single-core count (the summary also gives
# the figure with them counted as failures).
UPSTREAM_BROKEN = {
    "core/mlp/test_mlp_cte.py": "src/nkilib_src/nkilib/core/mlp/mlp.py:203 IndentationError (a docstring pasted twice)",
    "core/mlp/test_mlp_tkg.py": "src/nkilib_src/nkilib/core/mlp/mlp.py:203 IndentationError",
    "experimental/transformer/test_transformer_tkg.py": "imports core/mlp/mlp.py (IndentationError)",
    "core/qkv/test_qkv_tkg.py": "NameError: Platforms is used in a decorator but never imported",
    "experimental/subkernels/test_topk_reduce.py": "imports nkilib_src.nkilib.experimental.subkernels, absent from src/",
}
# Test functions broken upstream, deselected (their kernels' other fast cases still run).
UPSTREAM_BROKEN_TESTS = {
    "test_flat_kv_strided_mask_generation": "test_gen_mask_tkg.py reads kernel_input['mask_out_hbm'], which the test "
                                            "itself names 'mask_out_hbm.must_alias_input' (KeyError before any check)",
}


def fast_files(lib: Path) -> list[str]:
    root = lib / TESTS
    return sorted(str(p.relative_to(root)) for p in root.rglob("test_*.py") if "pytest.mark.fast" in p.read_text())


def run_mode(lib: Path, mode: str, only: list[str], timeout: int, case_timeout: int, max_cases: int,
             unskip_slow: bool = True) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="nkilib-") as scratch:
        work = Path(scratch) / "lib"
        shutil.copytree(lib, work, ignore=shutil.ignore_patterns("neuron_test_output", "build", "__pycache__"))
        results = Path(scratch) / "results.jsonl"
        files = [f"{TESTS}/{f}" for f in fast_files(lib) if not only or any(o in f for o in only)]
        env = dict(os.environ, NKI_LITE_MODE=mode, NKI_LITE_CORPUS_RESULTS=str(results), NKILIB_MAX_CASES=str(max_cases),
                   NKILIB_UNSKIP_SLOW_FILES="1" if unskip_slow else "0",
                   PYTHONPATH=os.pathsep.join([str(HERE), str(work / "src"), os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "pytest", "-p", "nkilib_pytest_plugin", "-p", "no:cacheprovider", "-q",
               "--test-mode", "simulation", "-m", "fast", "--continue-on-collection-errors",
               "-k", " and ".join(f"not {t}" for t in UPSTREAM_BROKEN_TESTS), "--output-directory", str(Path(scratch) / "out"), *files]
        if case_timeout and importlib.util.find_spec("pytest_timeout"):
            cmd.insert(3, f"--timeout={case_timeout}")   # pytest-timeout (auto-loaded): a case over it fails
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            if not results.exists():
                print(f"[{mode}] pytest reported nothing; its output ends:\n" + (proc.stdout + proc.stderr)[-3000:])
        except subprocess.TimeoutExpired:
            print(f"[{mode}] pytest timed out after {timeout}s; reporting the cases that finished")
        if not results.exists():
            return []
        return [json.loads(line) for line in results.read_text().splitlines() if line.strip()]


def by_kernel(entries: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0, "error": ""})
    for e in entries:
        path = e["id"].split("::")[0].removesuffix(" (collection)")
        key = path.split("integration/nkilib/", 1)[-1]     # node ids are relative to test/ (pytest.ini)
        k = out[key]
        k[e["outcome"]] = k.get(e["outcome"], 0) + 1
        if e["outcome"] == "failed" and not k["error"]:
            k["error"] = e["error"]
    return out


VIEW_METHODS = ("'ap'", "'select'", "'slice'", "'expand_dim'", "'squeeze_dim'", "'flatten_dims'", "'reshape_dim'",
                "'permute'", "'rearrange'", "'broadcast'", "'indirect'", "'vector_select'")


def reason(error: str) -> str:
    """The blocking feature behind a kernel's first error, for the closing list."""
    if "has no attribute" in error and any(m in error for m in VIEW_METHODS):
        return "views (tensor view methods: the views branch)"
    if "NL-E106" in error:
        return "views (reshape of an on-chip tensor: the views branch)"
    if ("NL-E802" in error or "NL-E807" in error) and "pid" in error:
        return "Python control flow on nl.program_id (LNC=2 branches: programs traced one by one, not built)"
    if "NL-E802" in error or "NL-E807" in error:
        return "Python control flow on symbolic indices (NL-E802 / NL-E807)"
    if "NL-E913" in error:
        return "not built: " + error.split("]", 1)[-1].strip().split(" is not built")[0]
    if "Timeout" in error:
        return "over the case timeout"
    if "[NL-" not in error and ("AssertionError" in error or "mismatch" in error.lower()
                                or "allclose" in error.lower()):      # not NL-E103 shape_mismatch
        return "output differs from the reference"
    return "other: " + error[:120]


def status(k: dict | None) -> str:
    if k is None:
        return "no result"
    if k["failed"]:
        return "fail"
    return "pass" if k["passed"] else "skipped"


def report(lib: Path, modes: list[str], results: dict[str, dict], only: list[str], show_tests: bool) -> None:
    files = [f for f in fast_files(lib) if not only or any(o in f for o in only)]
    single = [f for f in files if f not in MULTI_CORE and f not in UPSTREAM_BROKEN]
    for f in files:
        cells = []
        for m in modes:
            k = results[m].get(f)
            cells.append(f"{m}: {status(k)}" + (f" ({k['passed']}/{k['passed'] + k['failed']})" if k else ""))
        tag = " [multi-core: " + MULTI_CORE[f] + "]" if f in MULTI_CORE else ""
        tag += " [broken upstream: " + UPSTREAM_BROKEN[f] + "]" if f in UPSTREAM_BROKEN else ""
        print(f"{f}{tag}: " + "; ".join(cells))
        errors = {results[m][f]["error"] for m in modes if f in results[m] and results[m][f]["error"]}
        for e in sorted(errors):
            print(f"    first error: {e}")
    print()
    for m in modes:
        ok = [f for f in single if status(results[m].get(f)) == "pass"]
        print(f"[{m}] kernels passing: {len(ok)} / {len(single)} single-core kernels "
              f"({100 * len(ok) // max(len(single), 1)}%); not counted: "
              f"{sum(f in MULTI_CORE for f in files)} multi-core, {sum(f in UPSTREAM_BROKEN for f in files)} broken "
              f"upstream (counted as failures: {len(ok)} / {len(single) + sum(f in UPSTREAM_BROKEN for f in files)})")
    both = [f for f in single if all(status(results[m].get(f)) == "pass" for m in modes)]
    print(f"[{' and '.join(modes)}] kernels passing in every mode: {len(both)} / {len(single)}")
    print("\nremaining single-core kernels, by reason (first error in the first mode that failed):")
    by_reason: dict[str, list[str]] = defaultdict(list)
    for f in single:
        if f in both:
            continue
        err = next((results[m][f]["error"] for m in modes if f in results[m] and results[m][f]["error"]), "")
        by_reason[reason(err) if err else "no case ran"].append(f)
    for r, fs in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(fs)}  {r}: " + ", ".join(fs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("libdir", type=Path)
    ap.add_argument("--mode", default="interpret,jit")
    ap.add_argument("--only", default="", help="comma-separated substrings of test file paths")
    ap.add_argument("--timeout", type=int, default=3000, help="seconds per mode")
    ap.add_argument("--case-timeout", type=int, default=120,
                    help="seconds per test case (needs pytest-timeout; 0: none)")
    ap.add_argument("--max-cases", type=int, default=3,
                    help="fast cases per test file (the first ones the library does not skip; 0: all)")
    ap.add_argument("--tests", action="store_true", help="also print every test case's outcome")
    ap.add_argument("--keep-slow-skips", action="store_true",
                    help="do not run files whose fast cases the library skips, all of them, as slow in simulation")
    ap.add_argument("--fast-mx-inputs", action="store_true",
                    help="generate the MX tests' data with tutorials/nkilib_fast_inputs.py (vectorised; the "
                         "library's own generator loops in Python over every 8x4 group)")
    a = ap.parse_args(argv)
    if a.fast_mx_inputs:
        os.environ["NKILIB_FAST_MX_INPUTS"] = "1"      # read by the plugin in the pytest process
    modes = [m for m in a.mode.split(",") if m]
    only = [o for o in a.only.split(",") if o]
    results = {}
    for m in modes:
        entries = run_mode(a.libdir.resolve(), m, only, a.timeout, a.case_timeout, a.max_cases,
                           unskip_slow=not a.keep_slow_skips)
        if a.tests:
            for e in entries:
                print(f"[{m}] {e['outcome']}: {e['id']}" + (f"  -- {e['error']}" if e["error"] else ""))
        results[m] = by_kernel(entries)
    report(a.libdir.resolve(), modes, results, only, a.tests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
