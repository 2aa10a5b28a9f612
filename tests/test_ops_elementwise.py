"""Elementwise ops (nl binary/unary ops, nisa tensor_tensor / tensor_scalar / activation /
tensor_copy, where, casts, Python operators and numpy ufuncs on tiles) against plain numpy.

Every kernel processes an [n, F] tensor as ragged [P, FT] tiles with masks
`(i*P + ip < n) & (j*FT + jf < F)` (hypothesis draws n, F, P, FT and the data seed).
Arithmetic is checked bit for bit against tests/oracle.py's restatement of the numerics contract;
transcendentals bit for bit against nki_lite.numerics.fp32math (the definition) and approximately
against float64 numpy.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import dtypes as D
from nki_lite.testing import assert_close

from .oracle import (ARITH, BITWISE, COMPARE, FLOATS, INTS, LOGICAL, F32, Scalar, assert_bits, canon, cdiv,
                     check_dtype, convert_ref, i64_to, f32_to, fast, fp32math_fn, from_f64, map1_kernel, map2_kernel, ragged_cases,
                     ragged_map, ref_ops, related, storage, values, widen)

FLOAT_BINARY = ARITH + COMPARE + LOGICAL
INT_BINARY = ARITH + COMPARE + LOGICAL + BITWISE


def _shift_amounts(rng, shape, dt):
    return rng.integers(0, D.INFO[dt].bits, size=shape).astype(storage(dt))


def _operands(rng, case, dt, op):
    a = values(rng, case.shape, dt)
    if op in ("left_shift", "right_shift"):
        return a, _shift_amounts(rng, case.shape, dt)
    return a, related(rng, a, dt)


# ----------------------------------------------------------------------------- nl binary ops

@pytest.mark.parametrize("op, dt", [(op, dt) for dt in FLOATS for op in FLOAT_BINARY]
                         + [(op, dt) for dt in INTS for op in INT_BINARY])
@fast(3)
@given(case=ragged_cases())
def test_nl_binary(op, dt, case):
    """nl binary ops on float dtypes (fp32 path) and integer dtypes (int64 path, wrapped)."""
    rng = np.random.default_rng(case.seed)
    a, b = _operands(rng, case, dt, op)
    k = map2_kernel(lambda x, y, m: getattr(nl, op)(x, y))
    got = k(a, b, case.P, case.FT, dt)
    assert_bits(got, ref_ops([op], a, dt, [(b, dt)], dt), f"nl.{op} {dt}")


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_right_shift_is_logical(dt):
    """NKI: 'Arithmetic shift right is not supported': right_shift shifts the bit pattern in zeros."""
    ii = np.iinfo(storage(dt))
    a = np.array([[ii.min, -1 if ii.min < 0 else ii.max, ii.max, 5]], dtype=storage(dt))
    b = np.array([[1, 1, 3, 0]], dtype=storage(dt))
    k = map2_kernel(lambda x, y, m: nl.right_shift(x, y))
    got = k(a, b, 1, 4, dt)
    w = D.INFO[dt].bits
    ua = a.astype(np.int64) & ((1 << w) - 1)
    want = (ua >> b.astype(np.int64)).astype(storage(dt))
    assert_bits(got, want, f"right_shift {dt}")


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "subtract", "divide", "less"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float8_e5m2", "int16", "uint32"])
@fast(2)
@given(case=ragged_cases(), out_pick=st.integers(0, 12))
def test_nl_binary_explicit_dtype(op, dt, case, out_pick):
    """dtype= casts the fp32 (or int64) result once to the requested dtype."""
    out_dt = (FLOATS + INTS)[out_pick]
    rng = np.random.default_rng(case.seed)
    a, b = _operands(rng, case, dt, op)
    k = map2_kernel(lambda x, y, m: getattr(nl, op)(x, y, dtype=out_dt))
    got = k(a, b, case.P, case.FT, out_dt)
    assert_bits(got, ref_ops([op], a, dt, [(b, dt)], out_dt), f"nl.{op}({dt}) -> {out_dt}")


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "greater"])
@fast(3)
@given(case=ragged_cases(), dts=st.tuples(st.sampled_from(FLOATS + INTS), st.sampled_from(FLOATS + INTS)))
def test_nl_binary_mixed_dtypes(op, case, dts):
    """Operands of different dtypes: the result dtype is NKI's promotion, the value one fp32 (or int64)
    computation rounded once."""
    da, db = dts
    out_dt = D.promote(da, db)
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, da)
    b = values(rng, case.shape, db)
    k = map2_kernel(lambda x, y, m: getattr(nl, op)(x, y))
    got = k(a, b, case.P, case.FT, out_dt)
    assert_bits(got, ref_ops([op], a, da, [(b, db)], out_dt), f"nl.{op}({da}, {db})")


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum", "minimum", "greater", "equal"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "float8_e4m3", "int8", "int32", "uint16"])
@fast(2)
@given(case=ragged_cases(), scalar=st.sampled_from([0.3, -2.5, 3, -1, 0, 7, 1e30, 1e-40, True, -0.0]),
       reverse=st.booleans())
def test_nl_binary_tile_scalar(op, dt, case, scalar, reverse):
    """tile op scalar (and scalar op tile): the scalar counts as int32/float32/uint8 (bool)."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    s = Scalar(scalar)
    out_dt = D.promote(dt, s.dtype)
    fn = getattr(nl, op)
    k = map1_kernel(lambda x, m: fn(scalar, x) if reverse else fn(x, scalar))
    got = k(a, case.P, case.FT, out_dt)
    assert_bits(got, ref_ops([op], a, dt, [s], out_dt, [reverse]), f"nl.{op} {dt} {scalar!r} reverse={reverse}")


def test_binary_partition_broadcast_requires_broadcast_to():
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        nl.store(out, nl.add(x, y))
        return out

    a = np.ones((4, 8), np.float32)
    with pytest.raises(errors.ShapeError, match="shape_mismatch"):
        k(a, np.ones((3, 8), np.float32))


@fast(4)
@given(case=ragged_cases(max_row_tiles=1, max_col_tiles=1), dt=st.sampled_from(["float32", "bfloat16", "int32"]))
def test_binary_free_broadcast(case, dt):
    """[P, 1] and [1, F]-shaped operands broadcast along free / partition axes ([1, F] via broadcast_to)."""
    rng = np.random.default_rng(case.seed)
    n, F = case.shape
    a = values(rng, (n, F), dt)
    col = values(rng, (n, 1), dt)
    row = values(rng, (1, F), dt)

    @nki.jit
    def k(a, col, row):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        c = nl.load(col)
        r = nl.load(row).broadcast_to((n, F))
        nl.store(out, nl.add(nl.multiply(x, c), r))
        return out

    got = k(a, col, row)
    t = ref_ops(["multiply"], a, dt, [(np.broadcast_to(col, (n, F)), dt)], dt)
    want = ref_ops(["add"], t, dt, [(np.broadcast_to(row, (n, F)), dt)], dt)
    assert_bits(got, want, "broadcast")


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"])
def test_bitwise_on_floats_raises(op):
    k = map2_kernel(lambda x, y, m: getattr(nl, op)(x, y))
    a = np.ones((2, 2), np.float32)
    with pytest.raises(errors.KernelDTypeError, match="needs integer operands"):
        k(a, a, 2, 2, "float32")


def test_power_is_documented_unsupported():
    k = map2_kernel(lambda x, y, m: nl.power(x, y))
    a = np.ones((2, 2), np.float32)
    with pytest.raises(errors.UnsupportedError, match="nl.power"):
        k(a, a, 2, 2, "float32")


@pytest.mark.parametrize("dt", FLOATS + INTS)
@fast(2)
@given(case=ragged_cases())
def test_logical_not(dt, case):
    """nl.logical_not(x) = (x == 0) as bool by default."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = map1_kernel(lambda x, m: nl.logical_not(x))
    assert_bits(k(a, case.P, case.FT, "bool"), ref_ops(["equal"], a, dt, [Scalar(0)], "bool"), f"logical_not {dt}")


@pytest.mark.parametrize("dt", INTS)
@fast(2)
@given(case=ragged_cases())
def test_invert(dt, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = map1_kernel(lambda x, m: nl.invert(x))
    assert_bits(k(a, case.P, case.FT, dt), np.invert(a), f"invert {dt}")


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_invert_on_float_raises(dt):
    k = map1_kernel(lambda x, m: nl.invert(x))
    with pytest.raises(errors.KernelDTypeError, match="integer tile"):
        k(np.ones((2, 2), storage(dt)), 2, 2, dt)


# ----------------------------------------------------------------------------- Python operators / ufuncs

FLOAT_EXPRS = {
    "a + b": (lambda a, b: a + b, lambda r: r(["add"], [("b",)])),
    "a - b": (lambda a, b: a - b, lambda r: r(["subtract"], [("b",)])),
    "a * b": (lambda a, b: a * b, lambda r: r(["multiply"], [("b",)])),
    "a / b": (lambda a, b: a / b, lambda r: r(["divide"], [("b",)])),
    "2.0 * a": (lambda a, b: 2.0 * a, lambda r: r(["multiply"], [2.0], [True])),
    "a * 3": (lambda a, b: a * 3, lambda r: r(["multiply"], [3])),
    "1 - a": (lambda a, b: 1 - a, lambda r: r(["subtract"], [1], [True])),
    "a / 4.0": (lambda a, b: a / 4.0, lambda r: r(["divide"], [4.0])),
    "0.5 / a": (lambda a, b: 0.5 / a, lambda r: r(["divide"], [0.5], [True])),
    "a < b": (lambda a, b: a < b, lambda r: r(["less"], [("b",)])),
    "a >= 0.5": (lambda a, b: a >= 0.5, lambda r: r(["greater_equal"], [0.5])),
    "a == b": (lambda a, b: a == b, lambda r: r(["equal"], [("b",)])),
    "a != b": (lambda a, b: a != b, lambda r: r(["not_equal"], [("b",)])),
    "a > b": (lambda a, b: a > b, lambda r: r(["greater"], [("b",)])),
    "a <= b": (lambda a, b: a <= b, lambda r: r(["less_equal"], [("b",)])),
    "a % b": (lambda a, b: a % b, lambda r: r(["mod"], [("b",)])),
    "a % 2.5": (lambda a, b: a % 2.5, lambda r: r(["mod"], [2.5])),
    "7 % a": (lambda a, b: 7 % a, lambda r: r(["mod"], [7], [True])),
}
INT_EXPRS = {
    "a & b": (lambda a, b: a & b, lambda r: r(["bitwise_and"], [("b",)])),
    "a | b": (lambda a, b: a | b, lambda r: r(["bitwise_or"], [("b",)])),
    "a ^ b": (lambda a, b: a ^ b, lambda r: r(["bitwise_xor"], [("b",)])),
    "a << 2": (lambda a, b: a << 2, lambda r: r(["left_shift"], [2])),
    "a >> 1": (lambda a, b: a >> 1, lambda r: r(["right_shift"], [1])),
    "a + b": FLOAT_EXPRS["a + b"], "a * 3": FLOAT_EXPRS["a * 3"], "1 - a": FLOAT_EXPRS["1 - a"],
    "a < b": FLOAT_EXPRS["a < b"], "a % b": FLOAT_EXPRS["a % b"],
}


def _expr_case(expr_table, expr, dt, case):
    fn, spec = expr_table[expr]
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    b = related(rng, a, dt)

    def r(ops, opnds, revs=None):
        ops_in = [(b, dt) if o == ("b",) else Scalar(o) for o in opnds]
        dts = [dt] + [o[1] if isinstance(o, tuple) else o.dtype for o in ops_in]
        out = dts[0]
        for d in dts[1:]:
            out = D.promote(out, d)
        return out, ref_ops(ops, a, dt, ops_in, out, revs)
    out_dt, want = spec(r)
    k = map2_kernel(lambda x, y, m: fn(x, y))
    return k(a, b, case.P, case.FT, out_dt), want


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "float8_e4m3"])
@pytest.mark.parametrize("expr", list(FLOAT_EXPRS))
@fast(2)
@given(case=ragged_cases())
def test_python_operators_float(expr, dt, case):
    got, want = _expr_case(FLOAT_EXPRS, expr, dt, case)
    assert_bits(got, want, f"{expr} on {dt}")


@pytest.mark.parametrize("dt", ["int8", "uint8", "int32", "uint16"])
@pytest.mark.parametrize("expr", list(INT_EXPRS))
@fast(2)
@given(case=ragged_cases())
def test_python_operators_int(expr, dt, case):
    got, want = _expr_case(INT_EXPRS, expr, dt, case)
    assert_bits(got, want, f"{expr} on {dt}")


INPLACE = {"+=": "add", "-=": "subtract", "*=": "multiply", "/=": "divide"}


def _inplace(x, y, op):
    if op == "+=":
        x += y
    elif op == "-=":
        x -= y
    elif op == "*=":
        x *= y
    else:
        x /= y
    return x


@pytest.mark.parametrize("other", ["tile", "float", "tile_f32"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "int32", "uint8"])
@pytest.mark.parametrize("op", list(INPLACE))
@fast(2)
@given(case=ragged_cases())
def test_inplace_operators(op, dt, other, case):
    """`a op= b` writes into a's tile with a's dtype (no promotion), one rounding."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    bdt = "float32" if other == "tile_f32" else dt
    b = related(rng, a, dt) if bdt == dt else values(rng, case.shape, bdt)

    if other == "float":
        k = map1_kernel(lambda x, m: _inplace(x, 1.5, op))
        got = k(a, case.P, case.FT, dt)
        want = ref_ops([INPLACE[op]], a, dt, [Scalar(1.5)], dt)
    else:
        k = map2_kernel(lambda x, y, m: _inplace(x, y, op))
        got = k(a, b, case.P, case.FT, dt)
        want = ref_ops([INPLACE[op]], a, dt, [(b, bdt)], dt)
    assert_bits(got, want, f"a {op} b ({dt}, {other})")


UFUNCS_BIN = [np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum, np.equal, np.not_equal,
              np.greater, np.greater_equal, np.less, np.less_equal, np.logical_and, np.logical_or, np.logical_xor]
UFUNCS_INT = [np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift]
_UFUNC_OP = {np.divide: "divide", np.add: "add", np.subtract: "subtract", np.multiply: "multiply"}


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
@pytest.mark.parametrize("uf", UFUNCS_BIN, ids=lambda u: u.__name__)
@fast(2)
@given(case=ragged_cases())
def test_numpy_binary_ufuncs_on_tiles(uf, dt, case):
    op = _UFUNC_OP.get(uf, uf.__name__)
    rng = np.random.default_rng(case.seed)
    a, b = _operands(rng, case, dt, op)
    k = map2_kernel(lambda x, y, m: uf(x, y))
    assert_bits(k(a, b, case.P, case.FT, dt), ref_ops([op], a, dt, [(b, dt)], dt), f"np.{uf.__name__} {dt}")


@pytest.mark.parametrize("uf", UFUNCS_INT, ids=lambda u: u.__name__)
@fast(2)
@given(case=ragged_cases())
def test_numpy_bitwise_ufuncs_on_tiles(uf, case):
    dt = "int32"
    rng = np.random.default_rng(case.seed)
    a, b = _operands(rng, case, dt, uf.__name__)
    k = map2_kernel(lambda x, y, m: uf(x, y))
    assert_bits(k(a, b, case.P, case.FT, dt), ref_ops([uf.__name__], a, dt, [(b, dt)], dt), f"np.{uf.__name__}")


def test_numpy_ufunc_mixed_with_scalar():
    """np.multiply(tile, 2.0) and np.add(1, tile) trace like nl ops with a scalar."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    k = map1_kernel(lambda x, m: np.add(1, np.multiply(x, 2.0)))
    want = ref_ops(["add"], ref_ops(["multiply"], a, "float32", [Scalar(2.0)], "float32"), "float32",
                   [Scalar(1)], "float32", [True])
    assert_bits(k(a, 3, 4, "float32"), want, "np ufuncs with scalars")


def test_unknown_numpy_ufunc_raises():
    k = map1_kernel(lambda x, m: np.hypot(x, x))
    with pytest.raises(errors.UnsupportedError, match="hypot"):
        k(np.ones((2, 2), np.float32), 2, 2, "float32")


@pytest.mark.parametrize("op", ["fmod", "mod"])
def test_remainders_special_values(op):
    """nl.fmod (C: the dividend's sign) and nl.mod (Python/numpy: the divisor's sign) on every pair
    of special values, against numpy; ints: a zero divisor gives 0."""
    sp = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 1e-40, -1e-40, 3e38, -3e38,
                   np.inf, -np.inf, np.nan], np.float32)
    a, b = np.meshgrid(sp, sp, indexing="ij")
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    k = map2_kernel(lambda x, y, m: getattr(nl, op)(x, y))
    got = k(a, b, a.shape[0], a.shape[1], "float32")
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a, b)
    assert_bits(got, canon(want), f"nl.{op} specials")
    ai = np.array([[7, -7, 7, -7, 0, 5]], np.int32)
    bi = np.array([[3, 3, -3, -3, 4, 0]], np.int32)
    got_i = k(ai, bi, 1, 6, "int32")
    with np.errstate(all="ignore"):
        want_i = np.where(bi == 0, 0, getattr(np, op)(ai, np.where(bi == 0, 1, bi)))
    np.testing.assert_array_equal(got_i, want_i)



# ----------------------------------------------------------------------------- activations (unary math)

_erf = np.frompyfunc(math.erf, 1, 1)


def _erf64(x):
    return _erf(x).astype(np.float64)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


# name -> (float64 reference, sampler kind, lo, hi, valid(x) on the fp32 inputs)
ACTS = {
    "exp": (np.exp, "uniform", -80, 80, lambda x: np.abs(x) <= 87),
    "log": (np.log, "logpos", -60, 60, lambda x: (x >= 2.0 ** -64) & (x <= 2.0 ** 64)),
    "tanh": (np.tanh, "uniform", -12, 12, np.isfinite),
    "sigmoid": (_sig, "uniform", -60, 60, lambda x: np.abs(x) <= 80),
    "relu": (lambda x: np.maximum(x, 0.0), "mixed", None, None, lambda x: ~np.isnan(x)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "logpos", -80, 90, lambda x: (x >= 2.0 ** -87) & (x <= 2.0 ** 97)),
    "sqrt": (np.sqrt, "logpos", -110, 110, lambda x: (x >= 2.0 ** -116) & (x <= 2.0 ** 118)),
    "square": (np.square, "mixed", None, None, lambda x: np.ones(x.shape, bool)),
    "reciprocal": (lambda x: 1.0 / x, "loguniform", -40, 40,
                   lambda x: (np.abs(x) >= 2.0 ** -42) & (np.abs(x) <= 2.0 ** 42)),
    "abs": (np.abs, "mixed", None, None, lambda x: np.ones(x.shape, bool)),
    "negative": (np.negative, "mixed", None, None, lambda x: np.ones(x.shape, bool)),
    "copy": (lambda x: x, "mixed", None, None, lambda x: np.ones(x.shape, bool)),
    "gelu": (lambda x: 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0))), "uniform", -10, 10, np.isfinite),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
                        "uniform", -10, 10, np.isfinite),
    "silu": (lambda x: x * _sig(x), "uniform", -10, 10, np.isfinite),
    "softplus": (_softplus, "uniform", -10, 10, np.isfinite),
    "erf": (_erf64, "uniform", -5, 5, np.isfinite),
    "sin": (np.sin, "uniform", -math.pi, math.pi, lambda x: np.abs(x) <= math.pi),
    "cos": (np.cos, "uniform", -math.pi, math.pi, lambda x: np.abs(x) <= math.pi),
    "tan": (np.tan, "uniform", -1.4, 1.4, lambda x: np.abs(x) <= 1.4),
    "arctan": (np.arctan, "uniform", -math.pi / 2, math.pi / 2, lambda x: np.abs(x) <= math.pi / 2),
    "mish": (lambda x: x * np.tanh(_softplus(x)), "uniform", -10, 10, np.isfinite),
    "sign": (np.sign, "mixed", None, None, lambda x: ~np.isnan(x)),
}
EXACT_ACTS = {"relu", "square", "abs", "negative", "copy", "sign"}


def act_def(func):
    """The definition of activation `func` on float32 arrays (fp32math; copy/negative are exact)."""
    if func == "copy":
        return lambda x: x
    if func == "negative":
        return lambda x: (-x).astype(F32)
    return fp32math_fn(func)


def act_ref(func, x32, out_dt):
    with np.errstate(all="ignore"):
        y = np.asarray(act_def(func)(np.asarray(x32, F32)), dtype=F32)
    return f32_to(canon(y), out_dt)


def _act_inputs(rng, func, dt, shape):
    _, kind, lo, hi, _ = ACTS[func]
    if kind == "mixed":
        return values(rng, shape, dt, "mixed")
    if kind == "logpos" or kind == "loguniform":
        fi = np.finfo(np.float32) if dt in ("float32", "tfloat32") else None
        if fi is None:
            import ml_dtypes
            fi = ml_dtypes.finfo(storage(dt))
        lo = max(lo, math.log2(float(fi.smallest_subnormal)))
        hi = min(hi, math.log2(float(fi.max)) - 0.01)
    x = values(rng, shape, dt, kind, lo, hi)
    sp = values(rng, shape, dt, "mixed")                 # ~5% specials / random codes mixed in
    return np.where(rng.random(shape) < 0.05, sp, x).astype(storage(dt))


def _check_activation(func, a, dt, got, out_dt):
    x32 = widen(a)
    assert_bits(got, act_ref(func, x32, out_dt), f"{func}({dt}) vs fp32math")
    ref64, _, _, _, valid = ACTS[func]
    with np.errstate(all="ignore"):
        ok = valid(x32.astype(np.float64)) & np.isfinite(x32)
        want64 = ref64(x32.astype(np.float64)[ok])
        want = f32_to(want64.astype(F32), out_dt)
    if func in EXACT_ACTS:
        assert_close(got[ok], want, rtol=0, atol=0)
    else:
        assert_close(got[ok], want, dtype=out_dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("func", [f for f in ACTS if f != "copy"])   # nl.copy is data movement (below)
@fast(2)
@given(case=ragged_cases(max_f=300))
def test_nl_activation(func, dt, case):
    rng = np.random.default_rng(case.seed)
    a = _act_inputs(rng, func, dt, case.shape)
    k = map1_kernel(lambda x, m: getattr(nl, func)(x))
    got = k(a, case.P, case.FT, dt)
    _check_activation(func, a, dt, got, dt)


@pytest.mark.parametrize("dt", ["int8", "int32", "uint16"])
@pytest.mark.parametrize("func", ["abs", "negative", "relu", "square"])
@fast(2)
@given(case=ragged_cases(max_f=300))
def test_nl_activation_int(func, dt, case):
    """Activations on integer tiles compute in fp32 and convert once (truncate, saturate)."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = map1_kernel(lambda x, m: getattr(nl, func)(x))
    got = k(a, case.P, case.FT, dt)
    assert_bits(got, act_ref(func, widen(a), dt), f"{func}({dt})")


@pytest.mark.parametrize("out_dt", ["bfloat16", "float8_e5m2", "float32"])
@pytest.mark.parametrize("func", ["exp", "tanh", "rsqrt"])
@fast(2)
@given(case=ragged_cases(max_f=300))
def test_nl_activation_dtype(func, out_dt, case):
    rng = np.random.default_rng(case.seed)
    a = _act_inputs(rng, func, "float32", case.shape)
    k = map1_kernel(lambda x, m: getattr(nl, func)(x, dtype=out_dt))
    got = k(a, case.P, case.FT, out_dt)
    _check_activation(func, a, "float32", got, out_dt)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("uf", [np.exp, np.log, np.tanh, np.sqrt, np.square, np.reciprocal, np.abs, np.negative,
                                np.sin, np.cos, np.arctan], ids=lambda u: u.__name__)
@fast(2)
@given(case=ragged_cases(max_f=300))
def test_numpy_unary_ufuncs_on_tiles(uf, dt, case):
    func = {"absolute": "abs"}.get(uf.__name__, uf.__name__)
    rng = np.random.default_rng(case.seed)
    a = _act_inputs(rng, func, dt, case.shape)
    k = map1_kernel(lambda x, m: uf(x))
    _check_activation(func, a, dt, k(a, case.P, case.FT, dt), dt)


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
def test_python_unary_operators(dt):
    rng = np.random.default_rng(1)
    a = values(rng, (5, 33), dt)
    k = map1_kernel(lambda x, m: -x)
    assert_bits(k(a, 3, 16, dt), act_ref("negative", widen(a), dt), "-a")
    k2 = map1_kernel(lambda x, m: abs(x))
    assert_bits(k2(a, 3, 16, dt), act_ref("abs", widen(a), dt), "abs(a)")


# ----------------------------------------------------------------------------- nisa.activation

ISA_ACT_OPS = {"np.exp": (np.exp, "exp"), "nl.exp": (nl.exp, "exp"), "nl.tanh": (nl.tanh, "tanh"),
               "nl.sigmoid": (nl.sigmoid, "sigmoid"), "nl.relu": (nl.relu, "relu"),
               "nl.copy": (nl.copy, "copy"), "'identity'": ("identity", "copy"), "nl.square": (nl.square, "square")}


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("bias", [None, "float32", "bfloat16"])
@pytest.mark.parametrize("scale", [1.0, -2.5, "tile"])
@pytest.mark.parametrize("opname", list(ISA_ACT_OPS))
@fast(2)
@given(case=ragged_cases(max_f=300, max_col_tiles=1))
def test_isa_activation(opname, scale, bias, dt, case):
    """out = op(data * scale + bias): scale float or [P, 1] tile, bias [P, 1] tile; each step fp32."""
    op, func = ISA_ACT_OPS[opname]
    rng = np.random.default_rng(case.seed)
    n, F = case.shape
    a = from_f64(rng.uniform(-4, 4, size=(n, F)), dt)
    a = np.where(rng.random((n, F)) < 0.05, values(rng, (n, F), dt), a).astype(storage(dt))
    bias_arr = values(rng, (n, 1), bias or "float32", "nice")
    scale_arr = values(rng, (n, 1), "float32", "nice")

    @nki.jit
    def k(a, bias_in, scale_in, P):
        out = nl.ndarray((n, F), dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(P)[:, None]
        jf = nl.arange(F)[None, :]
        j1 = nl.arange(1)[None, :]
        for i in nl.affine_range(cdiv(n, P)):
            m = i * P + ip < n
            x = nl.load(a[i * P + ip, jf], mask=m)
            kw = {}
            if bias is not None:
                kw["bias"] = nl.load(bias_in[i * P + ip, j1], mask=m)
            kw["scale"] = nl.load(scale_in[i * P + ip, j1], mask=m) if scale == "tile" else scale
            r = nisa.activation(op, x, **kw)
            check_dtype(r, dt)
            nl.store(out[i * P + ip, jf], value=r, mask=m)
        return out

    got = k(a, bias_arr, scale_arr, case.P)
    x = widen(a)
    with np.errstate(all="ignore"):
        if scale == "tile":
            x = (x * widen(scale_arr)).astype(F32)
        elif scale != 1.0:
            x = (x * F32(scale)).astype(F32)
        if bias is not None:
            x = (x + widen(bias_arr)).astype(F32)
    assert_bits(got, act_ref(func, x, dt), f"activation {opname} scale={scale} bias={bias}")
    ref64 = ACTS[func][0]
    ok = np.isfinite(x) & (np.abs(x) < 80)
    with np.errstate(all="ignore"):
        want = f32_to(ref64(x.astype(np.float64))[ok].astype(F32), dt)
    assert_close(got[ok], want, dtype=dt)


def test_isa_activation_scalar_bias_rejected():
    k = map1_kernel(lambda x, m: nisa.activation(nl.exp, x, bias=1.0))
    with pytest.raises(errors.KernelDTypeError, match="bias"):
        k(np.ones((2, 2), np.float32), 2, 2, "float32")


def test_isa_activation_unknown_op_rejected():
    k = map1_kernel(lambda x, m: nisa.activation(np.fmod, x))
    with pytest.raises(errors.UnsupportedError, match="activation function"):
        k(np.ones((2, 2), np.float32), 2, 2, "float32")


# ----------------------------------------------------------------------------- nisa.tensor_tensor

TT_OPS = {"np.add": (np.add, "add"), "np.subtract": (np.subtract, "subtract"), "np.multiply": (np.multiply, "multiply"),
          "np.divide": (np.divide, "divide"), "np.maximum": (np.maximum, "maximum"),
          "nl.minimum": (nl.minimum, "minimum"), "nl.equal": (nl.equal, "equal"), "np.greater": (np.greater, "greater"),
          "nl.less_equal": (nl.less_equal, "less_equal"), "np.logical_and": (np.logical_and, "logical_and"),
          "nl.logical_xor": (nl.logical_xor, "logical_xor"), "'max'": ("max", "maximum"),
          "'multiply'": ("multiply", "multiply")}
TT_INT_OPS = {"np.bitwise_and": (np.bitwise_and, "bitwise_and"), "nl.bitwise_or": (nl.bitwise_or, "bitwise_or"),
              "np.bitwise_xor": (np.bitwise_xor, "bitwise_xor"), "np.left_shift": (np.left_shift, "left_shift"),
              "nl.right_shift": (nl.right_shift, "right_shift")}


@pytest.mark.parametrize("opname, dt", [(o, dt) for dt in ["float32", "bfloat16", "float16", "float8_e5m2", "int32", "uint8"]
                                         for o in TT_OPS]
                         + [(o, dt) for dt in ["int8", "uint16", "int32", "uint32"] for o in TT_INT_OPS])
@fast(2)
@given(case=ragged_cases())
def test_isa_tensor_tensor(opname, dt, case):
    """nisa.tensor_tensor with ops given as numpy ufuncs, nl functions and strings (bitwise ones on
    integer dtypes)."""
    op, name = {**TT_OPS, **TT_INT_OPS}[opname]
    rng = np.random.default_rng(case.seed)
    a, b = _operands(rng, case, dt, name)
    k = map2_kernel(lambda x, y, m: nisa.tensor_tensor(x, y, op=op))
    assert_bits(k(a, b, case.P, case.FT, dt), ref_ops([name], a, dt, [(b, dt)], dt), f"tensor_tensor {opname} {dt}")


@pytest.mark.parametrize("engine", [None, nisa.vector_engine, nisa.gpsimd_engine])
@fast(3)
@given(case=ragged_cases(), dts=st.tuples(st.sampled_from(FLOATS + INTS), st.sampled_from(FLOATS + INTS),
                                          st.sampled_from(FLOATS + INTS)))
def test_isa_tensor_tensor_dtype(engine, case, dts):
    """dtype= names the output dtype; mixed input dtypes compute in fp32 (or int64 if all ints)."""
    da, db, out_dt = dts
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, da)
    b = values(rng, case.shape, db)
    k = map2_kernel(lambda x, y, m: nisa.tensor_tensor(x, y, op=np.subtract, dtype=out_dt, engine=engine))
    assert_bits(k(a, b, case.P, case.FT, out_dt), ref_ops(["subtract"], a, da, [(b, db)], out_dt),
                f"tensor_tensor {da}-{db}->{out_dt}")


def test_isa_tensor_tensor_unknown_op_rejected():
    k = map2_kernel(lambda x, y, m: nisa.tensor_tensor(x, y, op=np.arctan2))
    a = np.ones((2, 2), np.float32)
    with pytest.raises(errors.UnsupportedError, match="not an ALU operation"):
        k(a, a, 2, 2, "float32")


# ----------------------------------------------------------------------------- nisa.tensor_scalar

TS_OPS = ARITH + ["greater", "equal"]


@st.composite
def _ts_operand(draw, int_ok: bool):
    kind = draw(st.sampled_from(["scalar", "tile"]))
    if kind == "scalar":
        vals = [0.5, -3.25, 1e-3, 7, -2, 0, 1e20] if not int_ok else [3, -2, 0, 1, 255, 2.5, -0.75]
        return ("scalar", draw(st.sampled_from(vals)))
    return ("tile", draw(st.sampled_from(["float32", "bfloat16", "int32"] if int_ok else ["float32", "bfloat16"])))


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "float8_e4m3", "int32", "int8", "uint16"])
@pytest.mark.parametrize("op0", TS_OPS)
@fast(3)
@given(case=ragged_cases(max_col_tiles=1), data=st.data())
def test_isa_tensor_scalar(op0, dt, case, data):
    """(data op0 operand0) op1 operand1, operands scalars or [P, 1] tiles, reverse flags; fp32 rounding
    after each op; output dtype = data dtype unless dtype= is given."""
    int_ok = dt in INTS
    op1 = data.draw(st.sampled_from([None] + TS_OPS), label="op1")
    rev0, rev1 = data.draw(st.booleans(), label="reverse0"), data.draw(st.booleans(), label="reverse1")
    o0 = data.draw(_ts_operand(int_ok), label="operand0")
    o1 = data.draw(_ts_operand(int_ok), label="operand1")
    out_dt = data.draw(st.sampled_from([None, "float32", "bfloat16", "int16"]), label="dtype")
    rng = np.random.default_rng(case.seed)
    n, F = case.shape
    a = values(rng, (n, F), dt)
    cols = [values(rng, (n, 1), o[1], "nice") if o[0] == "tile" else np.zeros((n, 1), np.float32) for o in (o0, o1)]
    ops = [op0] + ([op1] if op1 else [])
    res_dt = out_dt or dt

    @nki.jit
    def k(a, c0, c1, P):
        out = nl.ndarray((n, F), dtype=res_dt, buffer=nl.shared_hbm)
        ip = nl.arange(P)[:, None]
        jf = nl.arange(F)[None, :]
        j1 = nl.arange(1)[None, :]
        for i in nl.affine_range(cdiv(n, P)):
            m = i * P + ip < n
            x = nl.load(a[i * P + ip, jf], mask=m)
            opnds = []
            for o, c in ((o0, c0), (o1, c1)):
                opnds.append(nl.load(c[i * P + ip, j1], mask=m) if o[0] == "tile" else o[1])
            kw = {} if out_dt is None else {"dtype": out_dt}
            if op1:
                r = nisa.tensor_scalar(x, getattr(np, op0) if op0 != "greater" else nl.greater, opnds[0],
                                       reverse0=rev0, op1=op1, operand1=opnds[1], reverse1=rev1, mask=m, **kw)
            else:
                r = nisa.tensor_scalar(x, op0, opnds[0], reverse0=rev0, mask=m, **kw)
            check_dtype(r, res_dt)
            nl.store(out[i * P + ip, jf], value=r, mask=m)
        return out

    got = k(a, cols[0], cols[1], case.P)
    refs = []
    for o, c in ((o0, cols[0]), (o1, cols[1])):
        refs.append(Scalar(o[1]) if o[0] == "scalar" else (np.broadcast_to(c, (n, F)), o[1]))
    want = ref_ops(ops, a, dt, refs[:len(ops)], res_dt, [rev0, rev1][:len(ops)])
    assert_bits(got, want, f"tensor_scalar {ops} rev={rev0, rev1} operands={o0, o1} -> {res_dt}")


def test_tensor_scalar_rounds_between_ops():
    """(x * x') - 1 with x = x' = 1 + 2**-12: exact 2**-11 + 2**-24, but rounding after op0 gives 2**-11."""
    x = np.full((2, 3), 1 + 2.0 ** -12, np.float32)
    k = map1_kernel(lambda t, m: nisa.tensor_scalar(t, np.multiply, 1 + 2.0 ** -12, op1=np.subtract, operand1=1.0))
    got = k(x, 2, 3, "float32")
    assert np.all(got == np.float32(2.0 ** -11)), got


def test_tensor_scalar_reverse():
    """reverse0: operand0 op data (here 10 - x and 1 / x)."""
    x = np.array([[1.0, 2.0, 4.0, -8.0]], np.float32)
    k = map1_kernel(lambda t, m: nisa.tensor_scalar(t, np.subtract, 10.0, reverse0=True))
    assert_bits(k(x, 1, 4, "float32"), np.array([[9.0, 8.0, 6.0, 18.0]], np.float32), "10 - x")
    k = map1_kernel(lambda t, m: nisa.tensor_scalar(t, np.add, 1.0, op1=np.divide, operand1=1.0, reverse1=True))
    assert_bits(k(x, 1, 4, "float32"), (np.float32(1) / (x + np.float32(1))).astype(np.float32), "1 / (x + 1)")


def test_tensor_scalar_operand_shape_checked():
    @nki.jit
    def k(a, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_scalar(nl.load(a), np.add, nl.load(c)))
        return out

    with pytest.raises(errors.ShapeError, match=r"\[P, 1\]"):
        k(np.ones((4, 8), np.float32), np.ones((4, 2), np.float32))


# ----------------------------------------------------------------------------- where / copy / casts

@pytest.mark.parametrize("form", ["tile-tile", "tile-scalar", "scalar-tile"])
@pytest.mark.parametrize("dt", FLOATS + INTS)
@fast(2)
@given(case=ragged_cases())
def test_where(dt, form, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    b = values(rng, case.shape, dt)
    cond = values(rng, case.shape, "bool")
    sx = -1.5 if dt in FLOATS else 3
    xs = {"tile-tile": ("a", "b"), "tile-scalar": ("a", sx), "scalar-tile": (sx, "b")}[form]

    def body(ta, tb, cc, m):
        tiles = {"a": ta, "b": tb}
        return nl.where(cc, *[tiles[v] if isinstance(v, str) else v for v in xs])

    @nki.jit
    def k(a, b, c, P, FT, out_dt):
        out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
        ragged_map(out, (a, b, c), P, FT, body, out_dt=out_dt)
        return out

    dts = [dt if isinstance(v, str) else D.scalar_dtype(v) for v in xs]
    out_dt = D.promote(*dts)
    got = k(a, b, cond, case.P, case.FT, out_dt)
    arrs = {"a": a, "b": b}
    as_int = all(d in INTS for d in dts + [out_dt])
    vals = [(arrs[v].astype(np.int64) if as_int else widen(arrs[v])) if isinstance(v, str)
            else (np.int64(v) if as_int else F32(v)) for v in xs]
    sel = np.where(cond, vals[0], vals[1])
    want = i64_to(sel, out_dt) if as_int else f32_to(canon(sel), out_dt)
    assert_bits(got, want, f"where {dt} {form}")


def test_where_condition_from_compare():
    """where(x > y, x, y) == maximum for non-NaN inputs (condition tile from a comparison)."""
    rng = np.random.default_rng(5)
    a = values(rng, (130, 40), "bfloat16", "nice")
    b = values(rng, (130, 40), "bfloat16", "nice")
    k = map2_kernel(lambda x, y, m: nl.where(nl.greater(x, y), x, y))
    got = k(a, b, 128, 40, "bfloat16")
    assert_bits(got, np.where(widen(a) > widen(b), a, b), "where(x>y)")


@pytest.mark.parametrize("dst", FLOATS + INTS + ["bool"])
@pytest.mark.parametrize("src", FLOATS + INTS + ["bool"])
@fast(2)
@given(case=ragged_cases(max_f=200))
def test_copy_cast(src, dst, case):
    """nl.copy(x, dtype=dst): same dtype keeps bits; otherwise convert through fp32 (ints wrap)."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, src)
    k = map1_kernel(lambda x, m: nl.copy(x, dtype=dst))
    assert_bits(k(a, case.P, case.FT, dst), convert_ref(a, src, dst), f"copy {src}->{dst}")


@pytest.mark.parametrize("engine", [None, nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine])
@pytest.mark.parametrize("pair", [("float32", "bfloat16"), ("bfloat16", "float8_e4m3"), ("int32", "int8"),
                                  ("float16", "uint8"), ("uint32", "float32"), ("float32", "float32"),
                                  ("float32", "tfloat32")])
@fast(2)
@given(case=ragged_cases(max_f=200))
def test_isa_tensor_copy(pair, engine, case):
    src, dst = pair
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, src)
    k = map1_kernel(lambda x, m: nisa.tensor_copy(x, dtype=dst, engine=engine))
    assert_bits(k(a, case.P, case.FT, dst), convert_ref(a, src, dst), f"tensor_copy {src}->{dst}")


def test_copy_keeps_nan_payloads_and_rounds_once_on_cast():
    """Data movement keeps bits (NaN payloads, -0); arithmetic canonicalises NaN."""
    u = np.array([[0x7F800001, 0xFFC00123, 0x80000000, 0x7FBFFFFF]], np.uint32)
    a = u.view(np.float32)
    k = map1_kernel(lambda x, m: nl.copy(x))
    assert_bits(k(a, 1, 4, "float32"), a, "copy")
    k = map1_kernel(lambda x, m: nl.add(x, 0.0))
    got = k(a, 1, 4, "float32").view(np.uint32)
    assert got[0, 0] == 0x7FC00000 and got[0, 1] == 0x7FC00000 and got[0, 3] == 0x7FC00000


def test_masked_op_leaves_other_elements_untouched():
    """An op with mask= writes only where the mask holds; the rest of a fresh tile stays uninitialised (NaN)."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(4)[:, None]
        jf = nl.arange(6)[None, :]
        x = nl.load(a)
        r = nl.multiply(x, 2.0, mask=(jf < 4) & (ip >= 1))
        nl.store(out, r)
        return out

    got = k(a)
    assert np.array_equal(got[1:, :4], a[1:, :4] * 2)
    assert np.isnan(got[0]).all() and np.isnan(got[:, 4:]).all()
