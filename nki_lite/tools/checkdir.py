"""`nki-lite check DIR`: run every kernel file with a numpy check in a directory (a repository of NKI
kernels in CI), on one or both backends; also the engine of tutorials/check_corpus.py.

Contract:
- `sources(root, tutorials=None, generic=True, timeout=None, exclusions=())` recognises a directory by its
  layout and returns [(label, run)], where `run(mode, only)` yields (name, status, detail, seconds[,
  warnings]) with status pass / FAIL / skip / left out:
  * NKIBench (`kernels/*.py` + `reference/*_numpy_*.py`): each reference's inputs, the kernel's
    result through the reference's transforms, compared with its `forward` (scaled tolerance);
  * aws-neuron-sdk (legacy `general/nki/test`) and nki-samples (`test/unit`, simulation tests): the
    repository's own pytest tests in a subprocess per mode with nki_lite/tools/corpus_plugin.py;
    their tutorial kernels too when `tutorials(label, dir)` gives them as [(name, check)]
    (check_corpus.py does, with its own inputs);
  * any other directory: every `*.py` file below it (not hidden, not conftest) that imports NKI is
    loaded (legacy imports through nki_lite.compat) and each module-level function named `check*`
    or `test*` that takes no required argument is run as one check (it raises on a mismatch, e.g.
    with numpy.testing or nki_lite.testing.assert_close). A kernel file with no such function is a
    skip ("no numpy check"); files of either NKI dialect are checked alike.
- `run(dirs, modes, only, show, bar, timeout=, exclusions=)` prints one line per check and mode via
  `show`, then one summary line per source, and returns (failures, passes) (the CI exit code is non-zero
  if any failed, and for `nki-lite check` also if nothing passed: a CI job that checks nothing is a
  mistake); NKI_LITE_MODE is restored afterwards. `timeout` (seconds) is each check's wall-clock budget
  (tools/budget.py: past it the check is a FAIL saying so and the sweep goes on); `exclusions`
  (budget.Exclusion rows) leave cases out with a reason: status "left out", counted apart and listed
  after the summary with the reason. Runners may yield a fifth field, the check's warnings; `run`
  prints every distinct warning with the number of checks that emitted it and one example (the
  false-positive audit).
  `bar=True` adds a progress bar on stderr (tools/progress.py).
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from . import budget
from .kernelfile import dialect, load_module
from .progress import progress

Result = tuple[str, str, str, float]
Runner = Callable[[str, list[str]], Iterator[Result]]


def collection_error(text: str) -> str:
    """The cause of a collection failure: pytest's first line only says "ImportError while importing
    test module", so report the last exception line (`E   ModuleNotFoundError: No module named ...`),
    which names the missing module (e.g. scipy for nki-samples' SD attention tests)."""
    errs = [l[1:].strip() for l in text.splitlines() if l.startswith("E ") and l[1:].strip()]
    if errs:
        return errs[-1][:300]
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[0][:300] if lines else ""


def _detail(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


_CHUNK = 1 << 22                 # elements compared at a time: float64 temporaries stay at ~32 MiB each


def close(a, b, rtol=1e-4, atol=1e-4):
    """Scaled-tolerance comparison in float64, a chunk at a time (NKIBench's [16, 4096, 4096] results
    would otherwise need several 2 GiB temporaries, past the sweep's memory cap)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} vs {b.shape}")
    a, b = a.reshape(-1), b.reshape(-1)
    if rtol == 0 and atol == 0:
        differ = sum(int(np.sum(a[i:i + _CHUNK] != b[i:i + _CHUNK])) for i in range(0, a.size, _CHUNK))
        if differ:
            raise AssertionError(f"not bit-identical: {differ} elements differ")
        return
    err = 0.0
    for i in range(0, a.size, _CHUNK):
        x, y = a[i:i + _CHUNK].astype(np.float64), b[i:i + _CHUNK].astype(np.float64)
        err = max(err, float(np.max(np.abs(x - y) / (atol + rtol * np.abs(y)))))
    if not err <= 1.0:
        raise AssertionError(f"mismatch: max scaled error {err:.3g}")


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
            r = load_module(str(ref))
            np.random.seed(0)
            inputs = r.get_inputs()
            want = r.forward(*[np.array(x, copy=True) for x in inputs])
            args = r.transform_to_nki_inputs(inputs)
            k = load_module(str(kp))
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

def _exit_reason(code: int) -> str:
    if code < 0:
        import signal
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def _pytest_once(cmd: list[str], env: dict, testdir: Path) -> tuple[list[dict], str | None, int]:
    """Run pytest once; (the plugin's result rows, the test it died in or None, pytest's exit code)."""
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as f:
        out = f.name
    try:
        code = subprocess.run(cmd, env=dict(env, NKI_LITE_CORPUS_RESULTS=out), cwd=testdir, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=_RUN_LIMIT).returncode
    except subprocess.TimeoutExpired:      # subprocess.run killed it: the test it was in fails, the rest resume
        code = -9
    with open(out) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    os.unlink(out)
    rows = [r for r in lines if r["outcome"] != "started"]
    finished = {r["id"] for r in rows}
    started = [r["id"] for r in lines if r["outcome"] == "started" and r["id"] not in finished]
    return rows, (started[-1] if started and code not in (0, 1, 5) else None), code


_RESUMES = 8
_RUN_LIMIT = 4 * 3600          # one pytest run; the per-test budget (NKI_LITE_CORPUS_TIMEOUT) is the real limit


def _mode_exclusions(exclusions, label: str, mode: str) -> list[tuple[str, str]]:
    return [(e.pattern, e.reason) for e in exclusions or () if e.label == label and (not e.modes or mode in e.modes)]


def pytest_checks(label: str, testdir: Path, extra: list[str], pythonpath: list[Path], timeout: float | None = None,
                  exclusions=()):
    """A runner for a directory of the repository's own tests (their inputs, their numpy references),
    run by pytest in a subprocess per mode with nki_lite's corpus plugin. A subprocess that dies inside
    a test (a signal: the OOM killer when the machine is shared, a crash) makes that test a FAIL naming the
    signal, and pytest resumes after it (up to _RESUMES times): the other tests still run, and no death
    looks like a shorter clean run."""
    def run(mode: str, only: list[str]):
        env = dict(os.environ, NKI_LITE_MODE=mode, NKI_LITE_CORPUS_TIMEOUT=str(timeout or 0),
                   NKI_LITE_CORPUS_EXCLUDE=json.dumps(_mode_exclusions(exclusions, label, mode)),
                   PYTHONPATH=os.pathsep.join([str(p) for p in pythonpath] + [os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "nki_lite.tools.corpus_plugin",
               "-W", "ignore", "--import-mode=importlib", "--continue-on-collection-errors", "--tb=line", *extra,
               str(testdir)]
        if only:
            cmd += ["-k", " or ".join(only)]
        t0 = time.perf_counter()
        rows, died, code = _pytest_once(cmd, env, testdir)
        if not rows and died is None and not (only and code == 5):     # 5: --only selected no test here
            yield f"{testdir.name} (collection)", "FAIL", "no test ran (collection failed)", time.perf_counter() - t0
        for _ in range(_RESUMES):
            if died is None:
                break
            rows.append({"id": died, "outcome": "failed",
                         "error": f"pytest died in this test ({_exit_reason(code)}); the run resumed after it"})
            done = [a for r in rows for a in ("--deselect", r["id"])]
            more, died, code = _pytest_once(cmd + done, env, testdir)
            rows += more
        for r in rows:
            status = {"passed": "pass", "skipped": "skip", "excluded": "left out"}.get(r["outcome"], "FAIL")
            yield r["id"], status, r["error"], 0.0, r.get("warnings", [])
        if code not in (0, 1, 5) and (rows or died):
            yield (f"{testdir.name} (stopped)", "FAIL", f"pytest exited with {_exit_reason(code)} after "
                   f"{len(rows)} results{f' in {died}' if died else ''}", time.perf_counter() - t0)
    return label, run


def inprocess_checks(label: str, checks, timeout: float | None = None, exclusions=()):
    """A runner over in-process (name, check) pairs: a check that raises _NoCheck is a skip, any
    other exception a FAIL (shared by NKIBench, the tutorial kernels and the generic file checks);
    each check runs under the time budget with its warnings recorded."""
    def run(mode: str, only: list[str]):
        for name, check in checks:
            if only and not any(o in name for o in only):
                continue
            reason = budget.excluded(exclusions, label, name, mode)
            if reason is not None:
                yield name, "left out", reason, 0.0
                continue
            os.environ["NKI_LITE_MODE"] = mode
            t0 = time.perf_counter()
            with budget.record_warnings() as seen:
                try:
                    with budget.deadline(timeout):
                        check()
                    status, detail = "pass", ""
                except _NoCheck as e:
                    status, detail = "skip", str(e)
                except Exception as e:  # report every failure (a timeout, a MemoryError under a cap), keep going
                    status, detail = "FAIL", _detail(e)
            yield name, status, detail, time.perf_counter() - t0, seen
    return label, run


# ---------------------------------------------------------------- any directory of kernel files

def _python_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")) and d not in ("venv", "node_modules"))
        out += [Path(dirpath) / f for f in sorted(files) if f.endswith(".py") and f != "conftest.py"
                and not f.startswith(".")]
    return out


def _zero_arg(fn) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def file_checks(root: Path) -> list[tuple[str, Callable[[], None]]]:
    """(name, check) for each kernel file below root; a check that raises is a FAIL."""
    out: list[tuple[str, Callable[[], None]]] = []
    for path in _python_files(root):
        rel = str(path.relative_to(root))
        try:
            kind, _ = dialect(str(path))
        except SyntaxError as e:
            out.append((rel, _raiser(e)))
            continue
        if kind != "none":              # legacy, nki_lite or the current dialect
            out.append((rel, _file_runner(path)))
    return out


def _raiser(e: BaseException) -> Callable[[], None]:
    def check() -> None:
        raise e
    return check


class _NoCheck(Exception):
    """A kernel file without a numpy check: reported as a skip."""


def _file_runner(path: Path):
    def run_file():
        mod = load_module(str(path))
        fns = [(n, f) for n, f in sorted(vars(mod).items())
               if n.startswith(("check", "test")) and inspect.isfunction(f) and f.__module__ == mod.__name__]
        runnable = [(n, f) for n, f in fns if _zero_arg(f)]
        if not runnable:
            raise _NoCheck("no numpy check (a check*/test* function without required arguments)"
                           if not fns else f"{', '.join(n for n, _ in fns)} need arguments (run them under pytest)")
        for _, f in runnable:
            f()
    return run_file


def generic_checks(label: str, root: Path):
    checks = file_checks(root)
    label, run = inprocess_checks(label, checks)
    run.count = len(checks)  # type: ignore[attr-defined]
    return label, run


# ---------------------------------------------------------------- layouts and the loop

def _sdk_root(root: Path) -> Path | None:
    """The legacy aws-neuron-sdk `general/nki` directory: the repository's root, or `general/nki` extracted
    on its own (its test/ and examples/ next to the NKI guides)."""
    for d in (root / "general" / "nki", root):
        if (d / "test").is_dir() and (d / "examples").is_dir() and (d / "nki_direct_allocation_guide.rst").is_file():
            return d
    return None


def sources(root: Path, tutorials: Callable[[str, Path], list] | None = None, generic: bool = True,
            timeout: float | None = None, exclusions=()) -> list[tuple[str, Runner]]:
    """[(source label, runner)] for a directory, by its layout; every runner keeps the time budget and
    the exclusions."""
    root = root.resolve()
    budgets = dict(timeout=timeout, exclusions=exclusions)
    for nb in (root, root / "NKIBench"):
        if (nb / "kernels").is_dir() and (nb / "reference").is_dir():
            return [inprocess_checks("NKIBench", list(nkibench_checks(nb)), **budgets)]
    out = []
    sdk = _sdk_root(root)
    if sdk is not None:                                            # aws-neuron-sdk (legacy tree)
        out.append(pytest_checks("sdk-test", sdk / "test", [], [], **budgets))
        if tutorials and (sdk / "examples").is_dir():
            out.append(inprocess_checks("sdk-examples", tutorials("sdk-examples", sdk / "examples"), **budgets))
    if (root / "src" / "nki_samples").is_dir():                    # nki-samples
        out.append(pytest_checks("samples-test", root / "test" / "unit", ["--simulation-only", "-m", "simulation"],
                                 [root / "src"], **budgets))
        if tutorials:
            label = "samples-tutorials"
            out.append(inprocess_checks(label, tutorials(label, root / "src" / "nki_samples" / "tutorials"), **budgets))
    if not out and generic:
        out.append(generic_checks("files", root))
    if not out:
        raise SystemExit(f"{root}: not an NKIBench, aws-neuron-sdk or nki-samples tree")
    return out


def run(dirs: list[Path], modes: list[str], only: list[str], show: Callable[[str], None] = print,
        bar: bool = False, tutorials=None, generic: bool = True, timeout: float | None = None,
        exclusions=()) -> tuple[int, int]:
    saved = os.environ.get("NKI_LITE_MODE")
    try:
        return _run(dirs, modes, only, show, bar, lambda d: sources(d, tutorials, generic, timeout, exclusions))
    finally:                     # the checks set NKI_LITE_MODE per mode: leave the caller's as it was
        if saved is None:
            os.environ.pop("NKI_LITE_MODE", None)
        else:
            os.environ["NKI_LITE_MODE"] = saved


_STATUS = {"pass": 0, "FAIL": 1, "skip": 2, "left out": 3}


def _run(dirs, modes, only, show, bar, sources_of) -> tuple[int, int]:
    summary, left_out = [], []
    audit: dict[str, list[str]] = {}          # warning line -> the checks that emitted it
    failures = passes = 0
    for d in dirs:
        for label, runner in sources_of(d):
            counts = {m: [0, 0, 0, 0] for m in modes}
            for mode in modes:
                rows = runner(mode, only)
                if bar:
                    rows = progress(rows, total=getattr(runner, "count", None), desc=f"check {label} ({mode})")
                for name, status, detail, secs, *seen in rows:
                    counts[mode][_STATUS[status]] += 1
                    failures += status == "FAIL"
                    passes += status == "pass"
                    if status == "left out":
                        left_out.append(f"left out: {label} {name} ({mode}): {detail}")
                    for line in (seen[0] if seen else []):
                        audit.setdefault(line, []).append(f"{label} {name} ({mode})")
                    show(f"{label:17s} {name[-70:]:70s} {mode:9s} {status:5s} {secs:7.2f}s {detail}")
            summary.append((label, d, counts))
    show("")
    for label, d, counts in summary:
        per = "; ".join(f"{m}: {p} passed, {f} failed" + (f", {sk} skipped" if sk else "")
                        + (f", {lo} left out" if lo else "") for m, (p, f, sk, lo) in counts.items())
        show(f"{label} ({d}): {per}")
    for line in left_out:
        show(line)
    if audit:
        show(f"warnings ({len(audit)} distinct; count of checks, first check):")
    for line, where in sorted(audit.items()):
        show(f"  {len(where):4d}  {line}  [{where[0]}]")
    return failures, passes
