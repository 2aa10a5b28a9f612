"""Row-private tiles of row-major bodies (lower/llvm/row_private.py): stored as one partition row,
or in their store's HBM destination row; the JIT must still agree with the interpreter bit for bit
(debug fill included)."""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.lower.llvm.codegen import Emitter
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.lower.passes.pipeline import run_backend
from nki_lite.stdlib import softmax_kernels as SK

from .test_jit_differential import run_both

pytestmark = pytest.mark.skipif(not jit_supported(), reason="no LLVM JIT on this host")
F32 = np.float32


@pytest.fixture(autouse=True, params=["1", "0"], ids=["debug", "nodebug"])
def _env(request, monkeypatch):
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    monkeypatch.setenv("NKI_LITE_DEBUG", request.param)
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "0")


def _emitter(kernel, *args) -> Emitter:
    return Emitter(run_backend(kernel.trace(*args), "llvm")[0], debug=False)


def test_softmax_row_tiles_take_one_row_and_exp_lives_in_the_output():
    x = np.random.default_rng(0).standard_normal((256, 2048)).astype(F32)
    em = _emitter(SK.softmax_rows, x)
    assert {"e", "y", "neg_max", "total", "inv"} <= set(em.row_private)
    assert set(em.placed) == {"e"} and em.placed["e"].buffer == "out"
    assert em.arena_bytes < 128 * 2048 * 4            # less than one full [128, 2048] fp32 tile
    run_both(SK.softmax_rows, [x])


@pytest.mark.parametrize("shape", [(1, 1), (128, 17), (200, 96), (384, 48)])
def test_softmax_rows_same_bits(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(F32) * 8
    if shape[0] > 3:
        x[1, 3 % shape[1]] = np.nan
        x[2, 0] = np.inf
        x[3, :] = -np.inf
    run_both(SK.softmax_rows, [x])


def test_ragged_rows_keep_the_store_apart():
    """200 rows: the store keeps its row mask, so no tile may be written into the output early."""
    x = np.random.default_rng(1).standard_normal((200, 64)).astype(F32)
    em = _emitter(SK.softmax_rows, x)
    assert em.row_private and not em.placed
    run_both(SK.softmax_rows, [x])


def test_bf16_output_keeps_the_fp32_tile_apart():
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    em = _emitter(SK.softmax_rows, x)
    assert "e" in em.row_private and not em.placed      # e is fp32, the output bf16
    run_both(SK.softmax_rows, [x])


@nki.jit
def _partial_rows(x):
    """A row-private tile whose upper columns only rows < 64 write: the other rows read the fill."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    lo, hi = nl.arange(32)[None, :], nl.arange(32)[None, :] + 32
    t = nl.ndarray((128, 64), dtype=nl.float32)
    t[ip, lo] = nl.load(x[ip, lo])
    t[ip, hi] = nl.multiply(nl.load(x[ip, hi]), 3.0, mask=(ip < 64))
    nl.store(out[ip, nl.arange(64)[None, :]], value=nl.add(t, 1.0))
    return out


def test_uninitialised_columns_read_the_fill_in_every_row():
    x = np.random.default_rng(3).standard_normal((128, 64)).astype(F32)
    em = _emitter(_partial_rows, x)
    assert "t" in em.row_private
    if os.environ["NKI_LITE_DEBUG"] == "1":      # only debug mode defines never-written memory (NaN)
        r = run_both(_partial_rows, [x])[0]
        assert np.isnan(r[64:, 32:]).all() and not np.isnan(r[:64]).any()


@nki.jit
def _reread_after_store(x):
    """The tile is read again after the store: it must keep storage of its own."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    ic = nl.arange(64)[None, :]
    t = nl.load(x[ip, ic])
    e = nisa.activation(op=nl.exp, data=t)
    nl.store(out[ip, ic], value=nl.multiply(e, 2.0))
    nl.store(out2[ip, ic], value=nl.add(e, 1.0))
    return out, out2


def test_a_tile_read_after_the_store_is_not_placed():
    x = np.random.default_rng(4).standard_normal((128, 64)).astype(F32)
    em = _emitter(_reread_after_store, x)
    assert "e" in em.row_private and "e" not in em.placed
    run_both(_reread_after_store, [x])


@nki.jit
def _destination_read(x):
    """The destination is read back in the body (an accumulating store): nothing is placed in it."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    ic = nl.arange(64)[None, :]
    nl.store(out[ip, ic], value=nl.load(x[ip, ic]))
    e = nisa.activation(op=nl.exp, data=nl.load(out[ip, ic]))
    nl.store(out[ip, ic], value=nl.multiply(e, 2.0))
    return out


def test_a_destination_read_in_the_body_holds_no_tile():
    x = np.random.default_rng(5).standard_normal((128, 64)).astype(F32)
    em = _emitter(_destination_read, x)
    assert not em.placed
    run_both(_destination_read, [x])
