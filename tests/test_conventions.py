"""Library conventions: progress bars (tqdm or the plain fallback), the "nki_lite" logger, py.typed and
a type check of the public modules this layer owns (mypy, in the test extra)."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import types

import pytest

from nki_lite.tools.progress import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the public modules of the library-and-tools layer, plus the package facade (nki_lite/__init__.py)
TYPED = ["nki_lite/__init__.py", "nki_lite/__main__.py", "nki_lite/cli.py", "nki_lite/interop.py",
         "nki_lite/version.py", "nki_lite/tools", "nki_lite/tuning"]


def test_plain_progress_counts_on_stderr_only(monkeypatch, capsys):
    monkeypatch.setenv("NKI_LITE_PROGRESS", "plain")
    assert list(progress(range(3), desc="work")) == [0, 1, 2]
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["work: 1/3", "work: 2/3", "work: 3/3"]


def test_progress_off_and_unsized_iterables(monkeypatch, capsys):
    monkeypatch.setenv("NKI_LITE_PROGRESS", "off")
    assert list(progress(iter("ab"), desc="x")) == ["a", "b"]
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("NKI_LITE_PROGRESS", "plain")
    list(progress(iter("ab"), desc="x"))
    assert capsys.readouterr().err.splitlines() == ["x: 1", "x: 2"]


def test_auto_uses_tqdm_when_installed_else_plain(monkeypatch, capsys):
    monkeypatch.setenv("NKI_LITE_PROGRESS", "auto")
    seen = {}

    def fake_tqdm(items, total=None, desc="", file=None, leave=True):
        seen.update(total=total, desc=desc, file=file)
        return items

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=fake_tqdm))
    assert list(progress([1, 2], desc="bar")) == [1, 2]
    assert seen == {"total": 2, "desc": "bar", "file": sys.stderr}
    monkeypatch.setitem(sys.modules, "tqdm", None)                 # not installed: import fails
    list(progress([1, 2], desc="bar"))
    assert capsys.readouterr().err.splitlines() == ["bar: 1/2", "bar: 2/2"]


def test_progress_on_a_terminal_rewrites_one_line(monkeypatch):
    monkeypatch.setenv("NKI_LITE_PROGRESS", "plain")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    list(progress(range(2), desc="t"))
    assert err.getvalue() == "\rt: 1/2\rt: 2/2\n"


def test_library_logger_has_a_null_handler_and_the_level_knob():
    import nki_lite  # noqa: F401
    log = logging.getLogger("nki_lite")
    assert any(isinstance(h, logging.NullHandler) for h in log.handlers)
    code = "import logging, nki_lite; print(logging.getLogger('nki_lite').level)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, NKI_LITE_LOG_LEVEL="DEBUG"), check=True)
    assert r.stdout.strip() == str(logging.DEBUG)


def test_py_typed_ships_with_the_package():
    import nki_lite
    assert os.path.isfile(os.path.join(os.path.dirname(nki_lite.__file__), "py.typed"))
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'nki_lite = ["py.typed"]' in f.read()


def test_public_modules_type_check(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra (pip install -e '.[test]')")
    cmd = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
           "--no-error-summary", "--cache-dir", str(tmp_path / "mypy"), *TYPED]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


# names the package passes between its own processes, not knobs a user sets
INTERNAL_ENV = {"NKI_LITE_CORPUS_RESULTS": "the result file `check` hands its pytest subprocess",
                "NKI_LITE_CORPUS_TIMEOUT": "the per-test budget `check` hands its pytest subprocess",
                "NKI_LITE_CORPUS_EXCLUDE": "the cases `check` tells its pytest subprocess to leave out"}


def test_every_knob_the_package_reads_is_registered_and_documented():
    import re

    from nki_lite import config
    found = set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "nki_lite")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    found |= set(re.findall(r"[\"'](NKI_LITE_[A-Z0-9_]+)", fh.read()))
    assert found - set(INTERNAL_ENV) <= set(config.KNOBS), sorted(found - set(INTERNAL_ENV) - set(config.KNOBS))
    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as fh:
        assert fh.read().rstrip("\n") == config.render_docs().rstrip("\n")   # regenerated
