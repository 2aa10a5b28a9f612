"""The rest of the legacy op set (lang/ops_isa_ext.py, runtime/interpret_rules_ext.py and the nl
transposes / selects / reductions / constants) against numpy references of the documented semantics.

Two kinds of reference:
- bitwise, where nki_lite's contract fixes the fp32 step sequence (docs/numerics.md and the docstring
  of runtime/interpret_rules_ext.py): each step is restated here in plain numpy (tests/oracle.py's
  fp32 ALU, reduction order and output rounding) and the kernel result must match every bit;
- approximate, against float64 numpy (np.var, np.mean, math.erf, ...) with nki_lite.testing.assert_close.

Each op group ends with its error cases (the documented nki_lite error for unsupported combinations).
The last group runs a kernel of these ops through the legacy `neuronxcc.nki` imports (compat).
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.numerics import fp32math
from nki_lite.testing import assert_close

from .oracle import (F32, alu_f32, assert_bits, canon, convert_ref, f32_to, map1_kernel, map2_kernel,
                     reduce_fp32_ref, ref_ops, Scalar, storage, values, widen)

BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


@pytest.fixture(autouse=True, params=["interpret", "jit"])
def backend(request, monkeypatch):
    """Every test here runs on both backends: the interpreter (the definition) and the JIT."""
    monkeypatch.setenv("NKI_LITE_MODE", request.param)


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def nice(seed, shape, dt="float32", lo=-4.0, hi=4.0):
    """Finite values uniform in [lo, hi], stored in dtype dt."""
    return values(rng_of(seed), shape, dt, "uniform", lo, hi)


def random_bits_f32(seed, shape):
    """float32 arrays of random bit patterns (NaN payloads, infinities, subnormals included)."""
    return rng_of(seed).integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32).view(F32)


# =============================================================================== nl.load_transpose2d

@nki.jit
def load_t2d(a, dt):
    R, C = a.shape
    out = nl.ndarray((C, R), dtype=dt, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a, dtype=dt))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
def test_load_transpose2d_copies_bits(dt):
    """Same dtype: the DMA transposes and keeps every bit (NaN payloads included)."""
    a = random_bits_f32(1, (100, 70)) if dt == "float32" else values(rng_of(1), (100, 70), dt)
    out = load_t2d(a, dt)
    assert_bits(out, np.ascontiguousarray(a.T), f"load_transpose2d {dt}")


def test_load_transpose2d_with_dtype_converts_once():
    a = values(rng_of(2), (64, 48), "float32")
    assert_bits(load_t2d(a, "bfloat16"), convert_ref(a.T, "float32", "bfloat16"), "load_transpose2d f32->bf16")


@nki.jit
def load_t2d_view(a):
    out = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a[16:80, 8:40]))
    return out


def test_load_transpose2d_of_a_view():
    a = nice(3, (100, 50))
    assert_bits(load_t2d_view(a), np.ascontiguousarray(a[16:80, 8:40].T), "load_transpose2d view")


@nki.jit
def load_t2d_ragged(a):
    """[n, C] -> [C, n] in 64-row blocks; the last block is masked on the output's free axis."""
    n, C = a.shape
    out = nl.ndarray((C, n), dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(64)[:, None]
    jc = nl.arange(C)[None, :]
    oc = nl.arange(C)[:, None]
    orow = nl.arange(64)[None, :]
    for i in nl.affine_range((n + 63) // 64):
        t = nl.load_transpose2d(a[i * 64 + ip, jc], mask=(i * 64 + orow < n))
        nl.store(out[oc, i * 64 + orow], t, mask=(i * 64 + orow < n))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_load_transpose2d_ragged_blocks_with_masks(dt):
    a = values(rng_of(4), (150, 20), dt)
    assert_bits(load_t2d_ragged(a), np.ascontiguousarray(a.T), f"ragged load_transpose2d {dt}")


@nki.jit
def load_t2d_3d(a):
    out = nl.ndarray((4, 3), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a))
    return out


def test_load_transpose2d_needs_a_2d_view():
    with pytest.raises(errors.ShapeError, match="2-D"):
        load_t2d_3d(np.zeros((2, 3, 4), F32))


# =============================================================================== nl.transpose

@nki.jit
def nl_transpose(a, dt):
    P, F = a.shape
    out = nl.ndarray((F, P), dtype=dt, buffer=nl.shared_hbm)
    nl.store(out, nl.transpose(nl.load(a), dtype=dt))
    return out


@pytest.mark.parametrize("shape", [(128, 100), (7, 3), (1, 128)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nl_transpose_copies_bits(dt, shape):
    a = random_bits_f32(5, shape) if dt == "float32" else values(rng_of(5), shape, dt)
    assert_bits(nl_transpose(a, dt), np.ascontiguousarray(a.T), f"nl.transpose {dt} {shape}")


def test_nl_transpose_with_dtype():
    a = values(rng_of(6), (40, 24), "float32")
    assert_bits(nl_transpose(a, "bfloat16"), convert_ref(a.T, "float32", "bfloat16"), "nl.transpose dtype=")


def test_nl_transpose_result_over_128_partitions_is_rejected():
    with pytest.raises(errors.ShapeError, match="partition"):
        nl_transpose(np.zeros((64, 256), F32), "float32")


@nki.jit
def nl_transpose_3d(a):
    out = nl.ndarray((4, 2), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.transpose(nl.load(a))
    nl.store(out, t)
    return out


def test_nl_transpose_needs_2d_tile():
    with pytest.raises(errors.ShapeError, match="2-D"):
        nl_transpose_3d(np.zeros((2, 3, 4), F32))


# =============================================================================== nisa.nc_transpose

def nc_transpose_kernel(engine, dtype=None):
    @nki.jit
    def k(a):
        P, F = a.shape
        out = nl.ndarray((F, P), dtype=dtype or a.dtype, buffer=nl.shared_hbm)
        t = nisa.nc_transpose(nl.load(a), engine=engine, dtype=dtype)
        k.spaces.append(t.space)
        nl.store(out, nl.copy(t))
        return out
    k.spaces = []
    return k


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
@pytest.mark.parametrize("shape", [(128, 128), (128, 64), (33, 100)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nc_transpose_on_the_tensor_engine_lands_in_psum(dt, shape):
    k = nc_transpose_kernel(None)
    a = random_bits_f32(7, shape) if dt == "float32" else values(rng_of(7), shape, dt)
    assert_bits(k(a), np.ascontiguousarray(a.T), f"nc_transpose tensor {dt} {shape}")
    assert k.spaces == [ir.Space.PSUM]


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
@pytest.mark.parametrize("shape", [(32, 32), (20, 7), (1, 32)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nc_transpose_small_tiles_use_the_vector_engine(dt, shape):
    for engine in (None, nisa.vector_engine):
        k = nc_transpose_kernel(engine)
        a = values(rng_of(8), shape, dt)
        assert_bits(k(a), np.ascontiguousarray(a.T), f"nc_transpose vector {dt} {shape}")
        assert k.spaces == [ir.Space.SBUF]
        assert "transpose(" in k.inspect_ir(a) and "engine=vector" in k.inspect_ir(a)


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
def test_nc_transpose_small_tile_forced_onto_the_tensor_engine():
    k = nc_transpose_kernel(nisa.tensor_engine)
    a = nice(9, (16, 8))
    assert_bits(k(a), np.ascontiguousarray(a.T), "nc_transpose forced tensor")
    assert k.spaces == [ir.Space.PSUM]


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
def test_nc_transpose_dtype_converts():
    k = nc_transpose_kernel(None, dtype="bfloat16")
    a = values(rng_of(10), (64, 96), "float32")
    assert_bits(k(a), convert_ref(a.T, "float32", "bfloat16"), "nc_transpose dtype=")


@pytest.mark.parametrize("engine,shape,limit", [(nisa.vector_engine, (64, 32), "32x32"),
                                                (nisa.vector_engine, (32, 33), "32x32"),
                                                (None, (64, 256), "128x128"),
                                                (nisa.tensor_engine, (128, 129), "128x128")])
def test_nc_transpose_size_limits(engine, shape, limit):
    with pytest.raises(errors.ShapeError, match=limit) as ei:
        nc_transpose_kernel(engine)(np.zeros(shape, F32))
    assert ei.value.name == "free_size_limit"


@nki.jit
def nc_transpose_3d(a):
    out = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nisa.nc_transpose(nl.load(a))))
    return out


def test_nc_transpose_with_several_free_axes_is_not_built():
    with pytest.raises(errors.UnsupportedError, match="several free axes"):
        nc_transpose_3d(np.zeros((4, 2, 4), F32))


@nki.jit
def nc_transpose_masked(a):
    P, F = a.shape
    out = nl.ndarray((F, P), dtype=a.dtype, buffer=nl.shared_hbm)
    r = nl.arange(F)[:, None]
    c = nl.arange(P)[None, :]
    t = nisa.nc_transpose(nl.load(a), mask=(r < 10))
    res = nl.zeros((F, P), dtype=a.dtype)
    res[r, c] = nl.copy(t[r, c], mask=(r < 10))
    nl.store(out, res)
    return out


def test_nc_transpose_mask_limits_the_written_rows():
    a = nice(11, (128, 64))
    want = np.zeros((64, 128), F32)
    want[:10] = a.T[:10]
    assert_bits(nc_transpose_masked(a), want, "masked nc_transpose")


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


# =============================================================================== shared constants / static_cast

TABLE = (np.arange(96, dtype=np.float64).reshape(8, 12) - 40.0) / 8.0


@nki.jit
def add_constant(a, dt):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = nl.shared_constant(TABLE, dtype=dt)
    assert c.space == ir.Space.HBM and c.dtype_name == dt
    nl.store(out, nl.add(nl.load(a), nl.load(c), dtype=a.dtype))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int8"])
def test_shared_constant_is_a_readable_hbm_tensor(dt):
    a = nice(50, (8, 12))
    c = TABLE.astype(storage(dt))
    assert_bits(add_constant(a, dt), (a + widen(c)).astype(F32), f"shared_constant {dt}")


@nki.jit
def identity_out(n, dt):
    out = nl.ndarray((n, n), dtype=dt, buffer=nl.shared_hbm)
    eye = nl.shared_identity_matrix(n) if dt == "uint8" else nl.shared_identity_matrix(n, dtype=dt)
    assert eye.dtype_name == dt
    nl.store(out, nl.load(eye))
    return out


@pytest.mark.parametrize("dt", ["uint8", "float32", "bfloat16"])
def test_shared_identity_matrix(dt):
    got = identity_out(16, dt)
    assert_bits(got, np.identity(16).astype(storage(dt)), f"identity {dt}")


@nki.jit
def transpose_by_identity_matmul(a):
    """x^T via the Tensor Engine: nc_matmul(stationary=x [K, M], moving=I [K, K]) = x^T @ I."""
    K, M = a.shape
    out = nl.ndarray((M, K), dtype=nl.float32, buffer=nl.shared_hbm)
    eye = nl.load(nl.shared_identity_matrix(K, dtype=nl.bfloat16))
    res = nl.ndarray((M, K), dtype=nl.float32, buffer=nl.psum)
    res[...] = nisa.nc_matmul(nl.load(a), eye)
    nl.store(out, nl.copy(res))
    return out


def test_shared_identity_matrix_feeds_the_tensor_engine():
    a = values(rng_of(51), (64, 96), "bfloat16", "nice")
    assert_bits(transpose_by_identity_matmul(a), widen(a).T.copy(), "identity-matmul transpose")


@nki.jit
def constant_of_tile(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nl.load(nl.shared_constant(t)))
    return out


def test_shared_constant_rejects_tiles():
    with pytest.raises(errors.ArgumentError, match="host data"):
        constant_of_tile(np.zeros((2, 2), F32))


def test_static_cast_on_the_host():
    r = nl.static_cast(np.array([1.7, -2.9, 100.0]), nl.int32)
    assert r.dtype == np.int32 and r.tolist() == [1, -2, 100]
    b = nl.static_cast([0.1, 3.0], "bfloat16")
    assert b.dtype == BF16 and np.array_equal(b, np.array([0.1, 3.0]).astype(BF16))
    h = nl.static_cast(0.1, nl.float16)
    assert np.asarray(h).dtype == np.float16 and float(h) == float(np.float16(0.1))


@nki.jit
def scale_by_static_cast(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    s = nl.static_cast(0.1, nl.float16)          # a trace-time constant, rounded to fp16
    nl.store(out, nl.multiply(nl.load(a), s, dtype=a.dtype))
    return out


def test_static_cast_scalar_as_a_kernel_operand():
    """A static_cast scalar is a trace-time constant with the cast value (0.1 -> fp16 0.0999755859375)."""
    a = nice(52, (4, 8))
    assert_bits(scale_by_static_cast(a), (a * F32(np.float16(0.1))).astype(F32), "x * static_cast(0.1, fp16)")


# =============================================================================== nl.device_print

@nki.jit
def printing(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.device_print("tile t = ", t)
    for i in nl.affine_range(2):
        nl.device_print("row block", t[i * 2:i * 2 + 2, 0:3])
    nl.store(out, t)
    return out


def test_device_print_shows_prefix_and_values(capsys):
    a = np.arange(12, dtype=F32).reshape(4, 3) + 0.5
    out = printing(a)
    assert np.array_equal(out, a)
    text = capsys.readouterr().out
    assert text.count("tile t = ") == 1 and text.count("row block") == 2
    whole, first, second = text.split("row block")

    def numbers(part):
        return [float(v) for v in re.findall(r"-?\d+\.\d+", part)]
    assert numbers(whole) == a.ravel().tolist()
    assert numbers(first) == a[0:2, 0:3].ravel().tolist()          # printed once per loop iteration,
    assert numbers(second) == a[2:4, 0:3].ravel().tolist()         # at run time, with that iteration's data


@nki.jit
def print_masked(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    ip = nl.arange(a.shape[0])[:, None]
    nl.device_print("masked:", t, mask=(ip < 1))
    nl.store(out, t)
    return out


def test_device_print_with_mask_prints_only_the_selected_values(capsys):
    a = np.full((2, 3), 7.25, F32)
    print_masked(a)
    text = capsys.readouterr().out
    assert "masked:" in text and text.count("7.25") == 3


def test_device_print_needs_a_tile():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.device_print("x", 3.0)
        nl.store(out, nl.load(a))
        return out
    with pytest.raises(errors.ArgumentError, match="prints tiles"):
        k(np.zeros((2, 2), F32))


# =============================================================================== nisa.activation (+ reduce)

def act_ref(fn: str, x, scale=None, bias=None):
    """activation's fp32 steps: x*scale rounded, + bias rounded, then the function (fp32math)."""
    y = widen(x)
    with np.errstate(all="ignore"):
        if scale is not None:
            y = (y * widen(scale)).astype(F32)
        if bias is not None:
            y = (y + widen(bias)).astype(F32)
    return canon(getattr(fp32math, fn)(y) if fn != "copy" else y)


@nki.jit
def act_bias_scale(a, b, s, scale_kind, out_dt):
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    x = nl.load(a)
    bias = nl.load(b)
    scale = nl.load(s) if scale_kind == "tile" else scale_kind
    y = nisa.activation(op=np.exp, data=x, bias=bias, scale=scale, dtype=out_dt)
    nl.store(out, y)
    return out


@pytest.mark.parametrize("scale_kind", ["tile", 0.375, 1.0])
@pytest.mark.parametrize("dt,bias_dt", [("float32", "float32"), ("bfloat16", "bfloat16"), ("bfloat16", "float32")])
def test_activation_scale_then_bias_then_function(dt, bias_dt, scale_kind):
    a = values(rng_of(60), (96, 50), dt, "uniform", -6.0, 6.0)
    b = values(rng_of(61), (96, 1), bias_dt, "uniform", -2.0, 2.0)
    s = values(rng_of(62), (96, 1), "float32", "uniform", -1.5, 1.5)
    got = act_bias_scale(a, b, s, scale_kind, dt)
    scale = s if scale_kind == "tile" else (None if scale_kind == 1.0 else np.float32(scale_kind))
    assert_bits(got, f32_to(act_ref("exp", a, scale, b), dt), f"activation exp {dt} bias {bias_dt} {scale_kind}")
    s64 = s.astype(np.float64) if scale_kind == "tile" else float(scale_kind)
    assert_close(got, np.exp(a.astype(np.float64) * s64 + b.astype(np.float64)), dtype=dt,
                 rtol=2e-6 if dt == "float32" else None)


@nki.jit
def act_scalar_bias(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.activation(op=np.exp, data=nl.load(a), bias=1.0))
    return out


def test_activation_bias_must_be_a_tile():
    with pytest.raises(errors.KernelDTypeError, match=r"\[P, 1\] tile"):
        act_scalar_bias(np.zeros((4, 4), F32))


REDUCE_OPS = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply}


def act_reduce_kernel(api: str):
    @nki.jit
    def k(a, b, fn, rop, out_dt):
        P, F = a.shape
        out = nl.ndarray((P, F), dtype=out_dt, buffer=nl.shared_hbm)
        red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        bias = nl.load(b)
        r = nl.ndarray((P, 1), dtype=nl.float32)
        if api == "activation":
            y = nisa.activation(op=fn, data=x, bias=bias, scale=0.5, reduce_op=REDUCE_OPS[rop], reduce_res=r,
                                reduce_cmd=nisa.reduce_cmd.reset_reduce, dtype=out_dt)
        else:
            y = nisa.activation_reduce(op=fn, data=x, bias=bias, scale=0.5, reduce_op=REDUCE_OPS[rop],
                                       reduce_res=r, dtype=out_dt)
        nl.store(out, y)
        nl.store(red, r)
        return out, red
    return k


_ACT_REDUCE = {api: act_reduce_kernel(api) for api in ("activation", "activation_reduce")}


@pytest.mark.parametrize("rop", list(REDUCE_OPS))
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("api", ["activation", "activation_reduce"])
def test_activation_with_reduction(api, dt, rop):
    """reduce_res = reduce_op over the free axis of the *fp32* activation results (nki_lite's order),
    the output tile is rounded to its dtype independently."""
    a = values(rng_of(63), (64, 70), dt, "uniform", -3.0, 3.0)
    b = values(rng_of(64), (64, 1), "float32", "uniform", -1.0, 1.0)
    fn = nl.tanh if rop == "multiply" else np.exp
    fname = "tanh" if rop == "multiply" else "exp"
    out, red = _ACT_REDUCE[api](a, b, fn, rop, dt)
    y = act_ref(fname, a, np.float32(0.5), b)
    assert_bits(out, f32_to(y, dt), f"{api} output")
    assert_bits(red, reduce_fp32_ref(rop, y)[:, None], f"{api} reduce_res {rop}")
    red64 = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}[rop](y.astype(np.float64), 1)
    assert_close(red, red64[:, None], rtol=1e-5)


@nki.jit
def act_reduce_masked(a):
    P, F = a.shape
    red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    r = nl.full((P, 1), 7.0, dtype=nl.float32)
    y = nl.zeros((P, F), dtype=nl.float32)
    y[ip, jf] = nisa.activation(op=nl.copy, data=nl.load(a), reduce_op=np.add, reduce_res=r,
                                mask=(ip < P - 2) & (jf < F - 5))
    nl.store(red, r)
    return red


def test_activation_reduce_respects_the_mask():
    """Masked-out elements do not contribute; partitions the mask excludes keep their reduce_res."""
    a = nice(65, (16, 20))
    want = np.full((16, 1), 7.0, F32)
    want[:14, 0] = reduce_fp32_ref("add", a[:14, :15])
    assert_bits(act_reduce_masked(a), want, "masked activation reduce")


@nki.jit
def act_reduce_bad(a, what):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    r = nl.ndarray((a.shape[0], 1), dtype=nl.float32)
    if what == "no_res":
        y = nisa.activation_reduce(op=np.exp, data=x, reduce_op=np.add, reduce_res=None)
    elif what == "bad_op":
        y = nisa.activation(op=np.exp, data=x, reduce_op=np.bitwise_and, reduce_res=r)
    else:
        y = nisa.activation(op=np.exp, data=x, reduce_op=np.add, reduce_res=nl.ndarray((a.shape[0], 2), nl.float32))
    nl.store(out, y)
    return out


@pytest.mark.parametrize("what,exc,msg", [("no_res", errors.ArgumentError, "reduce_res"),
                                          ("bad_op", errors.UnsupportedError, "reduce_op"),
                                          ("bad_shape", errors.ShapeError, "reduce_res must have shape")])
def test_activation_reduce_errors(what, exc, msg):
    with pytest.raises(exc, match=msg):
        act_reduce_bad(np.zeros((8, 4), F32), what)


# =============================================================================== nisa.tensor_tensor_scan

def scan_ref(a, b, init, op0, op1, r0=False, r1=False):
    """Sequential along the free axis; each op one fp32 step; the carry is the fp32 value."""
    a, b = widen(a), widen(b)
    prev = np.broadcast_to(np.asarray(init, dtype=F32).reshape(-1), (a.shape[0],)).astype(F32)
    out = np.empty(a.shape, F32)
    for j in range(a.shape[1]):
        x, y = (prev, a[:, j]) if r0 else (a[:, j], prev)
        t = alu_f32(op0, x, y)
        x, y = (b[:, j], t) if r1 else (t, b[:, j])
        prev = alu_f32(op1, x, y)
        out[:, j] = prev
    return canon(out)


@nki.jit
def scan_kernel(a, b, init, op0, op1, r0, r1, out_dt):
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    initial = nl.load(init) if not isinstance(init, (int, float)) else init
    r = nisa.tensor_tensor_scan(x, y, initial=initial, op0=op0, op1=op1, reverse0=r0, reverse1=r1)
    assert r.dtype_name == out_dt, r.dtype_name
    nl.store(out, r)
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("init_kind", ["scalar", "tile"])
def test_scan_multiply_add(dt, init_kind):
    """The mamba recurrence h[j] = a[j] * h[j-1] + b[j] with a scalar or a [P, 1] initial state."""
    a = values(rng_of(70), (128, 300), dt, "uniform", 0.5, 1.0)
    b = values(rng_of(71), (128, 300), dt, "uniform", -1.0, 1.0)
    init = 0.5 if init_kind == "scalar" else values(rng_of(72), (128, 1), "float32", "uniform", -2, 2)
    got = scan_kernel(a, b, init, np.multiply, np.add, False, False, dt)
    assert_bits(got, f32_to(scan_ref(a, b, init, "multiply", "add"), dt), f"scan {dt} {init_kind}")
    h = np.broadcast_to(np.asarray(init, np.float64).reshape(-1), (128,)).copy()
    ref = np.empty(a.shape)
    for j in range(a.shape[1]):
        h = a[:, j].astype(np.float64) * h + b[:, j].astype(np.float64)
        ref[:, j] = h
    assert_close(got, ref, rtol=1e-4 if dt == "float32" else None, atol=1e-5 if dt == "float32" else None)


def test_scan_promotes_mixed_input_dtypes():
    a = values(rng_of(73), (8, 40), "bfloat16", "uniform", 0.5, 1.0)
    b = values(rng_of(74), (8, 40), "float32", "uniform", -1.0, 1.0)
    got = scan_kernel(a, b, 0, np.multiply, np.add, False, False, "float32")
    assert_bits(got, scan_ref(a, b, 0, "multiply", "add"), "scan bf16 x f32")


@pytest.mark.parametrize("r0,r1", [(False, False), (True, False), (False, True), (True, True)])
def test_scan_reverse_operands_with_subtract(r0, r1):
    """reverse0: data0 becomes the rhs of op0 (prev - data0); reverse1: data1 becomes the lhs of op1."""
    a = nice(75, (32, 64), lo=-1.0, hi=1.0)
    b = nice(76, (32, 64), lo=-1.0, hi=1.0)
    got = scan_kernel(a, b, 0.25, np.subtract, np.subtract, r0, r1, "float32")
    assert_bits(got, scan_ref(a, b, 0.25, "subtract", "subtract", r0, r1), f"scan subtract r0={r0} r1={r1}")
    # spelled out for the first column
    t = (0.25 - a[:, 0]) if r0 else (a[:, 0] - 0.25)
    c0 = (b[:, 0] - t) if r1 else (t - b[:, 0])
    assert_close(got[:, 0], c0.astype(np.float64), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ops", [("add", "maximum"), ("maximum", "multiply"), ("divide", "add")])
def test_scan_other_operators(ops):
    a = nice(77, (16, 50), lo=0.5, hi=2.0)
    b = nice(78, (16, 50), lo=-1.0, hi=1.0)
    got = scan_kernel(a, b, 1.0, REDUCE_OPS.get(ops[0], np.divide), REDUCE_OPS[ops[1]], False, False, "float32")
    assert_bits(got, scan_ref(a, b, 1.0, *ops), f"scan {ops}")


@nki.jit
def scan_two_halves(a, b, out_dt):
    """c[:, :512] = scan(initial=0); c[:, 512:] = scan(..., initial=c[:, 511]) (the tile's rounded value)."""
    P, F = a.shape
    h = F // 2
    out = nl.ndarray((P, F), dtype=out_dt, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    c = nl.ndarray((P, F), dtype=out_dt)
    c[:, 0:h] = nisa.tensor_tensor_scan(x[:, 0:h], y[:, 0:h], initial=0, op0=np.multiply, op1=np.add)
    c[:, h:F] = nisa.tensor_tensor_scan(x[:, h:F], y[:, h:F], initial=c[:, h - 1], op0=np.multiply, op1=np.add)
    nl.store(out, c)
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_scan_carried_across_two_halves(dt):
    a = values(rng_of(79), (128, 1024), dt, "uniform", 0.5, 1.0)
    b = values(rng_of(80), (128, 1024), dt, "uniform", -1.0, 1.0)
    got = scan_two_halves(a, b, dt)
    first = f32_to(scan_ref(a[:, :512], b[:, :512], 0, "multiply", "add"), dt)
    second = f32_to(scan_ref(a[:, 512:], b[:, 512:], widen(first[:, 511]), "multiply", "add"), dt)
    assert_bits(got, np.concatenate([first, second], axis=1), f"scan halves {dt}")
    if dt == "float32":      # the fp32 carry is the stored value: identical to one scan over 1024
        assert_bits(got, scan_ref(a, b, 0, "multiply", "add"), "scan halves == one scan")


@nki.jit
def scan_masked(a, b):
    P, F = a.shape
    out = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    res = nl.zeros((P, F), dtype=a.dtype)
    res[ip, jf] = nisa.tensor_tensor_scan(nl.load(a), nl.load(b), initial=0, op0=np.multiply, op1=np.add,
                                          mask=(ip < P - 3))
    nl.store(out, res)
    return out


def test_scan_partition_mask():
    a = nice(81, (20, 30), lo=0.5, hi=1.0)
    b = nice(82, (20, 30))
    want = scan_ref(a, b, 0, "multiply", "add")
    want[-3:] = 0
    assert_bits(scan_masked(a, b), want, "masked scan")


@nki.jit
def scan_bad(a, what):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    if what == "shapes":
        r = nisa.tensor_tensor_scan(x, x[:, 0:2], initial=0, op0=np.multiply, op1=np.add)
    else:
        r = nisa.tensor_tensor_scan(x, x, initial=x[:, 0:2], op0=np.multiply, op1=np.add)
    nl.store(out, r)
    return out


@pytest.mark.parametrize("what,msg", [("shapes", "must be equal"), ("initial", r"\[P, 1\] tile")])
def test_scan_shape_errors(what, msg):
    with pytest.raises(errors.ShapeError, match=msg):
        scan_bad(np.zeros((4, 4), F32), what)


# =============================================================================== nisa.iota

@nki.jit
def iota_kernel(dt):
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    row = nl.arange(512)[None, :]
    outs = []
    for expr, shape in ((row, (1, 512)), (ip, (128, 1)), (ip * 64 + jf, (128, 64)), (5 - 2 * ip + 3 * jf, (128, 64)),
                        (row * -1, (1, 512)), (jf - ip, (128, 64))):
        o = nl.ndarray(shape, dtype=dt, buffer=nl.shared_hbm)
        t = nisa.iota(expr, dtype=dt)
        assert t.shape == shape and t.dtype_name == dt
        nl.store(o, t)
        outs.append(o)
    return tuple(outs)


@pytest.mark.parametrize("dt", ["int32", "float32", "bfloat16", "int16"])
def test_iota_expressions(dt):
    """Values computed in int32 and cast once (bf16 rounds large values)."""
    p = np.arange(128)[:, None]
    f = np.arange(64)[None, :]
    r = np.arange(512)[None, :]
    wants = [r, p, p * 64 + f, 5 - 2 * p + 3 * f, -r, f - p]
    for got, want in zip(iota_kernel(dt), wants):
        want = np.broadcast_to(want, got.shape).astype(np.int64)
        ref = want.astype(storage(dt)) if dt.startswith("int") else f32_to(want.astype(F32), dt)
        assert_bits(got, ref, f"iota {dt}")


@nki.jit
def iota_in_loop(n):
    out = nl.ndarray((n, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(32)[:, None]
    jf = nl.arange(4)[None, :]
    for i in nl.affine_range((n + 31) // 32):
        m = i * 32 + ip < n
        t = nisa.iota(i * 32 + ip + 1000 * jf, dtype=nl.float32, mask=m)
        nl.store(out[i * 32 + ip, jf], t, mask=m)
    return out


def test_iota_with_loop_variable_and_mask():
    got = iota_in_loop(70)
    want = (np.arange(70)[:, None] + 1000 * np.arange(4)[None, :]).astype(F32)
    assert_bits(got, want, "iota loop/mask")


@nki.jit
def iota_1d():
    out = nl.ndarray((8, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, nisa.iota(nl.arange(8), dtype=nl.int32))
    return out


def test_iota_needs_a_2d_expression():
    with pytest.raises(errors.KernelSyntaxError, match="2-D"):
        iota_1d()


# =============================================================================== nisa.affine_select

@nki.jit
def causal_select(a, out_dt):
    n, _ = a.shape
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(128)[None, :]
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(n // 128):
            t = nl.load(a[i * 128 + ip, j * 128 + jf])
            s = nisa.affine_select(pred=(i * 128 + ip >= j * 128 + jf), on_true_tile=t, on_false_value=nl.fp32.min,
                                   dtype=out_dt)
            nl.store(out[i * 128 + ip, j * 128 + jf], s)
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_affine_select_causal_mask(dt):
    """Keep key <= query, else nl.fp32.min (rounded to the output dtype: bf16 gives -inf)."""
    a = values(rng_of(90), (256, 256), dt)
    got = causal_select(a, dt)
    q, k = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    want = f32_to(canon(np.where(q >= k, widen(a), F32(nl.fp32.min))), dt)
    assert_bits(got, want, f"causal affine_select {dt}")
    assert nl.fp32.min == FP32_MIN == nisa.fp32.min
    if dt == "bfloat16":
        assert np.isneginf(widen(got[0, 1]))


@nki.jit
def affine_select_strict(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    t = nl.load(a[ix, iy])
    nl.store(out[ix, iy], nisa.affine_select(pred=(iy < ix), on_true_tile=t[ix, iy], on_false_value=-3.5,
                                             mask=(ix < a.shape[0] - 1)))
    return out


def test_affine_select_strict_lower_with_mask():
    a = nice(91, (40, 40))
    got = affine_select_strict(a)
    want = np.where(np.tril(np.ones((40, 40), bool), -1), a, F32(-3.5))
    assert_bits(got[:-1], want[:-1], "strict-lower affine_select")
    assert np.isnan(got[-1]).all()          # the masked row is never written (fresh tile: NaN)


@nki.jit
def affine_select_bad(a, what):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    t = nl.load(a)
    if what == "compound":
        r = nisa.affine_select(pred=(iy < ix) & (ix < 3), on_true_tile=t, on_false_value=0.0)
    elif what == "tile_false":
        r = nisa.affine_select(pred=(iy < ix), on_true_tile=t, on_false_value=t)
    else:
        r = nisa.affine_select(pred=t, on_true_tile=t, on_false_value=0.0)
    nl.store(out, r)
    return out


@pytest.mark.parametrize("what,exc,msg", [("compound", errors.KernelSyntaxError, "cannot combine"),
                                          ("tile_false", errors.ArgumentError, "Python number"),
                                          ("not_affine", errors.KernelSyntaxError, "comparison")])
def test_affine_select_errors(what, exc, msg):
    with pytest.raises(exc, match=msg):
        affine_select_bad(np.zeros((8, 8), F32), what)


# =============================================================================== nisa.bn_stats / nisa.bn_aggr

def group_stats_ref(x):
    """(count, mean, var*count) of x's rows in fp32: sum in the reduction order, one division, then
    the sum of squared deviations in the same order (count 0: zeros)."""
    x = widen(x)
    n = x.shape[1]
    if n == 0:
        z = np.zeros(x.shape[0], F32)
        return z, z, z
    mean = (reduce_fp32_ref("add", x) / F32(n)).astype(F32)
    d = (x - mean[:, None]).astype(F32)
    return np.full(x.shape[0], n, F32), mean, reduce_fp32_ref("add", (d * d).astype(F32))


def bn_stats_ref(x):
    return np.stack([*group_stats_ref(widen(x)[:, 0::2]), *group_stats_ref(widen(x)[:, 1::2])], axis=1)


def bn_aggr_ref(stats):
    """Chan's pairwise combination of (count, mean, M2) triples in order, every step in fp32."""
    s = widen(stats)
    P = s.shape[0]
    na, ma, m2a = np.zeros(P, F32), np.zeros(P, F32), np.zeros(P, F32)
    for k in range(0, s.shape[1], 3):
        nb, mb, m2b = s[:, k], s[:, k + 1], s[:, k + 2]
        n = (na + nb).astype(F32)
        d = (mb - ma).astype(F32)
        with np.errstate(all="ignore"):
            new_m = (ma + (d * (nb / n).astype(F32)).astype(F32)).astype(F32)
            w = ((na * nb).astype(F32) / n).astype(F32)
            new_m2 = ((m2a + m2b).astype(F32) + ((d * d).astype(F32) * w).astype(F32)).astype(F32)
        take = nb > 0
        ma, m2a, na = np.where(take, new_m, ma), np.where(take, new_m2, m2a), np.where(take, n, na)
    with np.errstate(all="ignore"):
        return np.stack([ma, (m2a / na).astype(F32)], axis=1)


@nki.jit
def bn_single(a, stats_dt):
    P, F = a.shape
    stats_out = nl.ndarray((P, 6), dtype=stats_dt, buffer=nl.shared_hbm)
    mv_out = nl.ndarray((P, 2), dtype=stats_dt, buffer=nl.shared_hbm)
    st = nisa.bn_stats(nl.load(a), dtype=stats_dt)
    assert st.shape == (P, 6)
    mv = nisa.bn_aggr(st)
    assert mv.shape == (P, 2) and mv.dtype_name == stats_dt
    nl.store(stats_out, st)
    nl.store(mv_out, mv)
    return stats_out, mv_out


@pytest.mark.parametrize("F", [1, 2, 3, 7, 128, 301, 512])
def test_bn_stats_and_aggr_single_tile(F):
    a = values(rng_of(100 + F), (128, F), "float32", "uniform", -2.0, 6.0)
    st, mv = bn_single(a, "float32")
    assert_bits(st, bn_stats_ref(a), f"bn_stats F={F}")
    assert np.array_equal(st[:, 0], np.full(128, (F + 1) // 2)) and np.array_equal(st[:, 3], np.full(128, F // 2))
    assert_bits(mv, bn_aggr_ref(st), f"bn_aggr F={F}")
    x64 = a.astype(np.float64)
    assert_close(mv[:, 0], x64.mean(axis=1), rtol=1e-5, atol=1e-6)
    assert_close(mv[:, 1], x64.var(axis=1), rtol=2e-5, atol=2e-6)


def test_bn_stats_bf16_input_fp32_stats():
    a = values(rng_of(110), (64, 200), "bfloat16", "uniform", -1.0, 3.0)
    st, mv = bn_single(a, "float32")
    assert_bits(st, bn_stats_ref(a), "bn_stats bf16")
    assert_close(mv[:, 1], a.astype(np.float64).var(axis=1), rtol=2e-5, atol=1e-6)


@nki.jit
def bn_default_dtype(a):
    mv_out = nl.ndarray((a.shape[0], 2), dtype=a.dtype, buffer=nl.shared_hbm)
    mv = nisa.bn_aggr(nisa.bn_stats(nl.load(a)))
    assert mv.dtype_name == a.dtype_name
    nl.store(mv_out, mv)
    return mv_out


def test_bn_stats_default_dtype_is_the_input_dtype():
    """Without dtype=, the statistics are rounded to the input dtype (bf16 here) before bn_aggr."""
    a = values(rng_of(111), (32, 100), "bfloat16", "uniform", -1.0, 3.0)
    st = f32_to(bn_stats_ref(a), "bfloat16")
    assert_bits(bn_default_dtype(a), f32_to(bn_aggr_ref(st), "bfloat16"), "bn_stats/aggr bf16")


@nki.jit
def bn_multi(a):
    """bn_stats over 512-wide chunks written at offsets j*6 of one SBUF tile, then one bn_aggr."""
    P, F = a.shape
    nch = (F + 511) // 512
    out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((P, 6 * nch), dtype=nl.float32)
    x = nl.load(a)
    ip = nl.arange(P)[:, None]
    jb = nl.arange(512)[None, :]
    js = nl.arange(6)[None, :]
    for j in nl.affine_range(nch):
        stats[ip, j * 6 + js] = nisa.bn_stats(x[ip, j * 512 + jb], mask=(j * 512 + jb < F), dtype=nl.float32)
    nl.store(out, nisa.bn_aggr(stats))
    return out


@pytest.mark.parametrize("F", [1024, 1000, 513, 1537])
def test_bn_stats_chunks_aggregated(F):
    a = values(rng_of(120 + F), (128, F), "float32", "uniform", -3.0, 5.0)
    got = bn_multi(a)
    chunks = [bn_stats_ref(a[:, s:s + 512]) for s in range(0, F, 512)]
    assert_bits(got, bn_aggr_ref(np.concatenate(chunks, axis=1)), f"bn chunks F={F}")
    x64 = a.astype(np.float64)
    assert_close(got[:, 0], x64.mean(axis=1), rtol=1e-5, atol=1e-6)
    assert_close(got[:, 1], x64.var(axis=1), rtol=2e-5, atol=2e-6)


@nki.jit
def bn_partition_masked(a):
    P, F = a.shape
    out = nl.ndarray((P, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    st = nl.full((P, 6), 7.0, dtype=nl.float32)
    st[ip, nl.arange(6)[None, :]] = nisa.bn_stats(nl.load(a)[ip, jf], mask=(ip < P - 2), dtype=nl.float32)
    nl.store(out, st)
    return out


def test_bn_stats_partition_mask_leaves_other_partitions():
    a = nice(130, (10, 9))
    want = np.full((10, 6), 7.0, F32)
    want[:8] = bn_stats_ref(a[:8])
    assert_bits(bn_partition_masked(a), want, "partition-masked bn_stats")


@nki.jit
def bn_aggr_bad(a):
    out = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.bn_aggr(nl.load(a)))
    return out


def test_bn_aggr_needs_triples():
    with pytest.raises(errors.ShapeError, match="multiple of 3"):
        bn_aggr_bad(np.zeros((4, 8), F32))


# =============================================================================== nisa.reciprocal

_RECIP = map1_kernel(lambda x, m: nisa.reciprocal(x, mask=m))
_RECIP_F32 = map1_kernel(lambda x, m: nisa.reciprocal(x, mask=m, dtype=nl.float32))


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_reciprocal_is_ieee_division(dt):
    a = values(rng_of(140), (70, 90), dt)
    a.reshape(-1)[:6] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]).astype(storage(dt))
    with np.errstate(all="ignore"):
        want = canon((F32(1.0) / widen(a)).astype(F32))
    assert_bits(_RECIP(a, 64, 50, dt), f32_to(want, dt), f"reciprocal {dt}")
    assert_bits(_RECIP_F32(a, 64, 50, "float32"), want, f"reciprocal {dt} -> f32")
    assert "engine=vector" in _RECIP.inspect_ir(a, 64, 50, dt)


# =============================================================================== nisa.tensor_scalar_reduce

@nki.jit
def ts_reduce(a, s, op0, rop, out_dt):
    P, F = a.shape
    out = nl.ndarray((P, F), dtype=out_dt, buffer=nl.shared_hbm)
    red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((P, 1), dtype=nl.float32)
    operand = nl.load(s) if not isinstance(s, float) else s
    y = nisa.tensor_scalar_reduce(data=nl.load(a), op0=op0, operand0=operand, reduce_op=rop, reduce_res=r,
                                  dtype=out_dt)
    nl.store(out, y)
    nl.store(red, r)
    return out, red


@pytest.mark.parametrize("operand", ["scalar", "tile"])
@pytest.mark.parametrize("op0,rop", [("multiply", "add"), ("subtract", "maximum"), ("add", "minimum")])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_tensor_scalar_reduce(dt, op0, rop, operand):
    a = values(rng_of(150), (64, 100), dt, "uniform", -3.0, 3.0)
    s = 1.25 if operand == "scalar" else values(rng_of(151), (64, 1), "float32", "uniform", -2.0, 2.0)
    out, red = ts_reduce(a, s, REDUCE_OPS.get(op0, np.subtract), REDUCE_OPS[rop], dt)
    y = alu_f32(op0, widen(a), widen(s) if operand == "tile" else F32(s))
    assert_bits(out, f32_to(canon(y), dt), "tensor_scalar_reduce output")
    assert_bits(red, reduce_fp32_ref(rop, y)[:, None], "tensor_scalar_reduce reduce_res")


# =============================================================================== nisa.scalar_tensor_tensor

@nki.jit
def stt(a, s, c, op0, op1, r0, r1, out_dt):
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    operand0 = nl.load(s) if not isinstance(s, (int, float)) else s
    y = nisa.scalar_tensor_tensor(data=nl.load(a), op0=op0, operand0=operand0, op1=op1, operand1=nl.load(c),
                                  reverse0=r0, reverse1=r1, dtype=out_dt)
    nl.store(out, y)
    return out


@pytest.mark.parametrize("r0,r1", [(False, False), (True, True), (True, False)])
@pytest.mark.parametrize("operand", ["scalar", "tile"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_scalar_tensor_tensor(dt, operand, r0, r1):
    """(data op0 operand0) op1 operand1, each op one fp32 step, one output rounding."""
    a = values(rng_of(160), (48, 70), dt, "uniform", -3.0, 3.0)
    c = values(rng_of(161), (48, 70), dt, "uniform", 0.5, 3.0)
    s = 0.75 if operand == "scalar" else values(rng_of(162), (48, 1), "float32", "uniform", 0.5, 2.0)
    got = stt(a, s, c, np.subtract, np.divide, r0, r1, dt)
    o0 = Scalar(s) if operand == "scalar" else (s, "float32")
    want = ref_ops(["subtract", "divide"], a, dt, [o0, (c, dt)], dt, reverses=[r0, r1])
    assert_bits(got, want, f"scalar_tensor_tensor {dt} {operand} r0={r0} r1={r1}")


def test_scalar_tensor_tensor_integer_path():
    a = values(rng_of(163), (16, 20), "int32")
    c = values(rng_of(164), (16, 20), "int32")
    got = stt(a, 3, c, np.add, np.bitwise_xor, False, False, "int32")
    assert_bits(got, ((a.astype(np.int64) + 3) ^ c).astype(np.int32), "scalar_tensor_tensor int32")


@nki.jit
def stt_bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(out, nisa.scalar_tensor_tensor(data=x, op0=np.add, operand0=1.0, op1=np.add, operand1=x[:, 0:1]))
    return out


def test_scalar_tensor_tensor_operand1_must_match_data():
    with pytest.raises(errors.ShapeError, match="operand1 shape"):
        stt_bad(np.zeros((4, 4), F32))


# =============================================================================== nisa.tensor_copy_predicated

@nki.jit
def copy_pred(src_arr, dst_arr, pred_arr, scalar, reverse):
    P, F = dst_arr.shape
    out = nl.ndarray((P, F), dtype=dst_arr.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    dst = nl.load(dst_arr)
    pred = nl.load(pred_arr)
    src = scalar if scalar is not None else nl.load(src_arr)
    nisa.tensor_copy_predicated(src=src, dst=dst, predicate=pred, reverse_pred=reverse, mask=(jf < F - 2))
    nl.store(out, dst)
    return out


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("src_kind", ["tile", "scalar"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_tensor_copy_predicated(dt, src_kind, reverse):
    """dst = predicate ? src : dst in place (reverse_pred flips it); masked elements keep dst."""
    rng = rng_of(170)
    src = values(rng, (32, 40), dt)
    dst = values(rng, (32, 40), dt)
    pred = (rng.random((32, 40)) < 0.4).astype(np.uint8)
    scalar = -1.5 if src_kind == "scalar" else None
    got = copy_pred(src, dst, pred, scalar, reverse)
    take = (pred != 0) != reverse
    take[:, -2:] = False
    new = src if scalar is None else np.full(src.shape, scalar).astype(storage(dt))
    assert_bits(got, np.where(take, new, dst), f"copy_predicated {dt} {src_kind} reverse={reverse}")


# =============================================================================== nisa.max8 / nisa.nc_find_index8

@nki.jit
def top8(a, idx_dt):
    P = a.shape[0]
    vals_out = nl.ndarray((P, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((P, 8), dtype=idx_dt, buffer=nl.shared_hbm)
    x = nl.load(a)
    v = nisa.max8(src=x)
    assert v.shape == (P, 8) and v.dtype_name == x.dtype_name
    i = nisa.nc_find_index8(data=x, vals=v, dtype=idx_dt) if idx_dt != "uint32" else nisa.nc_find_index8(data=x,
                                                                                                       vals=v)
    assert i.dtype_name == idx_dt
    nl.store(vals_out, v)
    nl.store(idx_out, i)
    return vals_out, idx_out


def first_index(x, v):
    out = np.empty(v.shape, np.int64)
    for p in range(x.shape[0]):
        for k in range(v.shape[1]):
            hits = np.flatnonzero(widen(x[p]).ravel() == widen(v[p, k]))
            out[p, k] = hits[0] if len(hits) else 0xFFFFFFFF
    return out


@pytest.mark.parametrize("idx_dt", ["uint32", "uint16"])
@pytest.mark.parametrize("dt,shape", [("float32", (64, 300)), ("bfloat16", (32, 100)), ("float32", (16, 4, 25)),
                                      ("float32", (8, 8))])
def test_max8_and_find_index8(dt, shape, idx_dt):
    """max8 = the 8 largest values descending (np.sort); find_index8 = first occurrence (flattened)."""
    a = values(rng_of(180), shape, dt, "nice")
    vals, idx = top8(a, idx_dt)
    flat = widen(a).reshape(shape[0], -1)
    want = np.sort(flat, axis=1)[:, ::-1][:, :8]
    assert_bits(vals, f32_to(want, dt), f"max8 {dt} {shape}")
    assert_bits(idx, first_index(a.reshape(shape[0], -1), vals).astype(storage(idx_dt)), "find_index8")


def test_max8_with_duplicates_points_at_first_occurrences():
    rng = rng_of(181)
    a = rng.integers(0, 5, size=(20, 30)).astype(F32)
    vals, idx = top8(a, "uint32")
    assert_bits(vals, np.sort(a, axis=1)[:, ::-1][:, :8].copy(), "max8 duplicates")
    want_idx = np.array([[np.flatnonzero(a[p] == v)[0] for v in vals[p]] for p in range(20)])
    assert np.array_equal(idx, want_idx.astype(np.uint32))
    assert (np.diff(idx.astype(np.int64), axis=1) == 0).any()   # repeated values share an index


def test_max8_nan_sorts_first():
    a = np.tile(np.arange(16, dtype=F32), (2, 1))
    a[0, 3] = np.nan
    vals, _ = top8(a, "uint32")
    assert np.isnan(vals[0, 0]) and vals[0, 1:].tolist() == [15, 14, 13, 12, 11, 10, 9]
    assert vals[1].tolist() == [15, 14, 13, 12, 11, 10, 9, 8]


@nki.jit
def top8_masked(a, k):
    P, F = a.shape
    vals_out = nl.ndarray((P, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    x = nl.load(a)
    v = nisa.max8(src=x[ip, jf], mask=(jf < k))
    nl.store(vals_out, v)
    nl.store(idx_out, nisa.nc_find_index8(data=x[ip, jf], vals=v, mask=(jf >= F - k)))
    return vals_out, idx_out


def test_max8_and_find_index8_masks():
    """max8 only sees the unmasked elements; find_index8's mask restricts the searched elements."""
    rng = rng_of(182)
    first = rng.permutation(40).astype(F32).reshape(1, 40).repeat(4, axis=0)
    a = np.concatenate([first, first], axis=1)        # each value occurs at j and j + 40
    vals, idx = top8_masked(a, 40)
    assert_bits(vals, np.sort(first, axis=1)[:, ::-1][:, :8].copy(), "masked max8")
    want = np.array([[np.flatnonzero(first[p] == v)[0] + 40 for v in vals[p]] for p in range(4)])
    assert np.array_equal(idx, want.astype(np.uint32))


@nki.jit
def top8_bad(a, what):
    out = nl.ndarray((a.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    x = nl.load(a)
    if what == "small":
        nl.store(out, nl.copy(nisa.max8(src=x), dtype=nl.uint32))
    elif what == "vals":
        nl.store(out, nisa.nc_find_index8(data=x, vals=x[:, 0:4]))
    else:
        nl.store(out, nisa.nc_find_index8(data=x, vals=x[:, 0:8], dtype=nl.int32))
    return out


@pytest.mark.parametrize("what,shape,exc,msg", [("small", (4, 7), errors.ShapeError, "8..16384"),
                                                ("vals", (4, 16), errors.ShapeError, "8 elements"),
                                                ("dtype", (4, 16), errors.KernelDTypeError, "uint16 or uint32")])
def test_max8_find_index8_errors(what, shape, exc, msg):
    with pytest.raises(exc, match=msg):
        top8_bad(np.zeros(shape, F32), what)


# =============================================================================== nc_matmul perf_mode / get_nc_version

@nki.jit
def mm_perf(a, b, perf_mode):
    K, M = a.shape
    out = nl.ndarray((M, b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode=perf_mode)
    nl.store(out, nl.copy(acc))
    return out


@pytest.mark.parametrize("perf_mode", [None, "double_row", nisa.matmul_perf_mode.double_row,
                                       nisa.matmul_perf_mode.none])
def test_nc_matmul_perf_mode_is_accepted(perf_mode):
    a = values(rng_of(190), (128, 64), "bfloat16", "nice")
    b = values(rng_of(191), (128, 256), "bfloat16", "nice")
    got = mm_perf(a, b, perf_mode)
    zero = np.zeros((64, 256), F32)
    from .oracle import matmul_ref
    assert_bits(got, (zero + matmul_ref(a, b, fused=False)).astype(F32), f"nc_matmul perf_mode={perf_mode}")
    text = mm_perf.inspect_ir(a, b, perf_mode)
    assert ("perf_mode=double_row" in text) == (perf_mode in ("double_row", nisa.matmul_perf_mode.double_row))


@nki.jit
def nc_version_kernel():
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    v = nisa.get_nc_version()
    assert isinstance(v, nisa.nc_version)
    nl.store(out, nl.full((1, 1), int(v), dtype=nl.int32))
    return out


@pytest.mark.parametrize("target,gen", [("trn1", nisa.nc_version.gen2), ("trn2", nisa.nc_version.gen3),
                                        ("trn3", nisa.nc_version.gen4)])
def test_get_nc_version_per_target(target, gen):
    assert int(nc_version_kernel(target=target)[0, 0]) == int(gen)


def test_get_nc_version_is_a_trace_time_constant():
    """The version is known while tracing: it is baked into the traced IR as an immediate."""
    assert "memset(2:int32)" in nc_version_kernel.inspect_ir(target="trn1")
    assert "memset(4:int32)" in nc_version_kernel.inspect_ir(target="trn3")


def test_get_nc_version_outside_a_kernel():
    with pytest.raises(errors.KernelSyntaxError, match="outside"):
        nisa.get_nc_version()


# =============================================================================== legacy imports (compat)

@pytest.fixture
def legacy():
    """`neuronxcc.nki` imports resolving to nki_lite, removed again after the test."""
    import nki_lite.compat as compat
    compat.install()
    try:
        import neuronxcc.nki as lnki
        import neuronxcc.nki.isa as lnisa
        import neuronxcc.nki.language as lnl
        yield lnki, lnl, lnisa
    finally:
        compat.uninstall()


def test_ext_ops_through_legacy_imports(legacy):
    """A kernel of these ops written against `neuronxcc.nki.*` gives the same bits as the references."""
    import neuronxcc.nki as lnki
    import neuronxcc.nki.isa as lnisa
    import neuronxcc.nki.language as lnl
    from neuronxcc.nki.language import par_dim  # noqa: F401 - the legacy from-import form works too
    assert (lnki, lnl, lnisa) == legacy

    @lnki.jit
    def kernel(a, b):
        P, F = a.shape
        o_scan = lnl.ndarray((P, F), dtype=a.dtype, buffer=lnl.shared_hbm)
        o_sel = lnl.ndarray((F, P), dtype=a.dtype, buffer=lnl.shared_hbm)
        o_mv = lnl.ndarray((P, 2), dtype=lnl.float32, buffer=lnl.shared_hbm)
        o_top = lnl.ndarray((P, 8), dtype=lnl.uint32, buffer=lnl.shared_hbm)
        x = lnl.load(a)
        y = lnl.load(b)
        s = lnisa.tensor_tensor_scan(x, y, initial=0, op0=np.multiply, op1=np.add)
        lnl.store(o_scan, s)
        ix, iy = lnl.mgrid[0:F, 0:P]
        xt = lnl.load_transpose2d(a)
        lnl.store(o_sel, lnisa.affine_select(pred=(iy <= ix), on_true_tile=xt, on_false_value=lnl.fp32.min))
        lnl.store(o_mv, lnisa.bn_aggr(lnisa.bn_stats(x, dtype=lnl.float32)))
        lnl.store(o_top, lnisa.nc_find_index8(data=x, vals=lnisa.max8(src=x)))
        return o_scan, o_sel, o_mv, o_top

    a = nice(200, (64, 64), lo=0.5, hi=1.0)
    b = nice(201, (64, 64))
    o_scan, o_sel, o_mv, o_top = kernel(a, b)
    assert_bits(o_scan, scan_ref(a, b, 0, "multiply", "add"), "legacy scan")
    assert_bits(o_sel, np.where(np.tril(np.ones((64, 64), bool)), a.T, F32(FP32_MIN)), "legacy affine_select")
    assert_bits(o_mv, bn_aggr_ref(bn_stats_ref(a)), "legacy bn")
    assert_bits(o_top, first_index(a, np.sort(a, axis=1)[:, ::-1][:, :8]).astype(np.uint32), "legacy top8")


@nki.jit
def top8_partition_masked(a):
    P, F = a.shape
    vals_out = nl.ndarray((P, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    mv_out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    x = nl.load(a)
    v = nl.full((P, 8), -1.0, dtype=a.dtype)
    i = nl.full((P, 8), 99, dtype=nl.uint32)
    mv = nl.full((P, 2), -1.0, dtype=nl.float32)
    v[ip, nl.arange(8)[None, :]] = nisa.max8(src=x[ip, jf], mask=(ip < P - 1))
    i[ip, nl.arange(8)[None, :]] = nisa.nc_find_index8(data=x[ip, jf], vals=v, mask=(ip < P - 2))
    st = nisa.bn_stats(x, dtype=nl.float32)
    mv[ip, nl.arange(2)[None, :]] = nisa.bn_aggr(st[ip, nl.arange(6)[None, :]], mask=(ip >= 1))
    nl.store(vals_out, v)
    nl.store(idx_out, i)
    nl.store(mv_out, mv)
    return vals_out, idx_out, mv_out


def test_per_partition_outputs_keep_masked_partitions():
    """max8 / find_index8 / bn_aggr with a partition mask leave the excluded partitions untouched."""
    a = nice(183, (6, 20))
    vals, idx, mv = top8_partition_masked(a)
    top = np.sort(a, axis=1)[:, ::-1][:, :8]
    assert_bits(vals[:-1], top[:-1].copy(), "masked max8")
    assert (vals[-1] == -1).all()
    assert_bits(idx[:-2], first_index(a[:-2], top[:-2]).astype(np.uint32), "masked find_index8")
    assert (idx[-2:] == 99).all()
    assert_bits(mv[1:], bn_aggr_ref(bn_stats_ref(a))[1:], "masked bn_aggr")
    assert (mv[0] == -1).all()
