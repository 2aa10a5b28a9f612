"""Legacy-corpus patterns fixed in session 2026-12-03 (issue #13), each re-created in the project's words.

- `nisa.activation(np.copy, ...)`: the documented Identity activation; `nl.loop_reduce(..., name=)`.
- a single element of a tensor of any rank loads as a [1, 1] tile and stores from one (nki-samples'
  flash attention backward reads `sinks[batch_id, head]` and writes `out_dsinks[batch_id, head]`).
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


@pytest.fixture(params=["interpret", "jit"])
def mode(request):
    return request.param


@nki.jit
def scale_rows_by_element(s, x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    picked = nl.ndarray(s.shape, s.dtype, buffer=nl.shared_hbm)
    t = nl.load(s[1, 2])
    assert t.shape == (1, 1)
    nl.store(out, value=nl.multiply(nl.load(x), nl.broadcast_to(t, shape=(x.shape[0], 1))))
    for i in nl.affine_range(s.shape[0]):
        for j in nl.affine_range(s.shape[1]):
            nl.store(picked[i, j], value=nl.add(nl.load(s[i, j]), 1.0))
    return out, picked


def test_one_element_of_a_matrix_is_a_1x1_tile(mode):
    s = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = np.random.default_rng(1).random((16, 5), dtype=np.float32)
    out, picked = scale_rows_by_element(s, x, mode=mode)
    np.testing.assert_array_equal(out, x * s[1, 2])
    np.testing.assert_array_equal(picked, s + 1)


@nki.jit
def negate_with_identity_activation(x, z):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nisa.activation(np.copy, t, scale=-1.0, bias=nl.load(z)))
    return out


def test_numpy_copy_is_the_identity_activation(mode):
    """The activation table accepts `numpy.copy` for Identity (nki-samples' pipelined attention uses it)."""
    x = np.random.default_rng(2).random((128, 64), dtype=np.float32)
    z = np.zeros((128, 1), np.float32)
    np.testing.assert_array_equal(negate_with_identity_activation(x, z, mode=mode), -x)


@nki.jit
def named_loop_reduce(x):
    out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        part = nl.load(x[:, j * 64:(j + 1) * 64])
        acc[...] = nl.loop_reduce(part, np.add, loop_indices=[j], name="row-sum")
    nl.store(out, value=acc)
    return out


def test_loop_reduce_takes_an_instruction_name(mode):
    """nl.loop_reduce(..., name=) as nki-samples' pipelined attention passes (the legacy stub takes
    **kwargs); the name changes nothing."""
    x = np.random.default_rng(3).random((128, 256), dtype=np.float32)
    want = x.reshape(128, 4, 64).sum(axis=1, dtype=np.float64)
    np.testing.assert_allclose(named_loop_reduce(x, mode=mode), want, rtol=1e-5)


def test_a_corpus_pytest_run_that_dies_in_a_test_fails_it_and_resumes(tmp_path):
    """checkdir's pytest runner: a test the subprocess dies in (the OOM killer stopped nki-samples' tests on
    the shared machine) is a FAIL naming the signal, and the tests after it still run."""
    from nki_lite.tools import checkdir
    (tmp_path / "test_dies.py").write_text(
        "import os, signal\n\n"
        "def test_first():\n    pass\n\n"
        "def test_second():\n    os.kill(os.getpid(), signal.SIGKILL)\n\n"
        "def test_third():\n    pass\n")
    _, run = checkdir.pytest_checks("t", tmp_path, [], [])
    rows = {r[0]: r[1:3] for r in run("interpret", [])}
    assert rows["test_dies.py::test_first"][0] == "pass" and rows["test_dies.py::test_third"][0] == "pass"
    assert rows["test_dies.py::test_second"][0] == "FAIL" and "signal SIGKILL" in rows["test_dies.py::test_second"][1]
    assert len(rows) == 3
