"""nl compute ops beyond plain arithmetic (lang/ops_math.py): nl.where, nl.prod / all / var, the
activation functions and the integer logical / bitwise ops, against numpy references of the documented
semantics (bitwise where the fp32 step sequence is fixed, else approximate), on both backends."""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.numerics import fp32math
from nki_lite.testing import assert_close

from .oracle import (F32, assert_bits, canon, f32_to, map1_kernel, map2_kernel, reduce_fp32_ref, storage, values,
                     widen)

from .both_backends import backend, nice, random_bits_f32, rng_of  # noqa: F401 - backend: autouse fixture

BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


# =============================================================================== nl.where

WHERE_FORMS = {
    "tile,tile": (lambda c, x, y: nl.where(c, x, y), lambda c, x, y: np.where(c, x, y)),
    "tile,scalar": (lambda c, x, y: nl.where(c, x, -2.5), lambda c, x, y: np.where(c, x, F32(-2.5))),
    "scalar,tile": (lambda c, x, y: nl.where(c, 0.0, y), lambda c, x, y: np.where(c, F32(0.0), y)),
}


def where_kernel(form, dtype=None):
    body = WHERE_FORMS[form][0]

    @nki.jit
    def k(a, b, out_dt):
        n, F = a.shape
        out = nl.ndarray((n, F), dtype=out_dt, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        c = nl.greater(x, y, dtype=nl.uint8)
        r = body(c, x, y) if dtype is None else nl.where(c, x, y, dtype=dtype)
        assert r.dtype_name == out_dt, r.dtype_name
        nl.store(out, r)
        return out
    return k


@pytest.mark.parametrize("form", list(WHERE_FORMS))
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_where(dt, form):
    """Tile branches keep the tile dtype; a Python float counts as float32 in promotion."""
    a, b = values(rng_of(12), (64, 40), dt), values(rng_of(13), (64, 40), dt)
    out_dt = dt if form == "tile,tile" else "float32"
    want_f32 = WHERE_FORMS[form][1](widen(a) > widen(b), widen(a), widen(b))
    assert_bits(where_kernel(form)(a, b, out_dt), f32_to(canon(want_f32), out_dt), f"where {form} {dt}")


def test_where_dtype_argument():
    a, b = values(rng_of(14), (16, 16), "float32"), values(rng_of(15), (16, 16), "float32")
    want = f32_to(canon(np.where(a > b, a, b)), "bfloat16")
    assert_bits(where_kernel("tile,tile", dtype=nl.bfloat16)(a, b, "bfloat16"), want, "where dtype=")


@nki.jit
def where_int(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, nl.where(nl.less(x, y), x, 7))
    return out


def test_where_on_ints_is_exact():
    a = values(rng_of(16), (32, 50), "int32")
    b = values(rng_of(17), (32, 50), "int32")
    assert_bits(where_int(a, b), np.where(a < b, a, np.int32(7)), "where int32")


@nki.jit
def where_bcast_masked(a, c):
    n, F = a.shape
    out = nl.ndarray((n, F), dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(n)[:, None]
    jf = nl.arange(F)[None, :]
    x = nl.load(a)
    cond = nl.load(c)                       # [n, 1]: broadcast along the free axis
    res = nl.zeros((n, F), dtype=a.dtype)
    res[ip, jf] = nl.where(cond, x, -1.0, dtype=a.dtype, mask=(jf < F - 3))
    nl.store(out, res)
    return out


def test_where_broadcast_condition_and_mask():
    a = nice(18, (24, 10))
    c = (rng_of(19).random((24, 1)) < 0.5).astype(np.uint8)
    want = np.where(c != 0, a, F32(-1.0))
    want[:, -3:] = 0
    assert_bits(where_bcast_masked(a, c), want, "where broadcast/mask")


# =============================================================================== nl.prod / nl.all / nl.var

@nki.jit
def reduce3(a, op, axis, keepdims, out_dt):
    """a [P, F1, F2] -> op(a, axis) stored as [P, k]."""
    P = a.shape[0]
    t = nl.load(a)
    if op == "prod":
        r = nl.prod(t, axis=axis, keepdims=keepdims)
    elif op == "all":
        r = nl.all(t, axis=axis, keepdims=keepdims)
    else:
        r = nl.var(t, axis=axis)
    assert r.dtype_name == out_dt, r.dtype_name
    if len(r.shape) == 3:
        r = r[:, :, 0] if r.shape[2] == 1 else r[:, 0, :]
    out = nl.ndarray(r.shape if len(r.shape) == 2 else (P, 1), dtype=out_dt, buffer=nl.shared_hbm)
    nl.store(out, r)
    return out


def _fold(x, axis):
    """x [P, F1, F2] with the reduced axes moved last and flattened (row-major order)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    keep = [d for d in range(3) if d not in axes]
    t = np.transpose(x, keep + list(axes))
    return t.reshape(t.shape[:len(keep)] + (-1,))


@pytest.mark.parametrize("axis", [2, [1, 2]])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_prod_bitwise_and_approx(dt, axis):
    """nl.prod multiplies in nki_lite's reduction order (16 lanes, halving tree), keeps the dtype."""
    a = values(rng_of(20), (50, 6, 9), dt, "uniform", 0.6, 1.5)
    got = reduce3(a, "prod", axis, False, dt)
    ref = f32_to(canon(reduce_fp32_ref("multiply", _fold(widen(a), axis))), dt)
    ref = ref.reshape(got.shape)
    assert_bits(got, ref, f"prod {dt} {axis}")
    assert_close(got, np.prod(_fold(a.astype(np.float64), axis), axis=-1).reshape(got.shape),
                 rtol=1e-5 if dt == "float32" else 2e-2)


@pytest.mark.parametrize("keepdims", [False, True])
def test_prod_keepdims(keepdims):
    a = values(rng_of(21), (8, 3, 5), "float32", "uniform", 0.5, 2.0)
    got = reduce3(a, "prod", 2, keepdims, "float32")
    assert_bits(got, reduce_fp32_ref("multiply", widen(a)), "prod keepdims")


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("axis", [2, [1, 2]])
def test_all_returns_bool(dt, axis):
    """nl.all is True where every element along the axes is nonzero (NaN is nonzero, -0 is zero)."""
    rng = rng_of(22)
    a = values(rng, (40, 4, 5), dt, "uniform", 1.0, 9.0) if dt != "int32" else rng.integers(1, 9, (40, 4, 5))
    a = a.astype(storage(dt))
    a[rng.random(a.shape) < 0.03] = 0          # most rows all-nonzero, some with a zero
    if dt != "int32":
        a[0, 0, 0] = np.nan
        a[1, 1, 1] = -0.0
    got = reduce3(a, "all", axis, False, "bool")
    want = np.all(_fold(a, axis) != 0, axis=-1).reshape(got.shape)
    assert got.dtype == np.bool_ and np.array_equal(got, want)
    assert want.any() and not want.all()


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_var_bitwise_contract_and_np_var(dt):
    """nl.var = mean((x - mean(x))^2): sum in the reduction order, one fp32 division, each step fp32."""
    a = values(rng_of(23), (64, 1, 37), dt, "uniform", -3.0, 5.0)
    got = reduce3(a, "var", 2, False, dt)
    x = widen(a)[:, 0, :]
    n = F32(x.shape[1])
    mu = (reduce_fp32_ref("add", x) / n).astype(F32)
    d = (x - mu[:, None]).astype(F32)
    v = (reduce_fp32_ref("add", (d * d).astype(F32)) / n).astype(F32)
    assert_bits(got, f32_to(v, dt).reshape(got.shape), f"var {dt}")
    assert_close(got, np.var(a.astype(np.float64)[:, 0, :], axis=1).reshape(got.shape),
                 rtol=1e-5 if dt == "float32" else 1e-2, atol=1e-6)


def test_var_over_two_axes():
    a = nice(24, (16, 3, 7))
    got = reduce3(a, "var", [1, 2], False, "float32")
    assert_close(got, np.var(a.astype(np.float64).reshape(16, -1), axis=1).reshape(got.shape), rtol=1e-5, atol=1e-6)


@nki.jit
def var_ragged(a):
    n, F = a.shape
    out = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(32)[:, None]
    jf = nl.arange(F)[None, :]
    for i in nl.affine_range((n + 31) // 32):
        m = i * 32 + ip < n
        x = nl.load(a[i * 32 + ip, jf], mask=m)
        v = nl.var(x, axis=1, mask=m)
        nl.store(out[i * 32 + ip, nl.arange(1)[None, :]], v, mask=m)
    return out


def test_var_ragged_rows_with_masks():
    a = nice(25, (70, 33))
    assert_close(var_ragged(a), np.var(a.astype(np.float64), axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# =============================================================================== activation functions

ACT_NL = {"gelu": nl.gelu, "silu": nl.silu, "softplus": nl.softplus, "erf": nl.erf, "sin": nl.sin,
          "cos": nl.cos, "tan": nl.tan, "arctan": nl.arctan, "mish": nl.mish, "sign": nl.sign}


def _softplus64(x):
    return np.logaddexp(0.0, x)


def _gelu64(x):
    erfc = np.vectorize(math.erfc)
    return 0.5 * x * erfc(-x / math.sqrt(2.0))


ACT_F64 = {"gelu": _gelu64, "silu": lambda x: x / (1.0 + np.exp(-x)), "softplus": _softplus64,
           "erf": np.vectorize(math.erf), "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
           "mish": lambda x: x * np.tanh(_softplus64(x)), "sign": np.sign}

_ACT_KERNELS = {name: map1_kernel(lambda x, m, f=f: f(x, mask=m)) for name, f in ACT_NL.items()}


def _act_inputs(name, dt, seed):
    rng = rng_of(seed)
    lo, hi = (-1.5, 1.5) if name == "tan" else (-12.0, 12.0)
    x = np.concatenate([values(rng, (3000,), "float32", "uniform", lo, hi),
                        values(rng, (1000,), "float32", "mixed")])
    return f32_to(x, dt).reshape(40, 100)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(ACT_NL))
def test_activation_functions_bitwise_vs_fp32math(name, dt):
    """nl.<fn>(x): widen to fp32, nki_lite's fp32 algorithm (numerics.fp32math), canonical NaN,
    one rounding to the output dtype; ragged [P, FT] tiles with masks."""
    a = _act_inputs(name, dt, 30)
    got = _ACT_KERNELS[name](a, 32, 64, dt)
    want = f32_to(canon(getattr(fp32math, name)(widen(a))), dt)
    assert_bits(got, want, f"nl.{name} {dt}")


@pytest.mark.parametrize("name", list(ACT_NL))
def test_activation_functions_close_to_float64(name):
    rng = rng_of(31)
    lo, hi = (-1.5, 1.5) if name == "tan" else (-12.0, 12.0)
    a = values(rng, (64, 200), "float32", "uniform", lo, hi)
    got = _ACT_KERNELS[name](a, 64, 200, "float32")
    assert_close(got, ACT_F64[name](a.astype(np.float64)), rtol=5e-7, atol=1e-30)
    ab = f32_to(a, "bfloat16")
    got_b = _ACT_KERNELS[name](ab, 64, 200, "bfloat16")
    assert_close(got_b, ACT_F64[name](ab.astype(np.float64)), dtype="bfloat16", atol=1e-30)


def test_sign_of_specials():
    a = np.array([[0.0, -0.0, 3.0, -2.0, np.inf, -np.inf, np.nan, 1e-45]], F32)
    got = _ACT_KERNELS["sign"](a, 1, 8, "float32")
    assert_bits(got, f32_to(canon(fp32math.sign(a)), "float32"), "sign specials")
    assert np.array_equal(got[0, 2:6], [1, -1, 1, -1]) and np.isnan(got[0, 6]) and got[0, 7] == 1


# =============================================================================== integer logical / bitwise ops

INT_OPS = {
    "logical_and": (nl.logical_and, lambda a, b, w: ((a != 0) & (b != 0)).astype(np.int64)),
    "logical_or": (nl.logical_or, lambda a, b, w: ((a != 0) | (b != 0)).astype(np.int64)),
    "logical_xor": (nl.logical_xor, lambda a, b, w: ((a != 0) ^ (b != 0)).astype(np.int64)),
    "bitwise_and": (nl.bitwise_and, lambda a, b, w: a & b),
    "bitwise_or": (nl.bitwise_or, lambda a, b, w: a | b),
    "bitwise_xor": (nl.bitwise_xor, lambda a, b, w: a ^ b),
    "left_shift": (nl.left_shift, lambda a, b, w: a << b),
    "right_shift": (nl.right_shift, lambda a, b, w: (a & ((1 << w) - 1)) >> b),   # logical shift
}
_INT_KERNELS = {name: map2_kernel(lambda x, y, m, f=f: f(x, y, mask=m)) for name, (f, _) in INT_OPS.items()}


@pytest.mark.parametrize("dt", ["int32", "uint8", "int16"])
@pytest.mark.parametrize("name", list(INT_OPS))
def test_integer_logical_and_bitwise_ops(name, dt):
    """Integer inputs: exact int64 computation, wrapped to the output width; shifts are logical."""
    rng = rng_of(40)
    w = np.iinfo(storage(dt)).bits
    a = values(rng, (50, 70), dt)
    if "shift" in name:
        b = rng.integers(0, w, size=a.shape).astype(storage(dt))
    else:
        b = values(rng, (50, 70), dt)
        b[rng.random(b.shape) < 0.2] = 0
    got = _INT_KERNELS[name](a, b, 32, 48, dt)
    want = INT_OPS[name][1](a.astype(np.int64), b.astype(np.int64), w).astype(storage(dt))
    assert_bits(got, want, f"{name} {dt}")


@pytest.mark.parametrize("name", ["bitwise_and", "left_shift"])
def test_bitwise_ops_reject_floats(name):
    with pytest.raises(errors.KernelDTypeError, match="integer"):
        _INT_KERNELS[name](np.ones((4, 4), F32), np.ones((4, 4), F32), 4, 4, "float32")


_INVERT = map1_kernel(lambda x, m: nl.invert(x, mask=m))


@pytest.mark.parametrize("dt", ["int8", "int32", "uint16", "uint8"])
def test_invert_ints(dt):
    a = values(rng_of(41), (33, 21), dt)
    assert_bits(_INVERT(a, 16, 16, dt), np.invert(a), f"invert {dt}")


@pytest.mark.parametrize("dt", ["bool", "float32"])
def test_invert_rejects_bool_and_floats(dt):
    a = np.ones((4, 4), dtype=storage(dt))
    with pytest.raises(errors.KernelDTypeError, match="integer tile"):
        _INVERT(a, 4, 4, dt)
