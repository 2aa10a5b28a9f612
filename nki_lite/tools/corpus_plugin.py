"""pytest plugin for `nki-lite check` / tutorials/check_corpus.py: runs a public repository's own NKI
tests on nki_lite.

Loaded with `-p nki_lite.tools.corpus_plugin` in the pytest subprocess that `check` starts (never
imported by nki_lite itself: it changes how legacy simulation modes resolve, for that process only).
It installs nki_lite.compat (so `import neuronxcc.nki` is nki_lite), makes `mode="simulation"` kernels and `nki.simulate_kernel`
follow NKI_LITE_MODE (so the corpus runs on the JIT as well as the interpreter), skips nothing
itself, and writes one JSON line per test (nodeid, outcome, first error line) to
$NKI_LITE_CORPUS_RESULTS. A kernel whose name starts with `test_` is not a test: the repositories run
their files with unittest, which only collects TestCase methods, so it is not collected here either.

A test that checks NKI's simulator raised *exactly* a builtin exception (`assertEqual(type(exc),
IndexError)` after `assertRaises(IndexError)`) fails only on that type comparison when nki_lite raised
its coded error, which subclasses the builtin (NL-E503 IndexOutOfBoundsError is an IndexError): such a
test counts as passed with a note naming the error raised (the error was raised where NKI raises; its
class and message are nki_lite's, by design).

A test whose golden is computed in fp32 for a kernel that asks for a narrower result (ROUNDED_GOLDENS: the
test, the dtype, why) compares with np.allclose against the golden as computed *or* rounded to that dtype
(ml_dtypes, round to nearest even), with the test's own tolerance: a bfloat16 value carries 8 significant
bits, so no correct bf16 result meets np.allclose's default rtol=1e-5 against the unrounded fp32 value.

A test module's `get_target_string()` (nki-samples' tests read the host's instance type from
/sys/devices/virtual/dmi/id/product_name and return early unless it is "trn2") answers the target
nki_lite simulates (config.default_target()): the host here is not a Trainium instance, and the kernel
is what is checked, not the host.

Sweep budgets (set by tools/checkdir.py): $NKI_LITE_CORPUS_TIMEOUT (seconds) stops a test that runs longer
(tools/budget.py's deadline: a FAIL saying so, and the next test runs); $NKI_LITE_CORPUS_EXCLUDE (a JSON list
of [regular expression, reason]) leaves out the collected tests whose node id matches, each written as an
"excluded" line with its reason, never silently. Every warning a test emits is written with its line
("warnings": ["Category: first line", ...]) for the sweep's false-positive audit.
"""
from __future__ import annotations

import builtins
import json
import os
import re

import pytest

import nki_lite.compat

nki_lite.compat.install()

import nki_lite  # noqa: E402
import nki_lite.config  # noqa: E402
from nki_lite.tools import budget  # noqa: E402
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


_EXACT_TYPE = re.compile(r"<class 'nki_lite\.errors\.(\w+)'> != <class '(\w+)'>")


def expected_builtin_error(message: str) -> str | None:
    """The note for an exact-type assertion `<class 'nki_lite.errors.X'> != <class 'B'>` where X is a
    subclass of builtin B (nki_lite raised the error NKI raises, as its own class); None otherwise."""
    m = _EXACT_TYPE.search(message or "")
    if not m:
        return None
    ours, theirs = getattr(nki_lite.errors, m.group(1), None), getattr(builtins, m.group(2), None)
    if not (isinstance(ours, type) and isinstance(theirs, type) and issubclass(ours, theirs)):
        return None
    return f"expected {theirs.__name__} raised (nki_lite's {ours.__name__}); the test compares the exact type"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and call.excinfo is not None \
            and call.excinfo.errisinstance(AssertionError):
        note = expected_builtin_error(str(call.excinfo.value))
        if note:
            report.outcome, report.longrepr = "passed", None
            report.user_properties.append(("corpus_note", note))


ROUNDED_GOLDENS = {
    "test_nki_isa_activation.py::TestNkiIsaExamplesActivation::test_activation": (
        "bfloat16", "Example 2 is `nisa.activation(..., dtype=nl.bfloat16)` stored to an fp32 tensor; its golden "
                    "np.square(b*2+c) is fp32 (values up to 9e4: bf16 steps of 256-512 there)"),
}


def _rounded_allclose(dtype: str):
    import ml_dtypes
    import numpy as np
    strict = np.allclose

    def allclose(a, b, *args, **kwargs):
        rounded = np.asarray(b, dtype=np.float32).astype(getattr(ml_dtypes, dtype)).astype(np.float32)
        return strict(a, b, *args, **kwargs) or strict(a, rounded, *args, **kwargs)
    return allclose


@pytest.fixture(autouse=True)
def _rounded_golden(request, monkeypatch):
    for suffix, (dtype, why) in ROUNDED_GOLDENS.items():
        if request.node.nodeid.endswith(suffix):
            import numpy as np
            monkeypatch.setattr(np, "allclose", _rounded_allclose(dtype))
            request.node.user_properties.append(
                ("corpus_note", f"golden also compared rounded to {dtype}: {why}"))
    yield


@pytest.fixture(autouse=True)
def _simulated_instance_type(request, monkeypatch):
    module = getattr(request, "module", None)
    if module is not None and callable(getattr(module, "get_target_string", None)):
        monkeypatch.setattr(module, "get_target_string", nki_lite.config.default_target)
    yield


def _write(row: dict) -> None:
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """After the repository's own selection (nki-samples' conftest keeps the simulation tests): leave out
    the tests $NKI_LITE_CORPUS_EXCLUDE names, each reported with its reason."""
    table = json.loads(os.environ.get("NKI_LITE_CORPUS_EXCLUDE") or "[]")
    if not table:
        return
    keep = []
    for item in items:
        reason = next((why for pattern, why in table if re.search(pattern, item.nodeid)), None)
        if reason is None:
            keep.append(item)
        else:
            _write({"id": item.nodeid, "outcome": "excluded", "error": reason})
    items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """The test body under the per-test time budget, with every warning it emits recorded."""
    seconds = float(os.environ.get("NKI_LITE_CORPUS_TIMEOUT") or 0)
    with budget.record_warnings() as seen, budget.deadline(seconds):
        yield
    item.user_properties.append(("corpus_warnings", seen))


def _first_line(report) -> str:
    r = report.longrepr
    if r is None:
        return ""
    crash = getattr(getattr(r, "reprcrash", None), "message", None)
    text = crash if crash else str(r)
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[0][:300] if lines else ""


def pytest_runtest_logstart(nodeid, location):
    """A "started" line before each test: if the process dies inside the test (the OOM killer), the
    runner (tools/checkdir.py) knows which test it was."""
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"id": nodeid, "outcome": "started", "error": ""}) + "\n")


def pytest_runtest_logreport(report):
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if not path:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        with open(path, "a") as f:
            props = dict(report.user_properties)
            note = props.get("corpus_note", "")
            f.write(json.dumps({"id": report.nodeid, "outcome": report.outcome,
                                "error": _first_line(report) if report.outcome != "passed" else note,
                                "warnings": props.get("corpus_warnings", [])}) + "\n")


def pytest_collectreport(report):
    """A test file that fails to import counts as one failed entry (its kernels could not run)."""
    path = os.environ.get("NKI_LITE_CORPUS_RESULTS")
    if path and report.outcome == "failed":
        with open(path, "a") as f:
            f.write(json.dumps({"id": f"{report.nodeid} (collection)", "outcome": "failed",
                                "error": collection_error(str(report.longrepr or ""))}) + "\n")
