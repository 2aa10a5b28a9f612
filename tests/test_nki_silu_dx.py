"""nl.silu_dx, the derivative of silu (an activation function; bwmm_bwd's backward gate).

Definition (numerics/fp32math/explog.py silu_dx, docs/numerics.md): s * (1 + x * t) with s = sigmoid(x),
t = sigmoid(-x), both from one e^-|x|, in fp32 steps. Accuracy against float64; interpreter and JIT give the
same bits (every activation goes through the traced fp32math definition); the legacy dialect's nl.silu_dx
and the current one's nisa.activation(op=nl.silu_dx) are the same op.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as legacy_nki
import nki_lite.language as legacy_nl
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite.numerics import fp32math as M

from .nki_tiles import hbm_of, sbuf_of
from .test_fp32math import _sig64, sweep, ulp_error

MODES = ["interpret", "jit"]


def _ref(x):
    x64 = x.astype(np.float64)
    return _sig64(x64) * (1.0 + x64 * _sig64(-x64))


def test_accuracy_against_float64():
    x = sweep(-87.0, 110.0, 400_000)
    got, ref = M.silu_dx(x), _ref(x)
    # away from the zero of 1 + x*t (x ~ -1.278, where the sum cancels) and where sigmoid(x) is normal:
    # 5 ulps; everywhere: within 4 * 2^-24 (the result is at most ~1.1)
    clear = np.abs(1.0 + x.astype(np.float64) * _sig64(-x.astype(np.float64))) >= 0.5
    assert ulp_error(got[clear], ref[clear]).max() <= 5.0
    assert np.abs(got.astype(np.float64) - ref).max() <= 4 * 2.0 ** -24


@pytest.mark.parametrize("x,want", [(0.0, 0.5), (-0.0, 0.5), (np.inf, 1.0), (-np.inf, -0.0), (200.0, 1.0),
                                    (-200.0, -0.0), (1e30, 1.0), (-1e30, -0.0)])
def test_special_values(x, want):
    got = M.silu_dx(np.array([x], np.float32))
    assert got.view(np.uint32)[0] == np.array([want], np.float32).view(np.uint32)[0]


def test_nan_is_canonical_and_keeps_sign():
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA12345], np.uint32).view(np.float32)
    got = M.silu_dx(nans).view(np.uint32)
    np.testing.assert_array_equal(got, (nans.view(np.uint32) & np.uint32(0x80000000)) | np.uint32(0x7FC00000))


@nki.jit
def gate_backward(gate, grad):
    """bwmm_bwd's pattern: silu_dx of the gate activation through nisa.activation, times the gradient."""
    g = sbuf_of(gate)
    d = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.silu_dx, data=g)
    out = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out, data1=d, data2=sbuf_of(grad), op=nl.multiply)
    return hbm_of(out)


@legacy_nki.jit
def legacy_silu_dx(x):
    out = legacy_nl.ndarray(x.shape, dtype=x.dtype, buffer=legacy_nl.shared_hbm)
    legacy_nl.store(out, legacy_nl.silu_dx(legacy_nl.load(x)))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_activation_in_both_dialects_is_the_definition(mode):
    rng = np.random.default_rng(7)
    gate = (rng.standard_normal((128, 64)) * 6).astype(np.float32)
    gate[0, :8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 200.0, -200.0, -1.2784645]
    grad = rng.standard_normal((128, 64)).astype(np.float32)
    want = (M.silu_dx(gate) * grad).astype(np.float32)
    got = np.asarray(gate_backward(gate, grad, mode=mode))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    got = np.asarray(legacy_silu_dx(gate, mode=mode))
    np.testing.assert_array_equal(got.view(np.uint32), M.silu_dx(gate).view(np.uint32))
