"""The knob snapshot cached calls are keyed by (runtime/knobs.py): always what os.environ says now,
re-read only after an environment change, and no private CPython attribute read for it."""
import ast
import os

import pytest

from nki_lite.runtime import knobs


def direct():
    return tuple(os.environ.get(k) for k in knobs.STAMP_KNOBS)


def test_unchanged_environment_reuses_the_snapshot():
    first = knobs.stamp()
    assert first == direct()
    assert knobs.stamp() is first                     # no re-read without an environment change


@pytest.mark.parametrize("how", ["setitem", "delitem", "update", "pop", "monkeypatch", "other knob"])
def test_every_way_of_changing_os_environ_is_seen(monkeypatch, how):
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "0")
    monkeypatch.setenv("NKI_LITE_SHUFFLE", "")                  # recorded, so "update" below is undone
    monkeypatch.delenv("NKI_LITE_SHUFFLE")
    before = knobs.stamp()
    if how == "setitem":
        os.environ["NKI_LITE_DEBUG_NANS"] = "1"
    elif how == "delitem":
        del os.environ["NKI_LITE_DEBUG_NANS"]
    elif how == "update":
        os.environ.update({"NKI_LITE_DEBUG_NANS": "1", "NKI_LITE_SHUFFLE": "3"})
    elif how == "pop":
        os.environ.pop("NKI_LITE_DEBUG_NANS")
    elif how == "monkeypatch":
        monkeypatch.setenv("NKI_LITE_NUM_THREADS", "3")
    else:
        monkeypatch.setenv("NKI_LITE_JIT_OPT", "1")
    after = knobs.stamp()
    assert after == direct() and after != before


def test_a_write_announced_but_not_yet_visible_is_not_cached(monkeypatch):
    """The audit event fires before os.environ's dict changes (another thread may call in between):
    until the write is visible, every call re-reads."""
    monkeypatch.delenv("NKI_LITE_DEBUG_UNINIT", raising=False)
    knobs.stamp()
    knobs._audit("os.putenv", (b"NKI_LITE_DEBUG_UNINIT", b"1"))      # as os.environ.__setitem__ does first
    early = knobs.stamp()
    assert early == direct() and early[knobs.STAMP_KNOBS.index("NKI_LITE_DEBUG_UNINIT")] is None
    assert knobs.stamp() is not early                                  # not cached: read again
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")                   # the write lands
    late = knobs.stamp()
    assert late[knobs.STAMP_KNOBS.index("NKI_LITE_DEBUG_UNINIT")] == "1"
    assert knobs.stamp() is late


def test_the_runtime_reads_no_private_cpython_attributes():
    """`os.environ._data` and friends: private, and free to change between Python versions."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nki_lite", "runtime")
    found = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            found += [f"{name}:{n.lineno} .{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and n.attr in ("_data", "_getframe", "_current_frames", "_PyObject")]
    assert found == []
