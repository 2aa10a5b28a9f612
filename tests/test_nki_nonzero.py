"""nisa.nonzero_with_count (current dialect): each GpSimd core's first partition compacted.

The reference: for src [P, T] (float32 / int32) and dst [P, T + 1] (int32), in SBUF, partitions 0, 16, 32, ...
of dst get the positions of the row's nonzero elements plus index_offset, then padding_val, then the count;
every other partition of dst is left as it was. nki_lite's choices: NaN is nonzero, -0.0 is zero, offsets
wrap as int32 (docs/numerics.md).
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(3221)


def reference(x, before, offset, pad):
    out = before.copy()
    for p in range(0, x.shape[0], 16):
        pos = np.flatnonzero(x[p] != 0)
        row = np.full(x.shape[1] + 1, pad, np.int64)
        row[:pos.size] = pos + offset
        row[-1] = pos.size
        out[p] = ((row + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    return out


@nki.jit
def compact(x, before, offset, pad):
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    r = nl.ndarray(before.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=before)
    nisa.nonzero_with_count(dst=r, src=xs, index_offset=offset, padding_val=pad)
    out = nl.ndarray(before.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def _inputs(p, t, dtype, density=0.3):
    x = np.where(RNG.random((p, t)) < density, RNG.integers(1, 9, (p, t)), 0).astype(dtype)
    before = RNG.integers(-50, 50, (p, t + 1)).astype(np.int32)
    return x, before


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p,t,dtype,offset,pad", [
    (128, 64, np.float32, 16, -1),
    (40, 33, np.int32, 0, 0),              # 40 partitions: cores 0..2 read partitions 0, 16, 32
    (16, 1, np.float32, 5, -7),
    (128, 200, np.int32, 2 ** 31 - 100, -1),   # offset + position wraps as int32
])
def test_matches_the_reference(mode, p, t, dtype, offset, pad):
    x, before = _inputs(p, t, dtype)
    got = compact(x, before, offset, pad, mode=mode)
    np.testing.assert_array_equal(got, reference(x, before, offset, pad))


@pytest.mark.parametrize("mode", MODES)
def test_nan_is_nonzero_and_negative_zero_is_zero(mode):
    x, before = _inputs(32, 12, np.float32, density=0.0)
    x[0, 3], x[0, 7], x[16, 2] = np.nan, -0.0, -np.inf
    got = compact(x, before, 0, -1, mode=mode)
    assert list(got[0, :2]) == [3, -1] and got[0, -1] == 1
    assert list(got[16, :2]) == [2, -1] and got[16, -1] == 1


@pytest.mark.parametrize("mode", MODES)
def test_all_zero_and_all_nonzero_rows(mode):
    x = np.zeros((32, 8), np.float32)
    x[16] = 1.0
    before = np.zeros((32, 9), np.int32)
    got = compact(x, before, 10, -3, mode=mode)
    assert list(got[0]) == [-3] * 8 + [0]
    assert list(got[16]) == list(range(10, 18)) + [8]


@nki.jit
def wrong_dst(x):
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    r = nl.ndarray((x.shape[0], x.shape[1]), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=r, src=xs)
    return xs


@nki.jit
def float_dst(x):
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    r = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=r, src=xs)
    return xs


@pytest.mark.parametrize("kernel,code", [(wrong_dst, "NL-E103"), (float_dst, "NL-E108")])
def test_documented_constraints_at_the_line(kernel, code):
    x = np.ones((16, 8), np.float32)
    with pytest.raises(errors.NkiLiteError, match=code) as e:
        kernel(x, mode="interpret")
    assert "test_nki_nonzero.py" in str(e.value)


def test_engine_model_charges_the_gpsimd_engine():
    x, before = _inputs(128, 512, np.float32)
    est = nki_lite.estimate(compact, x, before, 0, -1, target="trn2")
    assert est.engine_busy_ns("gpsimd") > 0
