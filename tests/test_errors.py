"""Errors: registry, classes, and messages that name the kernel's file:line with excerpt and caret."""
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors

from . import markers

HERE = os.path.abspath(__file__)


def line_of(marker: str) -> int:
    """Line number in this file of the (unique) line ending with `# marker`."""
    return markers.line_of(HERE, marker)


def test_every_code_unique_and_class_is_a_builtin_too():
    codes = [s.code for s in errors.ERRORS.values()]
    assert len(codes) == len(set(codes))
    builtin_bases = (ValueError, TypeError, IndexError, MemoryError, NotImplementedError, FloatingPointError)
    for spec in errors.ERRORS.values():
        assert issubclass(spec.cls, errors.NkiLiteError)
        assert issubclass(spec.cls, builtin_bases), spec.name
        assert spec.hint and spec.summary


def test_docs_page_is_generated_from_registry():
    doc = open(os.path.join(os.path.dirname(HERE), "..", "docs", "errors.md")).read()
    assert doc.strip() == errors.render_docs().strip(), "regenerate: python -m nki_lite.errors > docs/errors.md"


def test_control_flow_on_tile_names_line_with_caret():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        if t:  # MARK-IF-TILE
            nl.store(out, t)
        return out

    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(np.zeros((4, 4), np.float32))
    e = ei.value
    assert isinstance(e, TypeError)
    assert e.code == "NL-E801"
    msg = str(e)
    assert f"{HERE}:{line_of('MARK-IF-TILE')}:" in msg
    assert "if t:  # MARK-IF-TILE" in msg
    assert "^" in msg and "hint:" in msg and "docs/errors.md#nl-e801" in msg


def test_control_flow_on_loop_variable():
    """A branch on loop variables only is decided per iteration (the loop is traced unrolled, as NKI's
    simulator runs it); a branch on an arange index is NL-E802 at the line."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if i == 0:
                nl.store(out, nl.load(x))
        return out

    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    assert np.array_equal(k(x), x)

    @nki.jit
    def k2(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(4)[:, None]
        if ip == 0:  # MARK-IF-INDEX
            nl.store(out, nl.load(x))
        return out

    with pytest.raises(errors.KernelSyntaxError) as ei:
        k2(x)
    assert ei.value.code == "NL-E802"
    assert f":{line_of('MARK-IF-INDEX')}:" in str(ei.value)


def test_api_outside_kernel():
    with pytest.raises(errors.KernelSyntaxError) as ei:
        nl.zeros((4, 4), nl.float32)
    assert ei.value.name == "outside_kernel"


def test_argument_binding_matches_python():
    @nki.jit
    def k(a, b):
        return None

    with pytest.raises(errors.ArgumentError) as ei:
        k(np.zeros((2, 2), np.float32))
    assert "missing a required argument: 'b'" in str(ei.value)
    assert isinstance(ei.value, TypeError)


def test_float64_argument_rejected_with_hint():
    @nki.jit
    def k(a):
        return None

    with pytest.raises(errors.ArgumentError) as ei:
        k(np.zeros((2, 2)))
    assert "float64" in str(ei.value) and "astype(np.float32)" in str(ei.value)


def _oob_kernel():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), x.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(3):
            t = nl.load(x[i * 64 + nl.arange(128)[:, None], nl.arange(4)[None, :]])  # MARK-OOB
            nl.store(out, t)
        return out
    return k


def test_static_out_of_bounds_is_caught_at_trace_time():
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        _oob_kernel()(np.zeros((200, 4), np.float32))
    msg = str(ei.value)
    assert isinstance(ei.value, IndexError)
    assert f":{line_of('MARK-OOB')}:" in msg and "[0, 255]" in msg and "200" in msg


def test_interpreter_bounds_checks_every_access_at_run_time():
    """The interpreter does not trust the verifier: run the unverified IR directly."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    from nki_lite.runtime.interpreter import run
    k = _oob_kernel()
    x = np.zeros((200, 4), np.float32)
    kern = run_shared(trace(k.fn, k.bind((x,), {}), (), "trn2"))
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        run(kern, {"x": x})
    msg = str(ei.value)
    assert f":{line_of('MARK-OOB')}:" in msg
    assert "[128, 255]" in msg and "i0=2" in msg


def test_partition_limit_at_creation():
    @nki.jit
    def k(x):
        t = nl.ndarray((256, 512), nl.float32, buffer=nl.sbuf)  # MARK-P256
        return None

    with pytest.raises(errors.ShapeError) as ei:
        k(np.zeros((2, 2), np.float32))
    assert ei.value.code == "NL-E101" and f":{line_of('MARK-P256')}:" in str(ei.value)
    assert "256" in str(ei.value) and "128" in str(ei.value)


def test_mixed_basic_and_advanced_indexing():
    @nki.jit
    def k(x):
        i = nl.arange(4)[:, None]
        t = nl.load(x[i, :])  # MARK-MIX
        return None

    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(np.zeros((4, 4), np.float32))
    assert ei.value.name == "mixed_indexing" and f":{line_of('MARK-MIX')}:" in str(ei.value)


def test_compute_on_hbm_is_a_memory_space_error():
    @nki.jit
    def k(x):
        y = nl.exp(x)  # MARK-HBM
        return None

    with pytest.raises(errors.MemorySpaceError) as ei:
        k(np.zeros((4, 4), np.float32))
    assert "address space 'psum|sbuf'" in str(ei.value) and f":{line_of('MARK-HBM')}:" in str(ei.value)


def test_break_in_affine_range_rejected():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):  # MARK-BREAK
            nl.store(out, nl.load(x))
            break
        return out

    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(np.zeros((4, 4), np.float32))
    assert ei.value.name == "bad_loop" and f":{line_of('MARK-BREAK')}:" in str(ei.value)


def test_errors_raise_under_python_O(tmp_path):
    import subprocess
    import sys
    code = ("import numpy as np, nki_lite as nki, nki_lite.language as nl\n"
            "@nki.jit\n"
            "def k(x):\n"
            "    t = nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)\n"
            "try:\n"
            "    k(np.zeros((2, 2), np.float32))\n"
            "except nki.NkiLiteError as e:\n"
            "    print(e.code)\n")
    p = tmp_path / "k.py"
    p.write_text(code)
    r = subprocess.run([sys.executable, "-O", str(p)], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "NL-E101", r.stderr
