"""NKI dtype promotion (shared/NKI_REFERENCE.md §2.4) via nki_lite.core.dtypes.promote and via the
output dtype of traced ops, Python/numpy scalars as operands, and the dtype objects themselves.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.core import dtypes as D

from .oracle import (ALL, ALL_WITH_BOOL, INTS, Scalar, assert_bits, check_dtype, f32_to, map1_kernel, map2_kernel,
                     random_codes, ref_ops, storage, values, widen)

# (a, b) -> result, as documented ("NKI Type Promotion", legacy)
DOCUMENTED = [
    # (float, float): the wider type, or a new wider one
    ("float16", "bfloat16", "float32"),
    ("float8_e4m3", "float16", "float16"),
    ("float8_e4m3", "bfloat16", "bfloat16"),
    ("float8_e4m3", "float8_e5m2", "bfloat16"),
    ("float32", "tfloat32", "float32"),
    ("float16", "float32", "float32"),
    ("bfloat16", "float32", "float32"),
    # (int, int): the wider, or a new wider one
    ("int8", "uint8", "int16"),
    ("int8", "uint16", "int32"),
    ("int32", "uint32", "float32"),
    ("int16", "int32", "int32"),
    ("uint8", "uint32", "uint32"),
    # (float, int): the float
    ("bfloat16", "int32", "bfloat16"),
    ("float8_e4m3", "uint32", "float8_e4m3"),
    ("float16", "int8", "float16"),
    ("float32", "uint16", "float32"),
]

# tile dtype, Python scalar, result ("weak" scalars count as uint8 (bool), int32 or float32)
DOCUMENTED_SCALARS = [
    ("int8", 2, "int32"),
    ("float16", 1.2, "float32"),
    ("bfloat16", 2, "bfloat16"),
    ("uint8", True, "uint8"),
    ("int8", True, "int16"),
    ("int32", 0.5, "float32"),
    ("float32", 3, "float32"),
    ("uint32", -1, "float32"),
    ("float8_e5m2", 7, "float8_e5m2"),
]


@pytest.mark.parametrize("a,b,want", DOCUMENTED)
def test_documented_pairs(a, b, want):
    assert D.promote(a, b) == want
    assert D.promote(b, a) == want


@pytest.mark.parametrize("a,b,want", DOCUMENTED)
def test_documented_pairs_through_traced_ops(a, b, want):
    """The output tile of nl.add / nl.multiply / nl.maximum / nl.where has the promoted dtype, and its
    values are the fp32 (or int64) result rounded once to it."""
    rng = np.random.default_rng(0)
    x = values(rng, (3, 7), a)
    y = values(rng, (3, 7), b)
    for op in ("add", "multiply", "maximum"):
        k = map2_kernel(lambda s, t, m: getattr(nl, op)(s, t))
        assert_bits(k(x, y, 3, 7, want), ref_ops([op], x, a, [(y, b)], want), f"nl.{op}({a}, {b})")
    cond = values(rng, (3, 7), "bool")

    @nki.jit
    def kw(x, y, c):
        out = nl.ndarray((3, 7), dtype=want, buffer=nl.shared_hbm)
        r = nl.where(nl.load(c), nl.load(x), nl.load(y))
        check_dtype(r, want)
        nl.store(out, r)
        return out

    kw(x, y, cond)


@pytest.mark.parametrize("dt,scalar,want", DOCUMENTED_SCALARS)
def test_documented_scalars(dt, scalar, want):
    assert D.promote(dt, D.scalar_dtype(scalar)) == want
    x = values(np.random.default_rng(1), (2, 5), dt, "nice")
    for op, rev in (("add", False), ("multiply", True), ("subtract", True)):
        k = map1_kernel(lambda t, m: getattr(nl, op)(scalar, t) if rev else getattr(nl, op)(t, scalar))
        assert_bits(k(x, 2, 5, want), ref_ops([op], x, dt, [Scalar(scalar)], want, [rev]), f"{op} {dt} {scalar!r}")
    k = map1_kernel(lambda t, m: t * scalar)
    assert_bits(k(x, 2, 5, want), ref_ops(["multiply"], x, dt, [Scalar(scalar)], want), f"{dt} * {scalar!r}")


@pytest.mark.parametrize("value,want", [(True, "uint8"), (False, "uint8"), (3, "int32"), (-(2 ** 40), "int32"),
                                        (2.5, "float32"), (np.bool_(True), "uint8"), (np.int8(3), "int32"),
                                        (np.int64(3), "int32"), (np.uint16(3), "int32"), (np.float16(1.5), "float16"),
                                        (np.float64(0.1), "float32"), (np.float32(2), "float32"),
                                        (ml_dtypes.bfloat16(1), "bfloat16")])
def test_scalar_dtype(value, want):
    assert D.scalar_dtype(value) == want


def test_numpy_scalar_operand_promotes_by_its_dtype():
    """A float16 numpy scalar with an int8 tile: (int8, float16) -> float16, as D.scalar_dtype says
    (numpy scalars keep their dtype; only Python scalars are weak)."""
    x = np.arange(-5, 5, dtype=np.int8).reshape(2, 5)
    k = map1_kernel(lambda t, m: t + np.float16(1.5))
    assert_bits(k(x, 2, 5, "float16"), ref_ops(["add"], x, "int8", [Scalar(np.float16(1.5))], "float16"),
                "int8 + float16 scalar")


# ----------------------------------------------------------------------------- properties over all pairs

PAIRS = list(itertools.product(ALL_WITH_BOOL, repeat=2))


@pytest.mark.parametrize("a,b", PAIRS)
def test_promote_is_symmetric_and_idempotent(a, b):
    r = D.promote(a, b)
    assert r == D.promote(b, a)
    assert D.promote(a, a) == a
    assert D.promote(r, r) == r
    assert D.promote(r, a) == r and D.promote(r, b) == r        # the result absorbs both operands
    if D.is_float(a) or D.is_float(b):
        assert D.is_float(r)
        floats = [d for d in (a, b) if D.is_float(d)]
        if len(floats) == 1:
            assert r == floats[0]                                   # (float, int) -> the float


def _all_values(name):
    """Every value of a format (8/16-bit: every code; 32-bit: a large sample incl. extremes)."""
    if name == "bool":
        return np.array([False, True])
    if name in INTS:
        ii = np.iinfo(storage(name))
        if ii.bits <= 16:
            return np.arange(ii.min, ii.max + 1, dtype=np.int64).astype(storage(name))
        rng = np.random.default_rng(0)
        return np.concatenate([[ii.min, ii.max, 0, -1 if ii.min else 1],
                               rng.integers(ii.min, ii.max, 100000, endpoint=True)]).astype(storage(name))
    if name in ("float32", "tfloat32"):
        v = random_codes(np.random.default_rng(0), (200000,), name)
    else:
        bits = 8 * storage(name).itemsize
        v = np.arange(1 << bits, dtype=np.uint32).astype({8: np.uint8, 16: np.uint16}[bits]).view(storage(name))
    v = widen(v)
    return v[~np.isnan(v)]


def _exact_in(v, name):
    """Whether every value of v (float32 or int array) is exactly representable in dtype `name`."""
    if name in INTS or name == "bool":
        ii = np.iinfo(storage(name)) if name != "bool" else None
        if ii is None:
            return bool(np.all((v == 0) | (v == 1)))
        if v.dtype.kind == "f":
            return bool(np.all((v == np.trunc(v)) & (v >= ii.min) & (v <= ii.max)))
        return bool(np.all((v.astype(np.int64) >= ii.min) & (v.astype(np.int64) <= ii.max)))
    with np.errstate(all="ignore"):
        vf = v.astype(np.float64)
        back = widen(f32_to(vf.astype(np.float32), name)).astype(np.float64)
        return bool(np.all(back == vf) and np.all(vf.astype(np.float32).astype(np.float64) == vf))


# documented: (int32, uint32) -> float32 (no int64 on the device); likewise any signed int with uint32
LOSSY = {frozenset({s, "uint32"}) for s in ("int8", "int16", "int32")}


@pytest.mark.parametrize("a,b", [p for p in PAIRS if p[0] < p[1] and
                                 (D.is_float(p[0]) == D.is_float(p[1]))])
def test_promotion_holds_both_operands_exactly(a, b):
    """(float, float) and (int, int): every value of both operands is exact in the promoted dtype
    (except (signed int, uint32) -> float32, as documented for (int32, uint32))."""
    r = D.promote(a, b)
    exact = _exact_in(_all_values(a), r) and _exact_in(_all_values(b), r)
    assert exact == (frozenset({a, b}) not in LOSSY), (a, b, r)


@pytest.mark.parametrize("a,b", [p for p in PAIRS if p[0] != "bool" and p[1] != "bool"])
def test_traced_add_output_dtype_is_promote(a, b):
    """Every pair of tile dtypes: nl.add's output dtype is D.promote(a, b), values bit-exact."""
    want = D.promote(a, b)
    rng = np.random.default_rng(hash((a, b)) % 2 ** 32)
    x = values(rng, (4, 9), a)
    y = values(rng, (4, 9), b)
    k = map2_kernel(lambda s, t, m: nl.add(s, t))
    assert_bits(k(x, y, 2, 5, want), ref_ops(["add"], x, a, [(y, b)], want), f"add({a}, {b})")


# ----------------------------------------------------------------------------- ops that do not promote

KEEP_DTYPE = {
    "nl.exp": lambda t: nl.exp(t),
    "nl.sum": lambda t: nl.sum(t, axis=1, keepdims=True),
    "nl.max": lambda t: nl.max(t, axis=1, keepdims=True),
    "nl.mean": lambda t: nl.mean(t, axis=1, keepdims=True),
    "nl.copy": lambda t: nl.copy(t),
    "nl.transpose": lambda t: nl.transpose(t),
    "nisa.tensor_scalar": lambda t: nisa.tensor_scalar(t, np.multiply, 2.5, op1=np.add, operand1=1),
    "nisa.tensor_copy": lambda t: nisa.tensor_copy(t),
    "nisa.activation": lambda t: nisa.activation(np.tanh, t, scale=0.5),
    "nisa.tensor_reduce": lambda t: nisa.tensor_reduce(np.add, t, axis=1, keepdims=True),
    "inplace +=": lambda t: _iadd(t),
}


def _iadd(t):
    t += 2.5
    return t


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float8_e4m3", "int8", "uint16"])
@pytest.mark.parametrize("name", list(KEEP_DTYPE))
def test_ops_that_keep_the_input_dtype(name, dt):
    """Unary ops, reductions, copies, tensor_scalar and in-place updates keep the data dtype (even
    with float32 scalar operands); results are computed in fp32 and rounded once."""
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        r = KEEP_DTYPE[name](nl.load(a))
        check_dtype(r, dt, name)
        nl.store(out, nl.copy(r[0:1, 0:1], dtype=nl.float32))
        return out

    k(values(np.random.default_rng(0), (4, 4), dt, "nice"))


@pytest.mark.parametrize("name,fn,want", [
    ("nl.all", lambda t: nl.all(t, axis=1, keepdims=True), "bool"),
    ("nl.matmul", lambda t: nl.matmul(t, t, transpose_x=True), "float32"),
    ("nisa.nc_matmul", lambda t: nisa.nc_matmul(t, t), "float32"),
    ("dtype= on add", lambda t: nl.add(t, t, dtype=nl.float8_e5m2), "float8_e5m2"),
    ("dtype= on exp", lambda t: nl.exp(t, dtype="float32"), "float32"),
    ("dtype= on sum", lambda t: nl.sum(t, axis=1, dtype=nl.int32, keepdims=True), "int32"),
    ("dtype= on tensor_tensor", lambda t: nisa.tensor_tensor(t, t, op=np.add, dtype=nl.uint8), "uint8"),
    ("comparison", lambda t: nl.greater(t, t), "bfloat16"),
    ("where with scalar", lambda t: nl.where(nl.greater(t, 0.0), t, 0.0), "float32"),
])
def test_op_output_dtypes(name, fn, want):
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        r = fn(nl.load(a))
        check_dtype(r, want, name)
        nl.store(out, nl.copy(r[0:1, 0:1], dtype=nl.float32))
        return out

    k(values(np.random.default_rng(0), (4, 4), "bfloat16", "nice"))


# ----------------------------------------------------------------------------- dtype objects

def test_dtype_objects():
    assert nl.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    assert nl.float8_e4m3 == np.dtype(ml_dtypes.float8_e4m3)          # IEEE-like e4m3 (max 240), not e4m3fn
    assert nl.float8_e4m3fn == np.dtype(ml_dtypes.float8_e4m3fn)
    assert nl.float8_e5m2 == np.dtype(ml_dtypes.float8_e5m2)
    assert float(ml_dtypes.finfo(nl.float8_e4m3).max) == 240.0
    assert D.name_of(nl.tfloat32) == "tfloat32" and D.name_of(nl.float32) == "float32"
    for name in ALL + ["bool"]:
        assert D.name_of(D.to_numpy(name)) == name
    assert D.name_of("bf16") == "bfloat16" and D.name_of("fp8_e4m3") == "float8_e4m3"
    with pytest.raises(TypeError):
        D.name_of(np.float64)


def test_float64_and_int64_arguments_rejected():
    k = map1_kernel(lambda t, m: t)
    from nki_lite import errors
    with pytest.raises(errors.ArgumentError, match="float64"):
        k(np.ones((2, 2)), 2, 2, "float32")
    with pytest.raises(errors.ArgumentError, match="int64"):
        k(np.ones((2, 2), np.int64), 2, 2, "int32")


def test_tfloat32_constant_is_not_confused_with_float32():
    """The trace cache must distinguish nl.tfloat32 from nl.float32 passed as a constant argument
    (np.dtype equality ignores the tfloat32 tag)."""
    @nki.jit
    def k(a, dt):
        out = nl.ndarray(a.shape, dtype=dt, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    a = np.full((2, 2), 1 + 2.0 ** -10 + 2.0 ** -13, np.float32)   # not a tf32 value
    assert k(a, nl.float32)[0, 0] == a[0, 0]
    got = k(a, nl.tfloat32)
    assert got[0, 0] == np.float32(1 + 2.0 ** -10), got[0, 0]
