"""Reductions (nl.sum/max/min/mean/prod/all, nisa.tensor_reduce, numpy reductions on tiles) against
plain numpy.

Add/multiply reductions follow numerics.alu.reduce_fp32's documented order (16 interleaved lanes,
then a halving tree): checked bit for bit against tests/oracle.reduce_fp32_ref (an independent,
straightforward restatement of that order) and approximately against float64 np.sum. Integer
reductions (integer input and output) are exact in int64 and wrap to the output dtype.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.testing import assert_close

from .oracle import (F32, FLOATS, INTS, Scalar, assert_bits, canon, cdiv, check_dtype, f32_to, fast, i64_to,
                     is_int, move_axes_last, ragged_cases, reduce_fp32_ref, reduce_int_ref, ref_ops, storage,
                     values, widen)

NL_REDUCE = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "all": "logical_and"}
OUT_DT = {"all": "bool"}          # nl.all returns bool by default; the others keep the input dtype


def reduce_ref(op: str, x: np.ndarray, dt: str, out_dt: str, negate: bool = False) -> np.ndarray:
    """Reduce x's last axis (op an ALU name) and cast once to out_dt."""
    if is_int(dt) and is_int(out_dt):
        r = reduce_int_ref(op, x)
        return i64_to(-r if negate else r, out_dt)
    r = reduce_fp32_ref(op, widen(x))
    if negate:
        r = (-r).astype(F32)
    return f32_to(canon(r), out_dt)


def mean_ref(x: np.ndarray, out_dt: str) -> np.ndarray:
    s = reduce_fp32_ref("add", widen(x))
    with np.errstate(all="ignore"):
        q = (s / F32(x.shape[-1])).astype(F32)
    return f32_to(canon(q), out_dt)


def reduce_kernel(body, keepdims: bool):
    """kernel(a, P, out_dt): rows of a [n, F] in ragged [P, F] tiles; body(x, mask) is a per-partition
    result of shape (P, 1) (keepdims) or (P,), stored into out [n, 1] or out [n]."""
    @nki.jit
    def kernel(a, P, out_dt):
        n, F = a.shape
        out = nl.ndarray((n, 1) if keepdims else (n,), dtype=out_dt, buffer=nl.shared_hbm)
        ip = nl.arange(P)[:, None]
        jf = nl.arange(F)[None, :]
        for i in nl.affine_range(cdiv(n, P)):
            m = i * P + ip < n
            x = nl.load(a[i * P + ip, jf], mask=m)
            r = body(x, m)
            check_dtype(r, out_dt)
            if keepdims:
                assert r.shape == (P, 1), r.shape
                nl.store(out[i * P + ip, nl.arange(1)[None, :]], value=r, mask=m)
            else:
                assert r.shape == (P,), r.shape
                iv = nl.arange(P)
                nl.store(out[i * P + iv], value=r, mask=(i * P + iv < n))
        return out
    return kernel


def _approx_sum_check(got, x, out_dt, divide: bool = False):
    """|got - sum64| <= F * 2**-23 * sum|x| (+ the output rounding), rows with finite inputs only."""
    x64 = widen(x).astype(np.float64)
    fin = np.all(np.isfinite(x64), axis=-1)
    s64 = x64.sum(-1)
    bound = x64.shape[-1] * 2.0 ** -23 * np.abs(x64).sum(-1)
    if divide:
        s64, bound = s64 / x64.shape[-1], bound / x64.shape[-1]
    g = got.reshape(-1).astype(np.float64)
    ulp = {"float32": 2.0 ** -23, "tfloat32": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}
    tol = bound + ulp.get(out_dt, 0.25) * np.abs(s64) + 1e-30
    ok = fin & (np.abs(s64) < 1e30)
    bad = ok & ~(np.abs(g - s64) <= tol)
    assert not bad.any(), f"{bad.sum()} rows off float64 sum: got {g[bad][:3]} want {s64[bad][:3]}"


# ----------------------------------------------------------------------------- nl reductions, 2-D

@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("dt", FLOATS + INTS)
@pytest.mark.parametrize("fn", list(NL_REDUCE))
@fast(2)
@given(case=ragged_cases(max_col_tiles=1), axis=st.sampled_from([1, -1, (1,), [1]]))
def test_nl_reduce(fn, dt, keepdims, case, axis):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    if fn == "all" and dt not in INTS:
        a = np.where(rng.random(case.shape) < 0.9, np.ones_like(a), a).astype(storage(dt))
    out_dt = OUT_DT.get(fn, dt)
    k = reduce_kernel(lambda x, m: getattr(nl, fn)(x, axis=axis, keepdims=keepdims), keepdims)
    got = k(a, case.P, out_dt)
    want = reduce_ref(NL_REDUCE[fn], a, dt, out_dt)
    assert_bits(got.reshape(-1), want, f"nl.{fn}({dt}) axis={axis}")


@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("dt", FLOATS + ["int8", "int32", "uint16"])
@fast(2)
@given(case=ragged_cases(max_col_tiles=1))
def test_nl_mean(dt, keepdims, case):
    """nl.mean: fp32 sum in the reduction order, then one fp32 division by the count, cast once."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = reduce_kernel(lambda x, m: nl.mean(x, axis=1, keepdims=keepdims), keepdims)
    got = k(a, case.P, dt)
    assert_bits(got.reshape(-1), mean_ref(a, dt), f"nl.mean({dt})")


@pytest.mark.parametrize("fn", ["sum", "mean"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "tfloat32"])
@fast(3)
@given(case=ragged_cases(max_col_tiles=1))
def test_sum_close_to_float64(fn, dt, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt, "nice")
    k = reduce_kernel(lambda x, m: getattr(nl, fn)(x, axis=1, dtype=nl.float32), False)
    got = k(a, case.P, "float32")
    _approx_sum_check(got, a, "float32", divide=(fn == "mean"))
    want = reduce_ref("add", a, dt, "float32") if fn == "sum" else mean_ref(a, "float32")
    assert_bits(got, want, f"nl.{fn}({dt}, dtype=float32)")


@pytest.mark.parametrize("dt", ["bfloat16", "float8_e4m3", "int8", "uint8"])
@pytest.mark.parametrize("fn", ["sum", "max", "prod"])
@fast(2)
@given(case=ragged_cases(max_col_tiles=1))
def test_nl_reduce_dtype(fn, dt, case):
    """dtype= on a reduction: narrow inputs reduced into a wider output (float32 / int32)."""
    out_dt = "int32" if dt in INTS else "float32"
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = reduce_kernel(lambda x, m: getattr(nl, fn)(x, axis=1, dtype=out_dt), False)
    got = k(a, case.P, out_dt)
    assert_bits(got, reduce_ref(NL_REDUCE[fn], a, dt, out_dt), f"nl.{fn}({dt}, dtype={out_dt})")


def test_reduction_order_is_the_documented_one():
    """A case where the lane order and a sequential sum differ: [1, 2**-24 x 16 in lane 1.., ...]."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 1.0
    x[0, 1:32] = 2.0 ** -24
    k = reduce_kernel(lambda t, m: nl.sum(t, axis=1), False)
    got = k(x, 1, "float32")
    seq = np.float32(0)
    for v in x[0]:
        seq = np.float32(seq + v)
    assert seq == np.float32(1.0)                     # sequential: every tiny addend is lost
    want = reduce_fp32_ref("add", x)                   # lanes: the tiny values pair up first
    assert want[0] != seq
    assert_bits(got, want, "lane order")


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
@fast(3)
@given(case=ragged_cases(max_col_tiles=1), data=st.data())
def test_reduce_with_free_axis_mask(dt, case, data):
    """mask= on the free axis: masked-off elements do not take part (identity lanes)."""
    n, F = case.shape
    mcols = data.draw(st.integers(1, F), label="mcols")
    rng = np.random.default_rng(case.seed)
    a = values(rng, (n, F), dt)

    @nki.jit
    def k(a, P):
        out = nl.ndarray((n, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(P)[:, None]
        jf = nl.arange(F)[None, :]
        j1 = nl.arange(1)[None, :]
        for i in nl.affine_range(cdiv(n, P)):
            m = i * P + ip < n
            x = nl.load(a[i * P + ip, jf], mask=m)
            r = nl.sum(x, axis=1, keepdims=True, mask=m & (jf < mcols))
            nl.store(out[i * P + ip, j1], value=r, mask=m)
        return out

    assert_bits(k(a, case.P).reshape(-1), reduce_ref("add", a[:, :mcols], dt, dt), "masked sum")


# ----------------------------------------------------------------------------- 3-D tiles, multiple axes

@pytest.mark.parametrize("axis", [1, 2, -1, (1, 2), [2, 1]])
@pytest.mark.parametrize("fn", ["sum", "max", "prod", "all"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
@fast(2)
@given(P=st.integers(1, 128), n_tiles=st.integers(1, 2), F1=st.integers(1, 12), F2=st.integers(1, 40),
       seed=st.integers(0, 2 ** 32 - 1), keepdims=st.booleans())
def test_reduce_3d(fn, dt, axis, P, n_tiles, F1, F2, seed, keepdims):
    n = (n_tiles - 1) * P + 1 + seed % P
    rng = np.random.default_rng(seed)
    a = values(rng, (n, F1, F2), dt)
    axes = sorted({(x + 3) % 3 for x in (axis if isinstance(axis, (list, tuple)) else [axis])})
    kept = tuple(1 if d in axes else s for d, s in enumerate((n, F1, F2)))
    out_shape = kept if keepdims else tuple(s for d, s in enumerate((n, F1, F2)) if d not in axes)
    out_dt = OUT_DT.get(fn, dt)

    @nki.jit
    def k(a):
        out = nl.ndarray(out_shape, dtype=out_dt, buffer=nl.shared_hbm)
        for i in nl.affine_range(cdiv(n, P)):
            g = nl.mgrid[0:P, 0:F1, 0:F2]
            m = i * P + g[0] < n
            x = nl.load(a[i * P + g[0], g[1], g[2]], mask=m)
            r = getattr(nl, fn)(x, axis=axis, keepdims=keepdims)
            want_shape = tuple(1 if d in axes else s for d, s in enumerate((P, F1, F2)))
            if not keepdims:
                want_shape = tuple(s for d, s in enumerate(want_shape) if d not in axes)
            assert r.shape == want_shape, (r.shape, want_shape)
            if len(out_shape) == 3:
                o = nl.mgrid[0:P, 0:out_shape[1], 0:out_shape[2]]
                nl.store(out[i * P + o[0], o[1], o[2]], value=r, mask=(i * P + o[0] < n))
            elif len(out_shape) == 2:
                o = nl.mgrid[0:P, 0:out_shape[1]]
                nl.store(out[i * P + o[0], o[1]], value=r, mask=(i * P + o[0] < n))
            else:
                iv = nl.arange(P)
                nl.store(out[i * P + iv], value=r, mask=(i * P + iv < n))
        return out

    got = k(a)
    want = reduce_ref(NL_REDUCE[fn], move_axes_last(a, axes), dt, out_dt)
    assert_bits(got.reshape(want.shape), want, f"nl.{fn} axis={axis} keepdims={keepdims}")


@pytest.mark.parametrize("axis", [0, (0, 1), 2, 5])
def test_invalid_reduction_axis_raises(axis):
    k = reduce_kernel(lambda x, m: nl.sum(x, axis=axis), False)
    with pytest.raises(errors.ShapeError, match="free axes"):
        k(np.ones((4, 8), np.float32), 4, "float32")


# ----------------------------------------------------------------------------- (P,) results broadcast per partition

@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
@fast(3)
@given(case=ragged_cases(max_col_tiles=1))
def test_partition_vector_broadcasts_per_partition(dt, case):
    """x - nl.max(x, axis=1): the (P,) result lines up with the partition axis (not numpy's trailing
    alignment), like the softmax tutorial; then x * reciprocal(sum)."""
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt, "nice")
    n, F = case.shape

    @nki.jit
    def k(a, P):
        out = nl.ndarray((n, F), dtype=a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((n, F), dtype=nl.float32, buffer=nl.shared_hbm)
        ip = nl.arange(P)[:, None]
        jf = nl.arange(F)[None, :]
        for i in nl.affine_range(cdiv(n, P)):
            m = i * P + ip < n
            x = nl.load(a[i * P + ip, jf], mask=m)
            mx = nl.max(x, axis=1)
            assert mx.shape == (P,)
            d = nl.subtract(x, mx)
            nl.store(out[i * P + ip, jf], value=d, mask=m)
            s = nl.sum(x, axis=1, dtype=nl.float32)
            nl.store(out2[i * P + ip, jf], value=x * s, mask=m)
        return out, out2

    got, got2 = k(a, case.P)
    mx = reduce_ref("maximum", a, dt, dt)
    want = ref_ops(["subtract"], a, dt, [(np.broadcast_to(mx[:, None], (n, F)), dt)], dt)
    assert_bits(got, want, "x - max(x)")
    s = reduce_ref("add", a, dt, "float32")
    want2 = ref_ops(["multiply"], a, dt, [(np.broadcast_to(s[:, None], (n, F)), "float32")], "float32")
    assert_bits(got2, want2, "x * sum(x)")


def test_partition_vector_scalar_op():
    """nl.sum(x, axis=1) / F then rsqrt-free use: a (P,) tile combined with a Python scalar."""
    a = (np.arange(3 * 7, dtype=np.float32).reshape(3, 7) - 4) / 3
    k = reduce_kernel(lambda x, m: nl.sum(x, axis=1) / 7 + 1.0, False)
    s = reduce_fp32_ref("add", a)
    want = ref_ops(["add"], ref_ops(["divide"], s, "float32", [Scalar(7)], "float32"), "float32",
                   [Scalar(1.0)], "float32")
    assert_bits(k(a, 3, "float32"), want, "sum/7 + 1")


# ----------------------------------------------------------------------------- nisa.tensor_reduce

ISA_REDUCE = {"np.add": (np.add, "add"), "np.max": (np.max, "maximum"), "np.maximum": (np.maximum, "maximum"),
              "np.min": (np.min, "minimum"), "np.multiply": (np.multiply, "multiply"), "nl.sum": (nl.sum, "add"),
              "nl.max": (nl.max, "maximum"), "'min'": ("min", "minimum"),
              "np.logical_and": (np.logical_and, "logical_and"), "np.logical_or": (np.logical_or, "logical_or")}


@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float8_e5m2", "int32", "int8", "uint16"])
@pytest.mark.parametrize("opname", list(ISA_REDUCE))
@fast(2)
@given(case=ragged_cases(max_col_tiles=1), keepdims=st.booleans())
def test_isa_tensor_reduce(opname, dt, negate, case, keepdims):
    op, name = ISA_REDUCE[opname]
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = reduce_kernel(lambda x, m: nisa.tensor_reduce(op, x, axis=1, negate=negate, keepdims=keepdims), keepdims)
    got = k(a, case.P, dt)
    assert_bits(got.reshape(-1), reduce_ref(name, a, dt, dt, negate), f"tensor_reduce {opname} negate={negate}")


@pytest.mark.parametrize("out_dt", ["float32", "bfloat16", "int32"])
@fast(2)
@given(case=ragged_cases(max_col_tiles=1))
def test_isa_tensor_reduce_dtype(out_dt, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, "float16")
    k = reduce_kernel(lambda x, m: nisa.tensor_reduce(np.add, x, axis=[1], dtype=out_dt, keepdims=True), True)
    assert_bits(k(a, case.P, out_dt).reshape(-1), reduce_ref("add", a, "float16", out_dt), "tensor_reduce dtype")


# ----------------------------------------------------------------------------- numpy reductions on tiles

NP_REDUCE = {"np.sum": (lambda x: np.sum(x, axis=1), "add"), "np.max": (lambda x: np.max(x, axis=1), "maximum"),
             "np.amin": (lambda x: np.amin(x, axis=1), "minimum"),
             "np.prod": (lambda x: np.prod(x, axis=1), "multiply"),
             "np.all": (lambda x: np.all(x, axis=1), "logical_and"),
             "np.add.reduce": (lambda x: np.add.reduce(x, axis=1), "add"),
             "np.maximum.reduce": (lambda x: np.maximum.reduce(x, axis=1), "maximum"),
             "np.mean": (lambda x: np.mean(x, axis=1), "mean")}


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("name", list(NP_REDUCE))
@fast(2)
@given(case=ragged_cases(max_col_tiles=1))
def test_numpy_reductions_on_tiles(name, dt, case):
    fn, op = NP_REDUCE[name]
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    out_dt = "bool" if name == "np.all" else dt
    k = reduce_kernel(lambda x, m: fn(x), False)
    got = k(a, case.P, out_dt)
    want = mean_ref(a, dt) if op == "mean" else reduce_ref(op, a, dt, out_dt)
    assert_bits(got, want, name)


def test_reduce_of_hbm_tensor_raises():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.sum(a, axis=1, keepdims=True))
        return out

    with pytest.raises(errors.MemorySpaceError, match="hbm"):
        k(np.ones((4, 8), np.float32))


def test_nan_propagates_through_max_and_sum():
    a = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0], [-np.inf, np.inf, 0.0]], np.float32)
    for fn, want in (("max", [np.nan, 3.0, np.inf]), ("sum", [np.nan, 6.0, np.nan])):
        k = reduce_kernel(lambda x, m: getattr(nl, fn)(x, axis=1), False)
        got = k(a, 3, "float32")
        assert_close(got, np.array(want, np.float32), rtol=0, atol=0)
        assert_bits(got[np.isnan(got)].view(np.uint32), np.full(int(np.isnan(got).sum()), 0x7FC00000, np.uint32),
                    f"canonical NaN from {fn}")
