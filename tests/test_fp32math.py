"""Tests for nki_lite.numerics.fp32math (the fp32 definitions of nki_lite's transcendentals).

Accuracy is measured against float64 numpy/math references, in ulps of the float32-rounded
reference (subnormal results: ulps of 2^-149). The bounds below are the "bound" column of
docs/numerics_transcendentals.md; keep the two in sync.
"""
from __future__ import annotations

import ast
import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nki_lite.numerics import fp32math as M

F32 = np.float32

# max |error| in ulps over the documented domain (docs/numerics_transcendentals.md, "bound")
ULP_BOUND = {
    "exp": 1.25, "log": 1.0, "tanh": 1.5, "sigmoid": 2.5, "silu": 3.5, "softplus": 2.5,
    "mish": 4.5, "gelu": 4.0, "erf": 1.5, "sin": 2.0, "cos": 2.0, "tan": 3.0, "arctan": 2.5,
    "rsqrt": 1.5, "reciprocal": 0.5, "sqrt": 0.5, "square": 0.5,
}
# |x| <= 102943 (the range where the pi/2 reduction is exact)
ULP_BOUND_TRIG_WIDE = {"sin": 3.5, "cos": 4.0, "tan": 5.0}
# gelu_apprx_tanh: error <= GELU_TANH_SLOPE * max(1, |v|) ulps, v = 2*sqrt(2/pi)*(x + 0.044715x^3)
GELU_TANH_SLOPE = 3.0

NAMES = ["exp", "log", "tanh", "sigmoid", "gelu", "gelu_apprx_tanh", "silu", "silu_dx", "softplus", "mish",
         "erf", "sin", "cos", "tan", "arctan", "rsqrt", "reciprocal", "sqrt", "square", "sign",
         "relu", "abs"]
FLT_MAX = float(np.finfo(np.float32).max)


# ------------------------------------------------------------------------------------------------
# references and measurement
# ------------------------------------------------------------------------------------------------
_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _sig64(v):
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _gelu_tanh_v(x):
    return 2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)


REF = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": _sig64,
    "silu": lambda x: x * _sig64(x),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "mish": lambda x: x * np.tanh(np.logaddexp(0.0, x)),
    "gelu": lambda x: x * 0.5 * _erfc(-x / math.sqrt(2.0)).astype(np.float64),
    # 0.5x(1 + tanh(u)) == x * sigmoid(2u), written without the cancellation of 1 + tanh(u)
    "gelu_apprx_tanh": lambda x: x * _sig64(_gelu_tanh_v(x)),
    "erf": lambda x: _erf(x).astype(np.float64),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "reciprocal": lambda x: 1.0 / x,
    "sqrt": np.sqrt, "square": lambda x: x * x,
}


def ulp_error(got: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    """|got - ref| in ulps of float32(ref); a reference that overflows float32 must give inf."""
    with np.errstate(all="ignore"):
        ref32 = ref64.astype(np.float32)
        e = (np.abs(ref32).view(np.uint32) >> 23).astype(np.int64)
        ulp = np.ldexp(1.0, np.maximum(e, 1) - 150)
        err = np.abs(got.astype(np.float64) - ref64) / ulp
    fin = np.isfinite(ref32)
    err[~fin] = np.where(got[~fin] == ref32[~fin], 0.0, np.inf)
    err[np.isnan(got) & fin] = np.inf
    return err


def _bits_between(lo: float, hi: float, n: int, rng) -> np.ndarray:
    """n float32 in [lo, hi] (0 <= lo < hi), uniform over bit patterns (covers every binade)."""
    a, b = int(F32(lo).view(np.uint32)), int(F32(hi).view(np.uint32))
    return rng.integers(a, b + 1, n, dtype=np.int64).astype(np.uint32).view(np.float32)


def sweep(lo: float, hi: float, n: int, seed: int = 0) -> np.ndarray:
    """Half linspace, half random bit patterns (both signs when the domain has both)."""
    rng = np.random.default_rng(seed)
    parts = [np.linspace(lo, hi, n // 2, dtype=np.float64).astype(np.float32)]
    m = n - n // 2
    if lo < 0 < hi:
        parts += [_bits_between(1e-45, hi, m // 2, rng),
                  -_bits_between(1e-45, -lo, m - m // 2, rng)]
    else:
        parts.append(_bits_between(max(lo, 1e-45), hi, m, rng))
    return np.concatenate(parts)


def around(v: float, k: int) -> np.ndarray:
    """The 2k+1 consecutive float32 centred on float32(v) (v != 0)."""
    b = int(F32(v).view(np.uint32))
    return np.arange(b - k, b + k + 1, dtype=np.int64).astype(np.uint32).view(np.float32)


def special_points(values, k: int = 2048) -> np.ndarray:
    out = []
    for v in values:
        out.append(around(abs(v), k) * (1 if v > 0 else -1))
    return np.concatenate(out)


DOMAINS = {
    "exp": ((-104.0, 89.0), [88.72283, 87.0, -87.33655, -103.27893, -103.97208, 0.3465736, 1e-3]),
    "log": ((0.0, FLT_MAX), [1.0, 1.41421356, 0.70710678, 2.0, 0.5, 1.1754944e-38, 1e-40]),
    "tanh": ((-10.0, 10.0), [0.625, -0.625, 9.0, 1e-3, -1e-3]),
    "sigmoid": ((-110.0, 30.0), [-87.3, -103.3, -104.0, -1e-3, 1e-3, 17.0]),
    "silu": ((-110.0, 30.0), [-87.3, -103.3, -108.0, -1e-3, 1e-3]),
    "softplus": ((-110.0, 30.0), [-87.3, -103.3, -1e-3, 1e-3, 16.6]),
    "mish": ((-110.0, 30.0), [-87.3, -103.3, -1e-3, 1e-3]),
    "gelu": ((-15.0, 8.0), [-1.5, -3.0, -4.5, 1.5, 3.0, 4.5, -13.2, -1e-3, 1e-3]),
    "erf": ((-4.5, 4.5), [1.0, -1.0, 2.0, 3.0, -3.0, 3.9, 1e-3]),
    "sin": ((-math.pi, math.pi), [math.pi, -math.pi, math.pi / 2, math.pi / 4, 1e-3]),
    "cos": ((-math.pi, math.pi), [math.pi, -math.pi, math.pi / 2, -math.pi / 2, math.pi / 4]),
    "tan": ((-math.pi, math.pi), [math.pi, math.pi / 2, -math.pi / 2, math.pi / 4, 1e-3]),
    "arctan": ((-1e30, 1e30), [0.41421356, 2.41421356, -2.41421356, 1.0, 1e-3, 1e8]),
    "rsqrt": ((0.0, FLT_MAX), [1.0, 4.0, 1e-40]),
    "reciprocal": ((-FLT_MAX, FLT_MAX), [1.0, 3.0, 1e-38, 1e38]),
    "sqrt": ((0.0, FLT_MAX), [1.0, 2.0, 1e-40]),
    "square": ((-1.8e19, 1.8e19), [1.0, 1.8446743e19, 1e-23]),
}
N_SWEEP = {"erf": 300_000, "gelu": 300_000}   # math.erf/erfc references are slow; others: 1 M


# ------------------------------------------------------------------------------------------------
# accuracy
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ULP_BOUND))
def test_accuracy_vs_float64(name):
    (lo, hi), specials = DOMAINS[name]
    seed = sum(map(ord, name))          # stable across processes (unlike hash())
    x = np.concatenate([sweep(lo, hi, N_SWEEP.get(name, 1_000_000), seed=seed),
                        special_points(specials)])
    got = M.FUNCTIONS[name](x)
    with np.errstate(all="ignore"):
        ref = REF[name](x.astype(np.float64))
    err = ulp_error(got, ref)
    i = int(np.argmax(err))
    assert err[i] <= ULP_BOUND[name], f"{name}: {err[i]:.3f} ulp at x={x[i]!r} (got {got[i]!r})"
    assert err.mean() < 0.5, f"{name}: mean error {err.mean():.3f} ulp"


def test_gelu_apprx_tanh_accuracy():
    x = np.concatenate([sweep(-12.0, 8.0, 1_000_000, seed=7),
                        special_points([-1.0, -2.0, -5.0, -10.9, 1.0, 1e-3, -1e-3])])
    x64 = x.astype(np.float64)
    err = ulp_error(M.gelu_apprx_tanh(x), REF["gelu_apprx_tanh"](x64))
    scaled = err / np.maximum(1.0, np.abs(_gelu_tanh_v(x64)))
    i = int(np.argmax(scaled))
    assert scaled[i] <= GELU_TANH_SLOPE, f"{scaled[i]:.3f} at x={x[i]!r}"


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_wide_range(name):
    x = sweep(-102943.0, 102943.0, 1_000_000, seed=11)
    # every float32 within 2 ulps of k*pi/2, k = 1..65536: the hardest cases for the reduction
    k = np.arange(1, 65537, dtype=np.float64)
    c = (k * (np.pi / 2)).astype(np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([(c + d).astype(np.uint32).view(np.float32) for d in (-2, -1, 0, 1, 2)])
    near = near[np.abs(near) <= 102943.0]
    x = np.concatenate([x, near, -near])
    err = ulp_error(M.FUNCTIONS[name](x), REF[name](x.astype(np.float64)))
    i = int(np.argmax(err))
    assert err[i] <= ULP_BOUND_TRIG_WIDE[name], f"{name}: {err[i]:.3f} ulp at x={x[i]!r}"


def test_trig_beyond_reduction_range_is_bounded():
    rng = np.random.default_rng(3)
    x = _bits_between(102944.0, FLT_MAX, 200_000, rng)
    x = np.concatenate([x, -x, np.array([FLT_MAX, -FLT_MAX], F32)])
    for f in (M.sin, M.cos):
        r = f(x)
        assert np.all(np.abs(r) <= 1.0)
    assert not np.isnan(M.tan(x)).any()


def test_exact_ops_match_ieee():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2 ** 32, 1_000_000, dtype=np.int64).astype(np.uint32).view(np.float32)
    x = x[~np.isnan(x)]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(M.sqrt(x).view(np.uint32)[x >= 0],
                                      np.sqrt(x).view(np.uint32)[x >= 0])
        np.testing.assert_array_equal(M.reciprocal(x).view(np.uint32),
                                      (F32(1) / x).view(np.uint32))
        np.testing.assert_array_equal(M.square(x).view(np.uint32), (x * x).view(np.uint32))
        np.testing.assert_array_equal(M.rsqrt(x).view(np.uint32)[x >= 0],
                                      (F32(1) / np.sqrt(x)).view(np.uint32)[x >= 0])


# ------------------------------------------------------------------------------------------------
# special values
# ------------------------------------------------------------------------------------------------
INF, NAN = float("inf"), float("nan")
HALF_PI = float(F32(math.pi / 2))
SPECIAL = {
    # name: [(x, expected)], expected compared bitwise (so signed zeros matter)
    "exp": [(INF, INF), (-INF, 0.0), (0.0, 1.0), (-0.0, 1.0), (88.72283, 3.4027985e38),
            (88.72284, INF), (1e30, INF), (-104.0, 0.0), (-1e30, 0.0), (-103.28, 1.4e-45),
            (1e-45, 1.0), (-1e-45, 1.0)],
    "log": [(INF, INF), (-INF, NAN), (0.0, -INF), (-0.0, -INF), (1.0, 0.0), (-1.0, NAN),
            (-1e-45, NAN), (1e-45, -103.27893), (FLT_MAX, 88.72284), (2.0, 0.6931472)],
    "tanh": [(INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (10.0, 1.0), (-9.5, -1.0),
             (1e-40, 1e-40), (-1e-45, -1e-45)],
    "sigmoid": [(INF, 1.0), (-INF, 0.0), (0.0, 0.5), (-0.0, 0.5), (20.0, 1.0), (-110.0, 0.0),
                (-1e30, 0.0), (1e30, 1.0)],
    "silu": [(INF, INF), (-INF, -0.0), (0.0, 0.0), (-0.0, -0.0), (-200.0, -0.0), (-1e30, -0.0),
             (100.0, 100.0), (1e30, 1e30)],
    "silu_dx": [(INF, 1.0), (-INF, -0.0), (0.0, 0.5), (-0.0, 0.5), (-200.0, -0.0), (200.0, 1.0), (1e30, 1.0)],
    "gelu": [(INF, INF), (-INF, -0.0), (0.0, 0.0), (-0.0, -0.0), (-20.0, -0.0), (-1e30, -0.0),
             (10.0, 10.0), (1e30, 1e30)],
    "gelu_apprx_tanh": [(INF, INF), (-INF, -0.0), (0.0, 0.0), (-0.0, -0.0), (-20.0, -0.0),
                        (-1e30, -0.0), (10.0, 10.0), (1e30, 1e30)],
    "softplus": [(INF, INF), (-INF, 0.0), (0.0, 0.6931472), (-0.0, 0.6931472), (100.0, 100.0),
                 (-200.0, 0.0), (1e30, 1e30)],
    "mish": [(INF, INF), (-INF, -0.0), (0.0, 0.0), (-0.0, -0.0), (100.0, 100.0), (-200.0, -0.0),
             (1e30, 1e30)],
    "erf": [(INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (4.0, 1.0), (-10.0, -1.0),
            (1e-45, 1e-45)],
    "sin": [(INF, NAN), (-INF, NAN), (0.0, 0.0), (-0.0, -0.0), (1e-40, 1e-40)],
    "cos": [(INF, NAN), (-INF, NAN), (0.0, 1.0), (-0.0, 1.0)],
    "tan": [(INF, NAN), (-INF, NAN), (0.0, 0.0), (-0.0, -0.0), (-1e-40, -1e-40)],
    "arctan": [(INF, HALF_PI), (-INF, -HALF_PI), (0.0, 0.0), (-0.0, -0.0), (1e30, HALF_PI)],
    "rsqrt": [(INF, 0.0), (0.0, INF), (-0.0, -INF), (-1.0, NAN), (4.0, 0.5)],
    "reciprocal": [(INF, 0.0), (-INF, -0.0), (0.0, INF), (-0.0, -INF), (4.0, 0.25)],
    "sqrt": [(INF, INF), (-INF, NAN), (0.0, 0.0), (-0.0, -0.0), (-1.0, NAN), (4.0, 2.0)],
    "square": [(INF, INF), (-INF, INF), (-0.0, 0.0), (2e19, INF), (-3.0, 9.0)],
    "sign": [(INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (1e-45, 1.0), (-1e-45, -1.0),
             (-3.0, -1.0)],
    "relu": [(INF, INF), (-INF, 0.0), (0.0, 0.0), (-0.0, 0.0), (-1e-45, 0.0), (2.5, 2.5)],
    "abs": [(INF, INF), (-INF, INF), (-0.0, 0.0), (-2.5, 2.5)],
}
QNAN_BITS = 0x7FC00000


def _bits(v) -> int:
    return int(np.asarray(v, dtype=np.float32).view(np.uint32))


@pytest.mark.parametrize("name", NAMES)
def test_special_values(name):
    cases = SPECIAL[name]
    x = np.array([c[0] for c in cases], dtype=np.float32)
    got = M.FUNCTIONS[name](x)
    for xi, (_, want), g in zip(x, cases, got):
        want_bits = QNAN_BITS if math.isnan(want) else _bits(want)
        assert _bits(g) == want_bits, f"{name}({xi!r}) = {g!r} ({_bits(g):#010x}), want {want!r}"


@pytest.mark.parametrize("name", NAMES)
def test_nan_is_canonical_and_keeps_sign(name):
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA12345, 0x7FFFFFFF],
                    dtype=np.uint32).view(np.float32)
    got = M.FUNCTIONS[name](nans).view(np.uint32)
    sign = nans.view(np.uint32) & np.uint32(0x80000000)
    want = np.uint32(QNAN_BITS) if name == "abs" else sign | np.uint32(QNAN_BITS)
    np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape).astype(np.uint32))


def test_exp_underflow_is_gradual():
    x = np.linspace(-103.9, -87.4, 20_001, dtype=np.float32)
    got = M.exp(x)
    ref = np.exp(x.astype(np.float64))
    # subnormal results: the error is at most one subnormal ulp (2^-149) and the result is
    # never flushed to zero while the true value is >= 2^-149
    assert np.all(np.abs(got - ref) <= 2.0 ** -149)
    assert np.all(got[ref >= 2.0 ** -149] > 0)
    assert np.all(np.diff(got.astype(np.float64)) >= 0)


def test_overflow_thresholds():
    # exp: the largest float32 whose exp is finite, and the next one
    assert np.isfinite(M.exp(np.array([88.72283], F32)))[0]
    assert M.exp(np.nextafter(np.array([88.72283], F32), F32(np.inf)))[0] == np.inf
    # the family built on exp never overflows early
    for name in ("silu", "softplus", "mish", "gelu", "gelu_apprx_tanh"):
        r = M.FUNCTIONS[name](np.array([FLT_MAX, 1e38, 100.0], F32))
        np.testing.assert_array_equal(r, np.array([FLT_MAX, 1e38, 100.0], F32), err_msg=name)


# ------------------------------------------------------------------------------------------------
# dtype, shape, determinism, source rules
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 3, 5)])
def test_dtype_and_shape(shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    for name in NAMES:
        r = M.FUNCTIONS[name](x)
        assert isinstance(r, np.ndarray), name
        assert r.dtype == np.float32 and r.shape == x.shape, name


@pytest.mark.parametrize("bad", [np.zeros(3, np.float64), np.zeros(3, np.float16),
                                 np.zeros(3, np.int32), 1.0])
def test_rejects_non_float32(bad):
    for name in NAMES + ["floor", "ceil", "trunc"]:
        with pytest.raises(TypeError):
            M.FUNCTIONS[name](bad)


ROUNDING = ["floor", "ceil", "trunc"]   # exact (no ulp budget): tests/test_rounding_ops.py


def test_function_table():
    assert sorted(M.FUNCTIONS) == sorted(NAMES + ROUNDING)
    for name in NAMES + ROUNDING:
        assert M.FUNCTIONS[name] is getattr(M, name)


def test_deterministic_and_layout_independent():
    rng = np.random.default_rng(2)
    base = rng.integers(0, 2 ** 32, (64, 96), dtype=np.int64).astype(np.uint32).view(np.float32)
    base[::3] = (rng.standard_normal((22, 96)) * 6).astype(np.float32)
    strided = base[::2, ::-3]           # non-contiguous, negative stride
    fortran = np.asfortranarray(base)
    for name in NAMES:
        f = M.FUNCTIONS[name]
        a, b = f(base), f(base)
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=name)
        np.testing.assert_array_equal(f(strided).view(np.uint32),
                                      f(np.ascontiguousarray(strided)).view(np.uint32),
                                      err_msg=name)
        np.testing.assert_array_equal(f(fortran).view(np.uint32), a.view(np.uint32), err_msg=name)
        # elementwise: a one-element call gives the same bits as the element of a big call
        np.testing.assert_array_equal(f(base[5, 7:8]).view(np.uint32), a[5, 7:8].view(np.uint32))


_FORBIDDEN_NP = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh", "cosh",
                 "sin", "cos", "tan", "arctan", "arctan2", "arcsin", "arccos", "power", "float64",
                 "double", "longdouble", "hypot", "logaddexp", "ldexp", "frexp", "cbrt",
                 "fmax", "fmin", "maximum", "minimum", "clip", "round", "around", "float16"}


def test_source_uses_only_fp32_primitives():
    """No libm-style numpy call, no float64, no min/max with implicit NaN rules in the module."""
    tree = ast.parse(inspect.getsource(M))
    bad = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "np" and node.attr in _FORBIDDEN_NP):
            bad.append(f"np.{node.attr} (line {node.lineno})")
        if isinstance(node, ast.Name) and node.id in ("math", "float"):
            bad.append(f"{node.id} (line {node.lineno})")
    assert not bad, bad


def test_constants_are_float32():
    for k, v in vars(M).items():
        if k.isupper() and isinstance(v, (float, np.floating)):
            assert isinstance(v, np.float32), k
        if k.isupper() and isinstance(v, tuple) and v and isinstance(v[0], np.floating):
            assert all(isinstance(c, np.float32) for c in v), k


# ------------------------------------------------------------------------------------------------
# property test on random bit patterns
# ------------------------------------------------------------------------------------------------
def _expect_nan(name, x):
    nan = np.isnan(x)
    if name in ("log", "sqrt", "rsqrt"):
        return nan | (x < 0)
    if name in ("sin", "cos", "tan"):
        return nan | np.isinf(x)
    return nan


_RANGE = {
    "exp": (0.0, INF), "sigmoid": (0.0, 1.0), "tanh": (-1.0, 1.0), "erf": (-1.0, 1.0),
    "sin": (-1.0, 1.0), "cos": (-1.0, 1.0), "arctan": (-HALF_PI, HALF_PI), "softplus": (0.0, INF),
    "relu": (0.0, INF), "abs": (0.0, INF), "sign": (-1.0, 1.0), "sqrt": (-0.0, INF),
    "square": (0.0, INF),
}
_ODD = ("tanh", "erf", "sin", "tan", "arctan", "sign")
_EVEN = ("cos", "abs", "square")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=64))
def test_random_bit_patterns(words):
    x = np.array(words, dtype=np.uint32).view(np.float32)
    neg = -x
    for name in NAMES:
        f = M.FUNCTIONS[name]
        r = f(x)
        assert r.dtype == np.float32 and r.shape == x.shape
        np.testing.assert_array_equal(np.isnan(r), _expect_nan(name, x), err_msg=name)
        ok = ~np.isnan(r)
        if name in _RANGE:
            lo, hi = _RANGE[name]
            assert np.all((r[ok] >= lo) & (r[ok] <= hi)), (name, x[ok], r[ok])
        if name in _ODD:
            np.testing.assert_array_equal(f(neg).view(np.uint32)[ok],
                                          (-r).view(np.uint32)[ok], err_msg=name)
        if name in _EVEN:
            np.testing.assert_array_equal(f(neg).view(np.uint32)[ok], r.view(np.uint32)[ok],
                                          err_msg=name)
    fin = np.isfinite(x)
    with np.errstate(all="ignore"):
        assert np.all(M.softplus(x)[fin] >= x[fin])             # log(1 + e^x) >= x
        assert np.all(np.isfinite(M.sigmoid(x)[fin]))
