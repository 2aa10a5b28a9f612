"""nki_lite.stdlib: property tests against float64 numpy references within each function's
documented tolerance (docs/stdlib.md), JIT == interpreter bitwise, argument errors, and estimates.

Shapes are drawn by hypothesis (ragged tails and tiny sizes included); every example compiles a new
kernel, so the example counts are small in the default profile and larger with NKI_LITE_SLOW_TESTS=1.
"""
from __future__ import annotations

import math
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nki_lite import errors
from nki_lite.stdlib import attention, layernorm, matmul, matmul_fp8, quantize_fp8, rmsnorm, softmax

SLOW = os.environ.get("NKI_LITE_SLOW_TESTS") == "1"
EXAMPLES = 40 if SLOW else 6
PROP = settings(max_examples=EXAMPLES, deadline=None, derandomize=not SLOW,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BF16, E4M3, E4M3FN, E5M2 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
EPS32 = 2.0 ** -23


def _rand(seed, shape, dtype=np.float32, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def _f64(x):
    return np.asarray(x).astype(np.float64)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _interpret_equals_jit(fn, *args, **kwargs):
    c = fn.plan(*args, **kwargs)
    jit = c.kernel(*c.args, mode="jit")
    ref = c.kernel(*c.args, mode="interpret")
    jit, ref = (jit,) if not isinstance(jit, tuple) else jit, (ref,) if not isinstance(ref, tuple) else ref
    assert all(_same_bits(x, y) for x, y in zip(jit, ref))


dims = st.integers(1, 300)

# ---------------------------------------------------------------- matmul


def _matmul_bound(a, b, out_dtype):
    """K * 2^-23 * (|A| @ |B|) (exact products, fp32 sums), plus one rounding to out_dtype."""
    K = a.shape[-1]
    mag = np.abs(_f64(a)) @ np.abs(_f64(b))
    bound = K * EPS32 * mag + 1e-30
    if np.dtype(out_dtype) != np.float32:
        bound = bound + mag * 2.0 ** -(8 if np.dtype(out_dtype) == BF16 else 11)
    return bound


@PROP
@given(M=dims, K=st.integers(1, 400), N=st.integers(1, 700), dt=st.sampled_from([np.float32, BF16, np.float16]),
       seed=st.integers(0, 2 ** 16))
def test_matmul_within_bound(M, K, N, dt, seed):
    a, b = _rand(seed, (M, K), dt), _rand(seed + 1, (K, N), dt)
    c = matmul(a, b)
    assert c.shape == (M, N) and c.dtype == np.float32
    assert (np.abs(c - _f64(a) @ _f64(b)) <= _matmul_bound(a, b, np.float32)).all()


@pytest.mark.parametrize("out_dtype", [np.float32, BF16, np.float16])
def test_matmul_out_dtype_and_batching(out_dtype):
    a, b = _rand(1, (2, 3, 70, 130)), _rand(2, (130, 90))
    c = matmul(a, b, out_dtype=out_dtype)
    assert c.shape == (2, 3, 70, 90) and c.dtype == np.dtype(out_dtype)
    assert (np.abs(_f64(c) - _f64(a) @ _f64(b)) <= _matmul_bound(a, b, out_dtype)).all()
    b3 = _rand(3, (3, 130, 20))                                  # batch broadcast of both operands
    assert matmul(a, b3).shape == (2, 3, 70, 20)
    v = _rand(4, (130,))
    assert matmul(a, v).shape == (2, 3, 70) and matmul(v, b).shape == (90,)


def test_matmul_mixed_input_dtypes_widen():
    a, b = _rand(5, (40, 50), BF16), _rand(6, (50, 60), np.float16)
    assert (np.abs(matmul(a, b) - _f64(a) @ _f64(b)) <= _matmul_bound(a, b, np.float32)).all()


@pytest.mark.parametrize("shape", [(1, 1, 1), (130, 257, 513), (128, 128, 512)])
def test_matmul_jit_equals_interpreter(shape):
    M, K, N = shape
    _interpret_equals_jit(matmul, _rand(7, (M, K)), _rand(8, (K, N)))


def test_matmul_argument_errors():
    with pytest.raises(errors.ArgumentError, match="contraction dimensions differ"):
        matmul(np.ones((4, 5), np.float32), np.ones((6, 7), np.float32))
    with pytest.raises(errors.ArgumentError, match="dtype float64"):
        matmul(np.ones((4, 5)), np.ones((5, 7), np.float32))
    with pytest.raises(errors.ArgumentError, match="out_dtype int32"):
        matmul(np.ones((4, 5), np.float32), np.ones((5, 7), np.float32), out_dtype=np.int32)


# ---------------------------------------------------------------- fp8

FP8 = [E4M3, E4M3FN, E5M2]


@PROP
@given(M=dims, K=st.integers(1, 300), N=st.integers(1, 600), da=st.sampled_from(FP8), db=st.sampled_from(FP8),
       scales=st.sampled_from(["scalar", "row", "column", "both"]), seed=st.integers(0, 2 ** 16))
def test_matmul_fp8_within_bound(M, K, N, da, db, scales, seed):
    a, b = _rand(seed, (M, K), da), _rand(seed + 1, (K, N), db)
    rng = np.random.default_rng(seed)
    sa = rng.uniform(0.25, 4, (M, 1)).astype(np.float32) if scales in ("row", "both") else 0.5
    sb = rng.uniform(0.25, 4, (1, N)).astype(np.float32) if scales in ("column", "both") else 2.0
    c = matmul_fp8(a, b, sa, sb)
    ref = (_f64(a) * _f64(sa)) @ (_f64(b) * _f64(sb))
    mag = (np.abs(_f64(a)) * _f64(sa)) @ (np.abs(_f64(b)) * _f64(sb))
    assert c.shape == (M, N) and (np.abs(c - ref) <= (K + 2) * EPS32 * mag + 1e-30).all()


def test_matmul_fp8_jit_equals_interpreter():
    _interpret_equals_jit(matmul_fp8, _rand(9, (130, 140), E4M3FN), _rand(10, (140, 520), E5M2),
                          _rand(11, (130, 1)).__abs__() + 0.5, 0.25)


@pytest.mark.parametrize("axis", [None, 1, 0])
@pytest.mark.parametrize("dt", FP8)
def test_quantize_fp8_matches_its_formula_bit_for_bit(axis, dt):
    x = _rand(12, (200, 2100), scale=30.0)
    x[5] = 0.0
    x[:, 7] = 0.0
    x[9, 9] = 1e6                                                 # saturates in every format but e5m2's scale
    codes, scales = quantize_fp8(x, dt, axis)
    fmax = float(ml_dtypes.finfo(dt).max)
    amax = np.abs(x).max(axis=axis, keepdims=axis is not None)
    s_ref = (np.maximum(amax, np.float32(2.0 ** -100)) * np.float32(1 / fmax)).astype(np.float32)
    assert np.array_equal(np.asarray(scales, np.float32).reshape(np.shape(s_ref)), s_ref)
    c_ref = np.clip(x / s_ref, -fmax, fmax).astype(dt)
    assert codes.dtype == np.dtype(dt) and codes.tobytes() == c_ref.tobytes()
    assert np.isfinite(codes.astype(np.float32)).all()            # saturating: no inf, no NaN


def test_quantize_then_matmul_fp8_round_trip():
    a, b = _rand(13, (100, 300)), _rand(14, (300, 80))
    (ca, sa), (cb, sb) = quantize_fp8(a, axis=1), quantize_fp8(b, axis=0)
    err = np.abs(matmul_fp8(ca, cb, sa, sb) - _f64(a) @ _f64(b)).max() / np.abs(_f64(a) @ _f64(b)).max()
    assert err < 0.1                                              # e4m3: 3 mantissa bits


def test_quantize_fp8_argument_errors():
    with pytest.raises(errors.ArgumentError, match="not an fp8 format"):
        quantize_fp8(np.ones((4, 4), np.float32), np.float16)
    with pytest.raises(errors.ArgumentError, match="needs a 2-D x"):
        quantize_fp8(np.ones((4, 4, 4), np.float32), axis=1)


# ---------------------------------------------------------------- softmax


def _softmax_ref(x, axis):
    x = _f64(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_tol(dt, x, axis=-1):
    """Relative tolerance per element: exp(x - max) has relative error |x - max| * 2^-24 from the fp32
    subtraction (exp's condition number), plus a few ulp for exp, the fp32 row sum and the reciprocal;
    bf16 outputs add their rounding."""
    x = _f64(x)
    width = x.shape[axis]
    arg = np.abs(x - x.max(axis=axis, keepdims=True))
    tol = (16 + math.log2(width + 1) + arg) * EPS32
    return tol + (2.0 ** -7 if dt == BF16 else 0.0)


@PROP
@given(rows=st.integers(1, 300), cols=st.integers(1, 600), dt=st.sampled_from([np.float32, BF16]),
       scale=st.sampled_from([0.1, 4.0, 40.0]), seed=st.integers(0, 2 ** 16))
def test_softmax_within_tolerance(rows, cols, dt, scale, seed):
    x = _rand(seed, (rows, cols), dt, scale)
    y = softmax(x)
    assert y.shape == x.shape and y.dtype == np.dtype(dt)
    ref = _softmax_ref(x, -1)
    assert (np.abs(_f64(y) - ref) <= _softmax_tol(dt, x) * np.maximum(ref, 2.0 ** -126)).all()


@pytest.mark.parametrize("cols", [8193, 2048 * 5 + 77])
def test_softmax_online_form_for_wide_rows(cols):
    x = _rand(15, (130, cols), scale=8.0)
    y = softmax(x)
    ref = _softmax_ref(x, -1)
    assert (np.abs(_f64(y) - ref) <= _softmax_tol(np.float32, x) * np.maximum(ref, 2.0 ** -126)).all()
    from nki_lite.stdlib.softmax_kernels import softmax_online
    assert softmax.plan(x).kernel is softmax_online


@pytest.mark.parametrize("shape, axis", [((3, 4, 50), -1), ((3, 4, 50), 1), ((50,), 0), ((1, 1), 0)])
def test_softmax_axes_and_batches(shape, axis):
    x = _rand(16, shape, scale=3.0)
    y = softmax(x, axis=axis)
    assert y.shape == shape
    assert np.allclose(y, _softmax_ref(x, axis), rtol=1e-5, atol=1e-7)


def test_softmax_special_rows_as_numpy():
    x = np.array([[1, np.nan, 2], [1, np.inf, 2], [-np.inf] * 3, [1, 2, 3], [-np.inf, 0, 1]], np.float32)
    with np.errstate(invalid="ignore"):
        ref = _softmax_ref(x, -1)
    y = softmax(x)
    assert np.array_equal(np.isnan(y), np.isnan(ref))
    assert np.allclose(y[3:], ref[3:], rtol=1e-6)


@pytest.mark.parametrize("shape", [(130, 33), (7, 8193)])
def test_softmax_jit_equals_interpreter(shape):
    _interpret_equals_jit(softmax, _rand(17, shape, scale=4.0))


def test_softmax_argument_errors():
    with pytest.raises(errors.ArgumentError, match="axis=2 is out of range"):
        softmax(np.ones((3, 4), np.float32), axis=2)
    with pytest.raises(errors.ArgumentError, match="0-d"):
        softmax(np.float32(1.0))


# ---------------------------------------------------------------- norms


def _rms_ref(x, w, eps):
    x = _f64(x)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * _f64(w)


def _ln_ref(x, w, b, eps):
    x = _f64(x)
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * _f64(w) + _f64(b)


def _norm_tol(dt, ref):
    rel = 2.0 ** -7 if dt == BF16 else 2.0 ** -18
    return rel * np.maximum(np.abs(ref), np.abs(ref).max(axis=-1, keepdims=True) * 2.0 ** -10) + 1e-12


@PROP
@given(rows=st.integers(1, 300), width=st.integers(1, 1100), dt=st.sampled_from([np.float32, BF16]),
       seed=st.integers(0, 2 ** 16))
def test_norms_within_tolerance(rows, width, dt, seed):
    x = _rand(seed, (rows, width), dt, 3.0)
    w, b = _rand(seed + 1, (width,)), _rand(seed + 2, (width,))
    y = rmsnorm(x, w)
    assert y.shape == x.shape and y.dtype == np.dtype(dt)
    ref = _rms_ref(x, w, 1e-6)
    assert (np.abs(_f64(y) - ref) <= _norm_tol(dt, ref)).all()
    z = layernorm(x, w, b)
    ref = _ln_ref(x, w, b, 1e-5)
    assert (np.abs(_f64(z) - ref) <= _norm_tol(dt, ref) + (2.0 ** -7 if dt == BF16 else 2.0 ** -18)).all()


def test_norms_wide_rows_and_batches():
    x = _rand(18, (2, 5, 9000), scale=2.0)
    w, b = _rand(19, (9000,)), _rand(20, (9000,))
    assert np.allclose(rmsnorm(x, w, eps=1e-5), _rms_ref(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    assert np.allclose(layernorm(x, w, b, eps=1e-3), _ln_ref(x, w, b, 1e-3), rtol=1e-5, atol=1e-5)


def test_norms_jit_equal_interpreter():
    x = _rand(21, (130, 600), scale=2.5)
    _interpret_equals_jit(rmsnorm, x, _rand(22, (600,)))
    _interpret_equals_jit(layernorm, x, _rand(23, (600,)), _rand(24, (600,)))


def test_norm_argument_errors():
    with pytest.raises(errors.ArgumentError, match=r"expected \(8,\)"):
        rmsnorm(np.ones((4, 8), np.float32), np.ones(7, np.float32))
    with pytest.raises(errors.ArgumentError, match="D >= 1"):
        layernorm(np.ones((4, 0), np.float32), np.ones(0, np.float32), np.ones(0, np.float32))


# ---------------------------------------------------------------- attention


def _attention_ref(q, k, v, causal, scale=None):
    q, k, v = _f64(q), _f64(k), _f64(v)
    if q.ndim == 2:
        q, k, v = q[None, None], k[None, None], v[None, None]
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        Sq, Sk = s.shape[-2:]
        s = np.where(np.arange(Sk)[None, :] <= np.arange(Sq)[:, None], s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _attention_tol(dt, v):
    return (1e-5 if dt == np.float32 else 3e-2) * np.abs(_f64(v)).max()


@settings(max_examples=max(3, EXAMPLES // 2), deadline=None, derandomize=not SLOW,
          suppress_health_check=[HealthCheck.too_slow])
@given(Sq=st.integers(1, 260), Sk=st.integers(1, 700), d=st.sampled_from([1, 16, 64, 128]),
       heads=st.sampled_from([(1, 1), (2, 1), (4, 2)]), causal=st.booleans(),
       dt=st.sampled_from([np.float32, BF16, E4M3]), seed=st.integers(0, 2 ** 16))
def test_attention_within_tolerance(Sq, Sk, d, heads, causal, dt, seed):
    H, Hkv = heads
    q = _rand(seed, (1, H, Sq, d), dt)
    k, v = _rand(seed + 1, (1, Hkv, Sk, d), dt), _rand(seed + 2, (1, Hkv, Sk, d), dt)
    o = attention(q, k, v, causal=causal)
    assert o.shape == q.shape and o.dtype == (np.float32 if dt == E4M3 else np.dtype(dt))
    assert np.abs(_f64(o) - _attention_ref(q, k, v, causal)).max() <= _attention_tol(dt, v)


def test_attention_2d_and_scale():
    q = _rand(25, (100, 32))
    o = attention(q, q, q, scale=0.3)
    assert o.shape == (100, 32)
    assert np.abs(o - _attention_ref(q, q, q, False, 0.3)).max() <= 1e-5


def test_attention_causal_skips_masked_blocks():
    """Causal attention traces only the key blocks at or below the diagonal: for S = 2048 that is
    sum over the 16 query tiles of ceil(128 (i + 1) / 512) = 40 of the 64 score blocks."""
    from nki_lite.core import ir
    q = _rand(26, (1, 1, 2048, 64))

    def score_matmuls(causal):
        c = attention.plan(q, q, q, causal=causal)
        kernel = c.kernel.trace(*c.args)
        trips = {}
        for ins, loops in ir.walk(kernel.body):
            if ins.op == "nc_matmul" and ins.ins[0].buffer.startswith("q_T"):   # S = Q K^T (stationary: Q^T)
                n = 1
                for lp in loops:
                    n *= lp.trip
                trips[id(ins)] = n
        return sum(trips.values())
    assert score_matmuls(False) == 64
    assert score_matmuls(True) == 40
    est_full = attention.estimate(q, q, q, causal=False).total_time
    est_causal = attention.estimate(q, q, q, causal=True).total_time
    assert est_causal < 0.75 * est_full


def test_attention_jit_equals_interpreter():
    q = _rand(27, (1, 2, 130, 64))
    k, v = _rand(28, (1, 1, 600, 64)), _rand(29, (1, 1, 600, 64))
    _interpret_equals_jit(attention, q, k, v, causal=True)


def test_attention_argument_errors():
    q = np.ones((1, 3, 8, 16), np.float32)
    with pytest.raises(errors.ArgumentError, match="must divide"):
        attention(q, np.ones((1, 2, 8, 16), np.float32), np.ones((1, 2, 8, 16), np.float32))
    with pytest.raises(errors.ArgumentError, match="d=200"):
        attention(np.ones((8, 200), np.float32), np.ones((8, 200), np.float32), np.ones((8, 200), np.float32))
    with pytest.raises(errors.ArgumentError, match="one dtype"):
        attention(q, q.astype(BF16), q)
    with pytest.raises(errors.ArgumentError, match="expected"):
        attention(np.ones((8,), np.float32), np.ones((8,), np.float32), np.ones((8,), np.float32))


# ---------------------------------------------------------------- estimates


@pytest.mark.parametrize("fn, args", [
    (matmul, lambda: (_rand(30, (256, 256)), _rand(31, (256, 512)))),
    (softmax, lambda: (_rand(32, (256, 512)),)),
    (rmsnorm, lambda: (_rand(33, (256, 512)), _rand(34, (512,)))),
    (attention, lambda: (_rand(35, (1, 1, 256, 64)),) * 3),
])
def test_every_entry_point_estimates_the_same_call(fn, args):
    a = args()
    est = fn.estimate(*a, target="trn2")
    assert est.total_time > 0 and est.summary()["target"] == "trn2"
    assert fn.estimate(*a, target="trn1").total_time != est.total_time
