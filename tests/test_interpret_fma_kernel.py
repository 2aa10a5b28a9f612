"""The interpreter's compiled fp32 FMA k-chain (runtime/fma_kernel.py) against the numpy definition
(numerics/fma.py) bit for bit, and the interpreter using it against the JIT.

The compiled chain exists only for speed (issue #13): every input that could separate it from the
numpy chain is varied here — shapes with ragged tails, 1-long and empty chains, a start offset,
non-contiguous (strided, transposed) operand views, rounding midpoints, subnormal results, signed
zeros, inf and NaN — and the fallback (no llvmlite) must give the same bits too.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.runtime import fma_kernel
from nki_lite.numerics.fma import fma_f32, fma_outer_chain_f32

from .oracle import assert_bits, fast, from_f64, storage

F32 = np.float32


def _data(rng, shape, kind):
    if kind == "normal":
        return rng.standard_normal(shape).astype(F32)
    if kind == "ints":          # small integers: exact sums, many exact zeros (signed-zero rules)
        return rng.integers(-2, 3, size=shape).astype(F32) * F32(rng.choice([1.0, -1.0]))
    if kind == "tiny":          # products and sums in float32's subnormal range
        return (rng.standard_normal(shape) * 2.0 ** -70).astype(F32)
    if kind == "specials":
        x = rng.standard_normal(shape).astype(F32)
        pick = rng.random(shape)
        x[pick < 0.05] = np.inf
        x[(pick >= 0.05) & (pick < 0.1)] = -np.inf
        x[(pick >= 0.1) & (pick < 0.13)] = np.nan
        x[(pick >= 0.13) & (pick < 0.2)] = -0.0
        x[(pick >= 0.2) & (pick < 0.25)] = F32(3e38)
        return x
    raise ValueError(kind)


def _same(a, b, what=""):
    assert a.dtype == np.float32 and b.dtype == np.float32 and a.shape == b.shape, what
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), what


@pytest.mark.skipif(not fma_kernel.available(), reason="llvmlite cannot compile here")
@fast(4)
@given(seed=st.integers(0, 2 ** 32 - 1), K=st.integers(1, 140), M=st.integers(1, 130),
       N=st.integers(1, 600), start=st.integers(0, 3),
       kind=st.sampled_from(["normal", "ints", "tiny", "specials"]))
def test_compiled_chain_matches_numpy_chain(seed, K, M, N, start, kind):
    rng = np.random.default_rng(seed)
    s, m, acc = _data(rng, (K, M), kind), _data(rng, (K, N), kind), _data(rng, (M, N), kind)
    acc_before = acc.copy()
    got = fma_kernel.fma_chain_f32(s, m, acc, start)
    _same(got, fma_outer_chain_f32(s, m, acc, start), f"{kind} K{K} M{M} N{N} start{start}")
    _same(acc, acc_before, "the caller's accumulator is not written")


@pytest.mark.skipif(not fma_kernel.available(), reason="llvmlite cannot compile here")
@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 7, 9])
@pytest.mark.parametrize("N", [1, 31, 32, 33, 64, 95, 97])
@pytest.mark.parametrize("kind", ["normal", "specials"])
def test_compiled_chain_block_boundaries(M, N, kind):
    """Every split of the blocked routine: rows in groups of four and a short last group (its missing
    rows clamped to the last one),
    columns in 32-wide blocks and the scalar tail, a 1-long chain and one starting late."""
    rng = np.random.default_rng(M * 1000 + N)
    for K, start in ((1, 0), (7, 0), (7, 6), (40, 3)):
        s, m, acc = _data(rng, (K, M), kind), _data(rng, (K, N), kind), _data(rng, (M, N), kind)
        _same(fma_kernel.fma_chain_f32(s, m, acc, start), fma_outer_chain_f32(s, m, acc, start),
              f"{kind} K{K} M{M} N{N} start{start}")


def test_compiled_routine_builds():
    """llvmlite is a dependency: the hand-written IR must compile (a broken IR would otherwise fall
    back to the numpy chain silently, every result right and 30x slower)."""
    fma_kernel._STATE.pop("fn", None)
    assert fma_kernel.available()


def test_overwrite_reuses_the_accumulator_only_when_allowed():
    rng = np.random.default_rng(5)
    s, m, acc = (_data(rng, sh, "normal") for sh in ((9, 6), (9, 40), (6, 40)))
    want = fma_outer_chain_f32(s, m, acc, 0)
    kept = acc.copy()
    got = fma_kernel.fma_chain_f32(s, m, kept, 0, overwrite=True)
    assert got is kept
    _same(got, want)
    view = acc.T.copy().T                          # not C-contiguous: copied, left untouched
    before = view.copy()
    _same(fma_kernel.fma_chain_f32(s, m, view, 0, overwrite=True), want)
    _same(view, before)


def test_compiled_chain_midpoints_need_single_rounding():
    """a*b + c where the float64 sum lands on a float32 midpoint: double rounding would give 1.0."""
    a, b = F32(24929 * 2.0 ** -15), F32(673 * 2.0 ** -9)      # a*b = 1 + 2**-24 exactly
    s = np.array([[a]], F32)
    m = np.array([[b]], F32)
    acc = np.array([[2.0 ** -60]], F32)
    got = fma_kernel.fma_chain_f32(s, m, acc, 0)
    assert got[0, 0] == F32(1 + 2.0 ** -23)
    _same(got, fma_f32(a, b, acc))


def test_compiled_chain_strided_views_and_empty_chain():
    rng = np.random.default_rng(7)
    big_s = rng.standard_normal((64, 300)).astype(F32)
    big_m = rng.standard_normal((300, 64)).astype(F32)
    s = big_s[::2, 5:200:3]                # strided rows and columns
    m = big_m[3:203:2, ::2].T[: s.shape[0]]  # a transposed view
    acc = rng.standard_normal((s.shape[1], m.shape[1])).astype(F32)
    _same(fma_kernel.fma_chain_f32(s, m, acc, 1), fma_outer_chain_f32(s, m, acc, 1))
    _same(fma_kernel.fma_chain_f32(s, m, acc, s.shape[0]), acc)       # start == K: acc unchanged
    with pytest.raises(ValueError):
        fma_kernel.fma_chain_f32(s, m[:, :5], acc, 0)


def test_fallback_without_compiled_routine_gives_same_bits(monkeypatch):
    rng = np.random.default_rng(3)
    s, m, acc = (_data(rng, sh, "specials") for sh in ((20, 9), (20, 33), (9, 33)))
    want = fma_kernel.fma_chain_f32(s, m, acc, 0)
    monkeypatch.setitem(fma_kernel._STATE, "fn", None)
    assert not fma_kernel.available()
    _same(fma_kernel.fma_chain_f32(s, m, acc, 0), want)
    _same(want, fma_outer_chain_f32(s, m, acc, 0))


# ------------------------------------------------------------------ narrower operands in the compiled chain


@pytest.mark.parametrize("dt, scale, chained", [
    ("bfloat16", 1.0, True),            # products in the normal range
    ("bfloat16", 2.0 ** -70, False),    # subnormal products: rounded, so the numpy chain
    ("bfloat16", 2.0 ** 66, False),     # products of 2^128 and more overflow
    ("float16", 1.0, True),
    ("float16", 2.0 ** -14, True),      # fp16's subnormals and its largest values: fp16 x fp16
    ("float16", 2.0 ** 15, True),       # products are always normal in fp32
])
def test_narrow_matmul_uses_the_chain_only_when_products_are_exact(dt, scale, chained, monkeypatch):
    """bf16 / fp16 nc_matmul in the interpreter: the unfused definition (oracle.matmul_ref) bit for
    bit, whether the compiled chain ran (exact products) or the numpy chain (it must not run when a
    product would be rounded or overflow)."""
    from nki_lite.runtime import interpret_compute
    from .oracle import matmul_ref
    rng = np.random.default_rng(11)
    K, M, N = 40, 37, 70
    a = (rng.uniform(-2, 2, (K, M)) * scale).astype(storage(dt))
    b = (rng.uniform(-2, 2, (K, N)) * scale).astype(storage(dt))
    a[3, 4] = 0.0
    b[5, :3] = -0.0
    calls = []
    real = interpret_compute._products_exact
    monkeypatch.setattr(interpret_compute, "_products_exact",
                        lambda *args: calls.append(real(*args)) or calls[-1])

    @nki.jit
    def k(a_in, b_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nisa.nc_matmul(nl.load(a_in), nl.load(b_in))))
        return out

    got = k(a, b, mode="interpret")
    assert calls == [chained]
    want = matmul_ref(a, b, fused=False)
    assert_bits(got, np.where(np.isnan(want), F32(np.nan), want), f"{dt} scale {scale}")


def test_products_exact_rules():
    from nki_lite.runtime.interpret_compute import _products_exact
    one = np.ones((2, 2), F32)
    assert _products_exact(one, one, "bfloat16", "bfloat16")
    assert not _products_exact(one, one, "float32", "bfloat16")        # 24 + 8 significant bits
    assert _products_exact(np.zeros((2, 2), F32), np.full((2, 2), np.inf, F32), "float16", "float16")
    assert not _products_exact(one * F32(2.0 ** -64), one * F32(2.0 ** -63), "bfloat16", "bfloat16")
    assert _products_exact(one * F32(2.0 ** -63), one * F32(2.0 ** -63), "bfloat16", "bfloat16")
    assert not _products_exact(one * F32(2.0 ** 64), one * F32(2.0 ** 64), "bfloat16", "bfloat16")


# ------------------------------------------------------------------ the interpreter against the JIT


def _as(x, dt):
    return from_f64(x, dt).astype(storage(dt))


@pytest.mark.parametrize("sdt,mdt", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                     ("float16", "float16"), ("float8_e4m3fn", "bfloat16"),
                                     ("float32", "tfloat32")])
@fast(3)
@given(seed=st.integers(0, 2 ** 32 - 1), T=st.integers(1, 3), tail=st.integers(0, 127),
       M=st.integers(1, 128), N=st.integers(1, 512))
def test_interpreter_equals_jit_psum_accumulation(sdt, mdt, seed, T, tail, M, N):
    """Several nc_matmuls accumulating into one PSUM tile, a ragged last k block."""
    K = 128 * T + tail
    rng = np.random.default_rng(seed)
    a = _as(rng.uniform(-2, 2, (K, M)), sdt)
    b = _as(rng.uniform(-2, 2, (K, N)), mdt)

    @nki.jit
    def k(a_in, b_in):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
        for t in nl.sequential_range(T):
            ps += nisa.nc_matmul(nl.load(a_in[t * 128:(t + 1) * 128, :]), nl.load(b_in[t * 128:(t + 1) * 128, :]))
        if tail:
            ps += nisa.nc_matmul(nl.load(a_in[K - tail:K, :]), nl.load(b_in[K - tail:K, :]))
        nl.store(out, nl.copy(ps))
        return out

    target = "trn3" if "float8_e4m3fn" in (sdt, mdt) else None
    kw = {"target": target} if target else {}
    assert_bits(k(a, b, mode="interpret", **kw), k(a, b, **kw), f"{sdt} x {mdt} K{K} M{M} N{N}")


@fast(3)
@given(seed=st.integers(0, 2 ** 32 - 1), P=st.integers(1, 128), F=st.integers(1, 128))
def test_interpreter_equals_jit_transpose_through_identity(seed, P, F):
    """The PE-array transpose NKIBench kernels use (fp32 identity moving operand, is_transpose)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P, F)).astype(F32)

    @nki.jit
    def k(x_in):
        out = nl.ndarray((F, P), dtype=nl.float32, buffer=nl.shared_hbm)
        ident = nl.shared_constant(np.identity(P, dtype=np.float32))
        i_sb = nl.load(ident)
        ps = nisa.nc_matmul(nl.load(x_in), i_sb, is_moving_onezero=True, is_transpose=True)
        nl.store(out, nl.copy(ps))
        return out

    got = k(x, mode="interpret")
    assert_bits(got, k(x), f"transpose P{P} F{F}")
    assert_bits(got, x.T.copy(), "a transpose is exact")
