"""pytest plugin for `nki-lite check` / tutorials/check_corpus.py: runs a public repository's own NKI
tests on nki_lite.

Loaded with `-p nki_lite.tools.corpus_plugin` in the pytest subprocess that `check` starts (never
imported by nki_lite itself: it changes how legacy simulation modes resolve, for that process only).
It installs nki_lite.compat (so `import neuronxcc.nki` is nki_lite), makes `mode="simulation"` kernels and `nki.simulate_kernel`
follow NKI_LITE_MODE (so the corpus runs on the JIT as well as the interpreter), skips nothing
itself, and writes one JSON line per test (nodeid, outcome, first error line) to
$NKI_LITE_CORPUS_RESULTS. A kernel whose name starts with `test_` is not a test: the repositories run
their files with unittest, which only collects TestCase methods, so it is not collected here either.
"""
from __future__ import annotations

import json
import os

import nki_lite.compat

nki_lite.compat.install()

import nki_lite  # noqa: E402
from nki_lite.tools.checkdir import collection_error  # noqa: E402
from nki_lite.runtime import kernel as _k  # noqa: E402

_k._LEGACY_MODES["simulation"] = None          # the mode comes from NKI_LITE_MODE


def _simulate(kernel, *args, **kwargs):
    k = kernel if isinstance(kernel, _k.Kernel) else _k.Kernel(kernel)
    return k(*args, **kwargs)


nki_lite.simulate_kernel = _simulate
_k.simulate_kernel = _simulate


def pytest_pycollect_makeitem(collector, name, obj):
    """`@nki.jit def test_nl_broadcast(in_tensor)` is a kernel the file's TestCase calls, not a test
    (pytest would follow the Kernel's __wrapped__ and report a missing `in_tensor` fixture)."""
    if isinstance(obj, _k.Kernel):
        return []
    return None


def _first_line(report) -> str:
    r = report.longrepr
    if r is None:
        return ""
    crash = getattr(getattr(r, "reprcrash", None), "message", None)
    text = crash if crash else str(r)
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[0][:300] if lines else ""


def pytest_runtest_logreport(report):
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if not path:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        with open(path, "a") as f:
            f.write(json.dumps({"id": report.nodeid, "outcome": report.outcome,
                                "error": _first_line(report) if report.outcome != "passed" else ""}) + "\n")


def pytest_collectreport(report):
    """A test file that fails to import counts as one failed entry (its kernels could not run)."""
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if path and report.outcome == "failed":
        with open(path, "a") as f:
            f.write(json.dumps({"id": f"{report.nodeid} (collection)", "outcome": "failed",
                                "error": collection_error(str(report.longrepr or ""))}) + "\n")
