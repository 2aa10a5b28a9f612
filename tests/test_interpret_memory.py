"""The interpreter's tile memory (runtime/machine.py): a dead tile's array is reused for the next tile
of its shape (issue #13: no allocation and page faults per loop iteration), and a reused array reads
as uninitialised (NaN) again, never as the previous iteration's values."""
from __future__ import annotations

import numpy as np

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.runtime import machine


def _kernel(T):
    @nki.jit
    def k(x):
        out = nl.ndarray((T, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(T):
            t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            t[:, i * 16:i * 16 + 16] = nl.load(x[i])   # a different quarter each iteration; the rest
            nl.store(out[i], t)                        # of the tile stays uninitialised
        return out
    return k


def test_reused_tile_reads_uninitialised_again(monkeypatch):
    T = 4
    x = np.arange(T * 128 * 16, dtype=np.float32).reshape(T, 128, 16)
    made = []
    real = machine.hostmem.empty
    monkeypatch.setattr(machine.hostmem, "empty",
                        lambda shape, *a, **kw: made.append(tuple(shape)) or real(shape, *a, **kw))
    got = _kernel(T)(x, mode="interpret")
    assert made.count((128, 64)) == 1, made          # one array for the tile of every iteration
    for i in range(T):
        assert np.array_equal(got[i, :, i * 16:i * 16 + 16], x[i])
        rest = np.delete(got[i], np.s_[i * 16:i * 16 + 16], axis=1)
        assert np.isnan(rest).all(), i               # not an earlier iteration's values


def test_spare_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(machine.Machine, "SPARE_BYTES", 0)   # nothing kept: every tile is new
    made = []
    real = machine.hostmem.empty
    monkeypatch.setattr(machine.hostmem, "empty",
                        lambda shape, *a, **kw: made.append(tuple(shape)) or real(shape, *a, **kw))
    T = 3
    x = np.ones((T, 128, 16), np.float32)
    got = _kernel(T)(x, mode="interpret")
    assert made.count((128, 64)) == T
    assert np.isnan(got).sum() == T * 128 * 48


def test_reuse_keeps_dtypes_that_share_a_numpy_code_apart():
    """float8_e4m3fn and float8_e4m3 arrays have the same dtype `.str` ('<V1'): a dead e4m3fn tile's
    array must not become the next e4m3 tile (its bits would be read in the other format)."""
    import ml_dtypes

    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0], nl.copy(nl.load(a), dtype=nl.float32))
        nl.store(out[1], nl.copy(nl.load(b), dtype=nl.float32))
        return out

    vals = np.array([1.0, -2.0, 240.0, -240.0, np.inf, -np.inf, 0.5, 3.0], np.float32)
    a = np.tile(np.array([1.0, -2.0, 448.0, -448.0, 256.0, 0.5, 3.0, 320.0], np.float32),
                (128, 1)).astype(ml_dtypes.float8_e4m3fn)
    b = np.tile(vals, (128, 1)).astype(ml_dtypes.float8_e4m3)
    got = k(a, b, mode="interpret")
    assert np.array_equal(got[0], a.astype(np.float32))
    assert np.array_equal(got[1], b.astype(np.float32))
