"""Read-after-write through HBM across affine_range iterations (verifier rule 9, lower/verify_deps.py).

Iterations of an affine_range may run in any order or in parallel: a value one iteration stores to
HBM and another iteration loads is not defined (NL-E601 at the load, hint sequential_range). Each
iteration reading only the region it writes, or reading inputs no iteration writes, is fine.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


def expect(kernel, args, marker, target="trn2"):
    return _expect(kernel, args, errors.DependencyError, "loop_dependency", marker, target)


@nki.jit
def chain(x, mode):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(64)[None, :]
    rng = nl.sequential_range if mode == "sequential" else nl.affine_range
    for i in rng(4):
        t = nl.load(x[i * 128 + ip, iy])
        nl.store(out[i * 128 + ip, iy], value=t)
        if mode in ("previous", "sequential"):
            prev = nl.load(out[(i - 1) * 128 + ip, iy], mask=(i > 0))  # MARK-PREV
            nl.store(out[i * 128 + ip, iy], value=nl.add(t, prev), mask=(i > 0))
        elif mode == "own":
            mine = nl.load(out[i * 128 + ip, iy])
            nl.store(out[i * 128 + ip, iy], value=nl.add(t, mine))
        elif mode == "next":
            nxt = nl.load(out[(i + 1) * 128 + ip, iy], mask=(i < 3))  # MARK-NEXT
            nl.store(out[i * 128 + ip, iy], value=nl.add(t, nxt), mask=(i < 3))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_reading_the_previous_iterations_store_is_a_dependency(target):
    e = expect(chain, (spec((512, 64)), "previous"), "MARK-PREV", target)
    msg = str(e)
    assert "read-after-write through HBM" in msg and "out[0, 0]" in msg and "i=0" in msg and "i=1" in msg
    assert "sequential_range" in e.hint


def test_reading_what_a_later_iteration_writes_is_a_dependency():
    expect(chain, (spec((512, 64)), "next"), "MARK-NEXT")


@pytest.mark.parametrize("mode", ("own", "sequential", "none"))
def test_disjoint_or_sequential_accesses_pass(mode):
    chain.trace(spec((512, 64)), mode, target="trn2")


@pytest.mark.parametrize("backend", ("interpret", "jit"))
def test_the_sequential_version_runs_in_order(backend):
    x = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)
    got = chain(x, "sequential", mode=backend)
    want = x.copy()
    for i in range(1, 4):
        want[i * 128:(i + 1) * 128] += want[(i - 1) * 128:i * 128]
    np.testing.assert_array_equal(got, want)


@nki.jit
def scratch_across(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 64), x.dtype, buffer=nl.hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(64)[None, :]
    for i in nl.affine_range(4):
        nl.store(scratch[ip, iy], value=nl.load(x[i * 128 + ip, iy]), mask=(i == 0))
        t = nl.load(scratch[ip, iy])  # MARK-SCRATCH
        nl.store(out[i * 128 + ip, iy], value=t)
    return out


def test_a_scratch_hbm_tensor_written_in_one_iteration_and_read_in_others():
    e = expect(scratch_across, (spec((512, 64)),), "MARK-SCRATCH")
    assert "scratch" in str(e)


@nki.jit
def scratch_per_iteration(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((4, 128, 64), x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(4):
        nl.store(scratch[i], value=nl.load(x[i * 128:(i + 1) * 128, :]))
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.exp(nl.load(scratch[i])))
    return out


def test_a_scratch_region_per_iteration_passes():
    x = np.linspace(-1, 1, 512 * 64, dtype=np.float32).reshape(512, 64)
    np.testing.assert_allclose(scratch_per_iteration(x), np.exp(x), rtol=1e-6)
