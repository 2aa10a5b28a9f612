"""Matmul (nisa.nc_matmul, nl.matmul with transpose_x, PSUM accumulation) against plain numpy.

Contract (shared/DESIGN.md "Numerics"): per output element, within each matmul instruction the
sum runs over k = 0..K-1 in order, acc = acc + a*b rounded to fp32 (the first product starts the
sum on overwrite; the PSUM value on `+=`); across instructions in program order. Products of
fp8/bf16/fp16/tf32 inputs are exact in fp32; with an fp32 operand each step is an exact FMA
(nki_lite.numerics.fma.fma_f32). Checked bit for bit against tests/oracle.matmul_ref and
approximately against float64 A.T @ B.
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

from .kernels.tutorial_style import nl_matmul, tiled_matmul
from .oracle import (F32, MATMUL_FLOATS, assert_bits, canon, f32_to, fast, from_f64, storage, widen)


def mm_inputs(rng, shape, dt):
    """Finite matmul inputs within the format's range: uniform [-2, 2] with small integers and exact
    zeros mixed in."""
    x = rng.uniform(-2, 2, size=shape)
    pick = rng.random(shape)
    x = np.where(pick < 0.1, rng.integers(-3, 4, size=shape), x)
    x = np.where(pick > 0.97, 0.0, x)
    return from_f64(x, dt).astype(storage(dt))


def target_for(*dts) -> str:
    """float8_e4m3fn is a Tensor Engine input only on trn3 (NeuronCore-v4)."""
    return "trn3" if "float8_e4m3fn" in dts else "trn2"


def fused(*dts) -> bool:
    return "float32" in dts


def ref(s, m, sdt, mdt, acc=None):
    return canon(matmul_ref_chunks(s, m, sdt, mdt, acc))


def matmul_ref_chunks(s, m, sdt, mdt, acc=None, chunk=128):
    """K split into instructions of <= chunk rows, accumulated in program order."""
    from .oracle import matmul_ref
    K = s.shape[0]
    for k0 in range(0, K, chunk):
        acc = matmul_ref(s[k0:k0 + chunk], m[k0:k0 + chunk], fused(sdt, mdt), acc)
    return acc


def approx_check(got, s, m):
    s64, m64 = widen(s).astype(np.float64), widen(m).astype(np.float64)
    want = s64.T @ m64
    bound = s64.shape[0] * 2.0 ** -23 * (np.abs(s64).T @ np.abs(m64)) + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound[err > bound][:3]}"


_DIMS = dict(K=st.one_of(st.sampled_from([1, 2, 127, 128]), st.integers(1, 128)),
             M=st.one_of(st.sampled_from([1, 5, 128]), st.integers(1, 128)),
             N=st.one_of(st.sampled_from([1, 7, 512]), st.integers(1, 512)))


# ----------------------------------------------------------------------------- one nc_matmul instruction

@pytest.mark.parametrize("form", ["assign_psum", "fresh_psum", "accumulate_zeros"])
@pytest.mark.parametrize("dt", MATMUL_FLOATS)
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), **_DIMS)
def test_nc_matmul_single(dt, form, seed, K, M, N):
    rng = np.random.default_rng(seed)
    s = mm_inputs(rng, (K, M), dt)
    m = mm_inputs(rng, (K, N), dt)

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        st_ = nl.load(s_in)
        mv = nl.load(m_in)
        if form == "assign_psum":
            ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
            ps[...] = nisa.nc_matmul(st_, mv)
            nl.store(out, nl.copy(ps))
        elif form == "fresh_psum":
            nl.store(out, nisa.nc_matmul(st_, mv))
        else:
            ps = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
            ps += nisa.nc_matmul(st_, mv)
            nl.store(out, nl.copy(ps))
        return out

    got = k(s, m, target=target_for(dt))
    acc0 = np.zeros((M, N), F32) if form == "accumulate_zeros" else None
    assert_bits(got, ref(s, m, dt, dt, acc0), f"nc_matmul {dt} {form}")
    approx_check(got, s, m)


@pytest.mark.parametrize("pair", [("float32", "tfloat32"), ("tfloat32", "float32"), ("float8_e4m3", "bfloat16"),
                                  ("float8_e5m2", "float8_e4m3"), ("bfloat16", "float16"), ("float16", "float8_e5m2"),
                                  ("float8_e4m3fn", "float8_e5m2"), ("bfloat16", "float8_e4m3fn")])
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), **_DIMS)
def test_nc_matmul_mixed_dtypes(pair, seed, K, M, N):
    """Allowed mixes: fp32 with tf32 (exact FMA steps: fp32 x tf32 products need up to 35 bits), and
    any two of bf16/fp16/fp8 (exact products), except e4m3 with e4m3fn."""
    sdt, mdt = pair
    rng = np.random.default_rng(seed)
    s = mm_inputs(rng, (K, M), sdt)
    m = mm_inputs(rng, (K, N), mdt)

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s_in), nl.load(m_in)))
        return out

    got = k(s, m, target=target_for(sdt, mdt))
    assert_bits(got, ref(s, m, sdt, mdt), f"nc_matmul {sdt} x {mdt}")
    approx_check(got, s, m)


def test_fp32_matmul_uses_fma():
    """a*b + c with a*b needing 48 bits: the FMA result differs from product-then-add rounding."""
    a = np.float32(1 + 2.0 ** -12)
    s = np.array([[1.0], [a]], np.float32)           # K=2, M=1
    m = np.array([[-(1 + 2.0 ** -11)], [a]], np.float32)

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s_in), nl.load(m_in)))
        return out

    got = k(s, m)[0, 0]
    # exact: -(1 + 2**-11) + (1 + 2**-11 + 2**-24) = 2**-24; unfused the product rounds to 1 + 2**-11 -> 0
    assert got == np.float32(2.0 ** -24), got


def test_matmul_specials():
    """inf*0 -> canonical NaN; all-(-0) products keep -0 on overwrite, become +0 accumulated onto zeros."""
    s = np.array([[np.inf, -0.0, 1.0], [0.0, 1.0, 2.0]], np.float32)   # K=2, M=3
    m = np.array([[0.0, 1.0], [1.0, -0.0]], np.float32)                  # K=2, N=2

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((3, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray((3, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        a, b = nl.load(s_in), nl.load(m_in)
        nl.store(out, nisa.nc_matmul(a, b))
        ps = nl.zeros((3, 2), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(a, b)
        nl.store(out2, nl.copy(ps))
        return out, out2

    got, got2 = k(s, m)
    assert_bits(got, ref(s, m, "float32", "float32"), "overwrite")
    assert_bits(got2, ref(s, m, "float32", "float32", np.zeros((3, 2), F32)), "accumulate")
    assert got.view(np.uint32)[0, 0] == 0x7FC00000
    assert got.view(np.uint32)[1, 1] == 0x80000000 and got2.view(np.uint32)[1, 1] == 0


# ----------------------------------------------------------------------------- multi-step PSUM accumulation

@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2"])
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), K=st.integers(129, 300), M=st.integers(1, 128), N=st.integers(1, 256))
def test_psum_accumulation_ragged_k(dt, seed, K, M, N):
    """psum[...] += nc_matmul(...) over K tiles of 128 with a ragged last tile (static slices)."""
    rng = np.random.default_rng(seed)
    s = mm_inputs(rng, (K, M), dt)
    m = mm_inputs(rng, (K, N), dt)

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
        for k0 in range(0, K, 128):
            kk = min(128, K - k0)
            ps[...] += nisa.nc_matmul(nl.load(s_in[k0:k0 + kk, :]), nl.load(m_in[k0:k0 + kk, :]))
        nl.store(out, nl.copy(ps))
        return out

    got = k(s, m)
    assert_bits(got, ref(s, m, dt, dt, np.zeros((M, N), F32)), f"ragged-K accumulation {dt}")
    approx_check(got, s, m)


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "tfloat32"])
@pytest.mark.parametrize("loop", ["affine_range", "sequential_range", "static_range"])
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), T=st.integers(1, 3), M=st.integers(1, 128), N=st.integers(1, 200))
def test_psum_accumulation_loop(dt, loop, seed, T, M, N):
    """PSUM += across loop iterations runs in iteration order; first tile overwrites, then accumulates."""
    K = 128 * T
    rng = np.random.default_rng(seed)
    s = mm_inputs(rng, (K, M), dt)
    m = mm_inputs(rng, (K, N), dt)

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        ps[...] = nisa.nc_matmul(nl.load(s_in[0:128, :]), nl.load(m_in[0:128, :]))
        for kt in getattr(nl, loop)(1, T):
            a = nl.load(s_in[kt * 128:(kt + 1) * 128, :])
            b = nl.load(m_in[nl.ds(kt * 128, 128), :])
            ps += nisa.nc_matmul(a, b)
        nl.store(out, nl.copy(ps))
        return out

    got = k(s, m)
    assert_bits(got, ref(s, m, dt, dt), f"loop accumulation {dt} {loop}")


def test_matmul_into_psum_views():
    """Two matmuls into the two 256-column halves of one PSUM tile, the second half accumulated twice."""
    rng = np.random.default_rng(9)
    s = mm_inputs(rng, (64, 32), "bfloat16")
    m = mm_inputs(rng, (64, 512), "bfloat16")

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((32, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(s_in)
        b = nl.load(m_in)
        ps = nl.ndarray((32, 512), dtype=nl.float32, buffer=nl.psum)
        ps[:, 0:256] = nisa.nc_matmul(a, b[:, 0:256])
        ps[:, 256:512] = nisa.nc_matmul(a, b[:, 256:512])
        ps[:, 256:512] += nisa.nc_matmul(a, b[:, 0:256])
        nl.store(out, nl.copy(ps))
        return out

    got = k(s, m)
    left = ref(s, m[:, :256], "bfloat16", "bfloat16")
    right = ref(s, m[:, :256], "bfloat16", "bfloat16", matmul_ref_chunks(s, m[:, 256:], "bfloat16", "bfloat16"))
    assert_bits(got, np.concatenate([left, right], axis=1), "psum views")


def test_tutorial_tiled_matmul():
    """tests/kernels/tutorial_style.tiled_matmul: M, N tiles in affine loops, K accumulated in PSUM."""
    rng = np.random.default_rng(7)
    K, M, N = 256, 256, 1024
    lhsT = mm_inputs(rng, (K, M), "bfloat16")
    rhs = mm_inputs(rng, (K, N), "bfloat16")
    got = tiled_matmul(lhsT, rhs)
    want = np.zeros((M, N), F32)
    for mi in range(0, M, 128):
        for ni in range(0, N, 512):
            want[mi:mi + 128, ni:ni + 512] = ref(lhsT[:, mi:mi + 128], rhs[:, ni:ni + 512], "bfloat16", "bfloat16",
                                                np.zeros((128, 512), F32))
    assert_bits(got, want, "tiled_matmul")
    approx_check(got, lhsT, rhs)


# ----------------------------------------------------------------------------- nl.matmul

@pytest.mark.parametrize("transpose_x", [False, True])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "tfloat32"])
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), **_DIMS)
def test_nl_matmul(dt, transpose_x, seed, K, M, N):
    """nl.matmul(x, y, transpose_x): x @ y; with transpose_x=False x is [M, K] (transposed on the
    Tensor Engine first, exact data movement), else x is [K, M]."""
    rng = np.random.default_rng(seed)
    xs = mm_inputs(rng, (K, M), dt)          # the stationary layout [K, M]
    y = mm_inputs(rng, (K, N), dt)
    x_in = xs if transpose_x else np.ascontiguousarray(xs.T)

    @nki.jit
    def k(x_hbm, y_hbm):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.matmul(nl.load(x_hbm), nl.load(y_hbm), transpose_x=transpose_x)
        assert r.shape == (M, N) and r.dtype_name == "float32"
        nl.store(out, nl.copy(r))
        return out

    got = k(x_in, y)
    assert_bits(got, ref(xs, y, dt, dt), f"nl.matmul {dt} transpose_x={transpose_x}")
    approx_check(got, xs, y)


def test_tutorial_nl_matmul():
    rng = np.random.default_rng(3)
    x = mm_inputs(rng, (128, 256), "bfloat16")      # [M, K]
    y = mm_inputs(rng, (256, 384), "bfloat16")
    got = nl_matmul(x, y)
    xs = np.ascontiguousarray(x.T)
    assert_bits(got, ref(xs, y, "bfloat16", "bfloat16", np.zeros((128, 384), F32)), "nl_matmul")


@pytest.mark.parametrize("out_dt", ["bfloat16", "float16", "float8_e4m3"])
def test_matmul_result_cast_on_copy(out_dt):
    rng = np.random.default_rng(11)
    s = mm_inputs(rng, (64, 32), "bfloat16")
    m = mm_inputs(rng, (64, 48), "bfloat16")

    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((32, 48), dtype=out_dt, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nisa.nc_matmul(nl.load(s_in), nl.load(m_in)), dtype=out_dt))
        return out

    assert_bits(k(s, m), f32_to(ref(s, m, "bfloat16", "bfloat16"), out_dt), f"matmul -> {out_dt}")


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("dt", ["int8", "int32", "uint8", "bool"])
def test_matmul_rejects_integer_inputs(dt):
    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s_in), nl.load(m_in)))
        return out

    a = np.ones((4, 4), storage(dt))
    with pytest.raises(errors.KernelDTypeError, match="Tensor Engine input dtype"):
        k(a, a)


@pytest.mark.parametrize("pair,target,match", [
    (("bfloat16", "float32"), "trn2", "mixes bfloat16 and float32"),
    (("float32", "float16"), "trn2", "mixes float32 and float16"),
    (("tfloat32", "float8_e4m3"), "trn2", "mixes tfloat32 and float8_e4m3"),
    (("float8_e4m3", "float8_e4m3fn"), "trn3", "mixes float8_e4m3 and float8_e4m3fn"),
    (("float8_e4m3fn", "float8_e4m3fn"), "trn2", "needs trn3"),
    (("float8_e4m3fn", "bfloat16"), "trn1", "needs trn3"),
])
def test_matmul_rejects_forbidden_dtype_mixes(pair, target, match):
    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s_in), nl.load(m_in)))
        return out

    with pytest.raises(errors.KernelDTypeError, match=match):
        k(np.ones((4, 4), storage(pair[0])), np.ones((4, 4), storage(pair[1])), target=target)


def test_matmul_contraction_mismatch():
    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s_in), nl.load(m_in)))
        return out

    with pytest.raises(errors.ShapeError, match="contraction"):
        k(np.ones((8, 4), np.float32), np.ones((6, 4), np.float32))


def test_matmul_accumulate_into_sbuf_rejected():
    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        acc += nisa.nc_matmul(nl.load(s_in), nl.load(m_in))
        nl.store(out, acc)
        return out

    with pytest.raises(errors.MemorySpaceError, match="PSUM"):
        k(np.ones((8, 4), np.float32), np.ones((8, 4), np.float32))
