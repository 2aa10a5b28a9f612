"""The JIT's fused PSUM accumulation chains (lower/llvm/matmul_chain.py, matmul_kernel.py).

Consecutive nc_matmuls into one fp32 PSUM tile — bare, or a loop whose body is one — run as one
register-blocked micro-kernel per group of <= KC contraction rows. The contract is unchanged: each
output element sums its products in k order, instruction after instruction (docs/numerics.md), so
the JIT must equal the interpreter bit for bit on every input that changes the fused path: shapes
(ragged M / N / K tails, 1x1, more than one group, remainder groups), operand dtypes (FMA or not),
the accumulate flag of the first member, the PSUM start value, the grid, NaN / inf inputs.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.stdlib as S
from nki_lite.core import dtypes as D
from nki_lite.lower.llvm import matmul_chain as MC
from nki_lite.lower.llvm import matmul_kernel as MK
from nki_lite.lower.llvm.codegen import generate

from .oracle import F32, assert_bits, fast, from_f64, storage


def _inputs(rng, shape, dt):
    x = rng.uniform(-2, 2, size=shape)
    x = np.where(rng.random(shape) < 0.1, rng.integers(-3, 4, size=shape), x)
    return from_f64(x, dt).astype(storage(dt))


def _both(kernel, *args, **kw):
    """(JIT result, interpreter result) of one call."""
    return kernel(*args, **kw), kernel(*args, mode="interpret", **kw)


def _chain_kernel(K, M, N, first_accumulates: bool, start_value: float | None):
    """psum (+)= a[0:128] @ b[0:128] (bare), then a loop of 128-row matmuls, then a ragged tail."""
    KT, tail = (K - 128) // 128, (K - 128) % 128

    @nki.jit
    def k(a, b, c0):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        for _rep in nl.affine_range(1):     # the kernel's last top-level loop: the chain stays in one body
            a0, b0 = nl.load(a[0:128, :]), nl.load(b[0:128, :])
            at = nl.ndarray((max(KT, 1), nl.par_dim(128), M), dtype=a.dtype, buffer=nl.sbuf)
            bt = nl.ndarray((max(KT, 1), nl.par_dim(128), N), dtype=b.dtype, buffer=nl.sbuf)
            for t in nl.affine_range(KT):
                at[t] = nl.load(a[128 + t * 128:256 + t * 128, :])
                bt[t] = nl.load(b[128 + t * 128:256 + t * 128, :])
            if tail:
                a1, b1 = nl.load(a[K - tail:K, :]), nl.load(b[K - tail:K, :])
            ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
            if start_value is not None:
                ps[...] = nl.load(c0)
            if first_accumulates:
                ps += nisa.nc_matmul(a0, b0)
            else:
                ps[...] = nisa.nc_matmul(a0, b0)
            for t in nl.affine_range(KT):
                ps += nisa.nc_matmul(at[t], bt[t])
            if tail:
                ps += nisa.nc_matmul(a1, b1)
            nl.store(out, nl.copy(ps))
        return out
    return k


@pytest.mark.parametrize("dts", [("float32", "float32"), ("bfloat16", "bfloat16"), ("float8_e4m3", "float8_e5m2"),
                                 ("float16", "float16"), ("float32", "tfloat32"),
                                 ("float8_e4m3", "bfloat16")])
@fast(3)
@given(seed=st.integers(0, 2 ** 32 - 1), K=st.sampled_from([128, 129, 300, 640, 1100]),
       M=st.sampled_from([1, 7, 8, 13, 128]), N=st.sampled_from([1, 15, 16, 47, 48, 100, 512]),
       first=st.booleans(), start=st.sampled_from([None, 0.0, 1.5]))
def test_chain_equals_interpreter(dts, seed, K, M, N, first, start):
    """The fused chain (bare + loop + ragged tail, one or more groups) against the interpreter."""
    rng = np.random.default_rng(seed)
    a, b = _inputs(rng, (K, M), dts[0]), _inputs(rng, (K, N), dts[1])
    c0 = np.full((M, N), np.float32(start if start is not None else 0.0))
    if start is not None:
        c0[0, 0] = -0.0
    kern = _chain_kernel(K, M, N, first or start is not None, start)
    got, want = _both(kern, a, b, c0)
    assert_bits(got, want, f"chain {dts} K={K} M={M} N={N}")


def test_chain_is_fused():
    """Call sites of the micro-kernel, one chain each: a bare 128-row matmul then a 1024-row loop is
    two (the bare one's group, and one call in a loop over groups of KC // 128 iterations); 128
    bare + 128 in a loop + a 44-row tail is one group when KC holds 300 rows, else the first two
    and the tail; the same kernel unvectorised has none."""
    for K, calls in ((1024 + 128, 2), (300, 1 if MC.KC >= 300 else 2)):
        kern = _chain_kernel(K, 128, 512, True, None)
        ir_k = kern.trace(np.zeros((K, 128), F32), np.zeros((K, 512), F32), np.zeros((128, 512), F32))
        text = generate(ir_k).text
        assert text.count("call void @nkl_mmk_") == calls, (K, text.count("call void @nkl_mmk_"))
        assert "call void @nkl_mmk_" not in generate(ir_k, vectorize=False).text


def test_chain_specials():
    """inf * 0 and NaN inputs in a multi-group chain give the canonical NaN; inf survives groups."""
    K, M, N = 1100, 9, 50
    rng = np.random.default_rng(3)
    a, b = _inputs(rng, (K, M), "float32"), _inputs(rng, (K, N), "float32")
    a[5, 0], b[5, 0] = np.inf, 0.0          # NaN in group 1 at (0, 0)
    a[700, 1] = np.nan                       # NaN in a later group for row 1
    a[3, 2], b[3, 1] = np.inf, 1.0           # +inf for (2, 1) early, stays inf
    got, want = _both(_chain_kernel(K, M, N, True, None), a, b, np.zeros((M, N), F32))
    assert_bits(got, want, "specials")
    assert got.view(np.uint32)[0, 0] == 0x7FC00000 and np.all(got.view(np.uint32)[1] == 0x7FC00000)


@pytest.mark.parametrize("case", ["fp32", "bf16", "fp8", "fp8_mixed", "fp16"])
@fast(2)
@given(seed=st.integers(0, 2 ** 32 - 1), M=st.sampled_from([1, 2, 77, 129, 600]),
       K=st.sampled_from([1, 5, 128, 257, 700]), N=st.sampled_from([1, 3, 65, 513, 1030]))
def test_stdlib_matmul_equals_interpreter(case, seed, M, K, N):
    """nki_lite.stdlib.matmul / matmul_fp8 (its kernel's chains: loop over K tiles plus the ragged
    tail, masked M / N tails, scales) JIT == interpreter."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)).astype(F32), rng.standard_normal((K, N)).astype(F32)
    if case.startswith("fp8"):
        db = ml_dtypes.float8_e5m2 if case == "fp8_mixed" else ml_dtypes.float8_e4m3
        call = S.matmul_fp8.plan(a.astype(ml_dtypes.float8_e4m3), b.astype(db),
                                 scale_a=rng.random((M, 1)).astype(F32) + 0.5, scale_b=0.25)
    else:
        dt = {"fp32": F32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16}[case]
        call = S.matmul.plan(a.astype(dt), b.astype(dt))
    got, want = _both(call.kernel, *call.args)
    assert_bits(got, want, f"stdlib {case} {M}x{K}x{N}")


def test_chain_in_grid_and_outer_loop():
    """Chains whose PSUM tile and operands move with an outer loop and the SPMD program id."""
    K, M, N, T = 384, 16, 40, 3
    rng = np.random.default_rng(5)
    a, b = _inputs(rng, (2, K, M), "float32"), _inputs(rng, (K, T * N), "float32")

    @nki.jit(grid=(2,))
    def k(a, b):
        out = nl.ndarray((2, M, T * N), dtype=nl.float32, buffer=nl.shared_hbm)
        g = nl.program_id(0)
        at = nl.ndarray((3, nl.par_dim(128), M), dtype=a.dtype, buffer=nl.sbuf)
        for t in nl.affine_range(3):
            at[t] = nl.load(a[g, t * 128:(t + 1) * 128, :])
        for n in nl.affine_range(T):
            bt = nl.ndarray((3, nl.par_dim(128), N), dtype=b.dtype, buffer=nl.sbuf)
            for t in nl.affine_range(3):
                bt[t] = nl.load(b[t * 128:(t + 1) * 128, n * N:(n + 1) * N])
            ps = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
            for t in nl.affine_range(3):
                ps += nisa.nc_matmul(at[t], bt[t])
            nl.store(out[g, :, n * N:(n + 1) * N], nl.copy(ps))
        return out

    got, want = _both(k, a, b)
    assert_bits(got, want, "grid chain")


def test_chain_bounds_error_names_member():
    """An operand of a chain's loop member out of bounds in its last iteration (IR the verifier did
    not see): the JIT checks every member before storing anything and reports what the interpreter
    reports — the member's line, the operand range, the loop value."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    from nki_lite.runtime import jit as J
    from nki_lite.runtime.interpreter import run
    M, N = 8, 16

    def k(a, b):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.load(a)
        bt = nl.load(b)
        ps = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
        for t in nl.affine_range(2):
            ps += nisa.nc_matmul(at[0:64, :], bt[0:64, :])
        for t in nl.affine_range(3):
            ps += nisa.nc_matmul(at[nl.ds(t * 48, 64), :], bt[0:64, :])  # MARK-CHAIN-OOB
        nl.store(out, nl.copy(ps))
        return out
    a, b = np.ones((128, M), F32), np.ones((128, N), F32)
    kj = nki.jit(k)
    kern = run_shared(trace(kj.fn, kj.bind((a, b), {}), (), "trn2"))
    with pytest.raises(nki.errors.IndexOutOfBoundsError) as ei:
        run(kern, {"a": a, "b": b})
    ck, _ = J.compiled_for(kern, debug=False)
    with pytest.raises(nki.errors.IndexOutOfBoundsError) as ej:
        ck.launch({"a": a, "b": b})
    assert ei.value.message == ej.value.message, (ei.value.message, ej.value.message)
    assert "[96, 159]" in ej.value.message and "MARK" not in ej.value.message
    line = next(n for n, text in enumerate(open(__file__), 1) if "# MARK-CHAIN-OOB" in text and "nc_matmul" in text)
    assert ej.value.loc.line == line


def test_exact_products_over_all_fp8_pairs():
    """The FMA condition: every product of two fp8 / fp16 values is an fp32 number, checked over
    every pair of finite fp8 values; bf16 and tf32 products are not (range), so they keep the
    multiply-then-add of the contract."""
    fp8 = ["float8_e4m3", "float8_e4m3fn", "float8_e5m2"]
    for da, db in itertools.product(fp8, fp8):
        assert MC.exact_products(da, db)
        va = np.arange(256, dtype=np.uint8).view(D.INFO[da].storage).astype(np.float64)
        vb = np.arange(256, dtype=np.uint8).view(D.INFO[db].storage).astype(np.float64)
        va, vb = va[np.isfinite(va)], vb[np.isfinite(vb)]
        p = np.multiply.outer(va, vb)
        assert np.array_equal(p.astype(np.float32).astype(np.float64), p), (da, db)
    assert MC.exact_products("float16", "float16") and MC.exact_products("float16", "float8_e5m2")
    for pair in (("bfloat16", "bfloat16"), ("bfloat16", "float8_e4m3"), ("float32", "float32"),
                 ("tfloat32", "float16"), ("int8", "int8")):
        assert not MC.exact_products(*pair), pair
    h = np.array([2.0 ** -24, 65504.0], np.float64)          # fp16's extremes: products stay exact fp32
    p = np.multiply.outer(h, h)
    assert np.array_equal(p.astype(np.float32).astype(np.float64), p)


@pytest.mark.parametrize("shared", [True, False])
def test_multi_tile_chain(shared):
    """A K loop feeding two PSUM tiles (each its own stationary tiles): with one shared moving
    operand it is one chain of two outputs (one micro-kernel call site), with different moving
    operands each matmul is its own; JIT == interpreter either way, incl. a ragged K tail."""
    K, M, N = 128 * 5 + 20, 24, 72
    rng = np.random.default_rng(11)
    a, b = _inputs(rng, (K, 2 * M), "float32"), _inputs(rng, (K, 2 * N), "float32")
    KT = K // 128

    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        for _rep in nl.affine_range(1):
            at = nl.ndarray((KT, nl.par_dim(128), 2 * M), dtype=a.dtype, buffer=nl.sbuf)
            bt = nl.ndarray((KT, nl.par_dim(128), 2 * N), dtype=b.dtype, buffer=nl.sbuf)
            for t in nl.affine_range(KT):
                at[t] = nl.load(a[t * 128:(t + 1) * 128, :])
                bt[t] = nl.load(b[t * 128:(t + 1) * 128, :])
            a1, b1 = nl.load(a[KT * 128:K, :]), nl.load(b[KT * 128:K, :])
            ps = [nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum) for _ in range(2)]
            for t in nl.affine_range(KT):
                for i in range(2):
                    c0 = 0 if shared else i * N
                    ps[i] += nisa.nc_matmul(at[t, :, i * M:(i + 1) * M], bt[t, :, c0:c0 + N])
            for i in range(2):
                c0 = 0 if shared else i * N
                ps[i] += nisa.nc_matmul(a1[:, i * M:(i + 1) * M], b1[:, c0:c0 + N])
            for i in range(2):
                nl.store(out[i], nl.copy(ps[i]))
        return out

    got, want = _both(k, a, b)
    assert_bits(got, want, f"multi-tile chain shared={shared}")
    text = generate(k.trace(a, b)).text
    sites = [ln for ln in text.splitlines() if "call void @nkl_mmk_" in ln]
    if shared:
        # 5 loop iterations: one site in a loop over groups of KC // 128 (2 or 4), one for the rest
        # with the tail
        assert len(sites) == 2 and all(f"@nkl_mmk_{M}x{N}x2_" in s for s in sites), sites
    else:
        assert len(sites) == 4 and all(f"@nkl_mmk_{M}x{N}x1_" in s for s in sites), sites


def test_stdlib_kernel_feeds_a_blocks_tiles_per_call():
    """stdlib.matmul's kernel keeps an M block's PSUM tiles live over one K loop (blocks of up to 8
    row tiles, at least two blocks): M = 1024 is two blocks of 4 tiles, one chain of four outputs."""
    a, b = np.ones((1024, 1024), F32), np.ones((1024, 512), F32)
    call = S.matmul.plan(a, b)
    text = generate(call.kernel.trace(*call.args)).text
    sites = [ln for ln in text.splitlines() if "call void @nkl_mmk_" in ln]
    # (the M-block loop is a parallel region: its body is emitted in the region function and inline)
    # (each call takes KC // 128 of the K loop's iterations)
    assert sites and all(f"@nkl_mmk_128x512x4_c_128x{MC.KC // 128}f_g" in s for s in sites), sites


# ---------------------------------------------------------------- register-block geometry

@pytest.fixture(params=[MK.WIDE, MK.NARROW], ids=lambda g: f"{g.lanes}x{g.mr}x{g.nr}")
def geometry(request, monkeypatch):
    """Every test using this runs with the micro-kernel compiled for both host geometries (AVX-512's
    12 x 2 of 16 lanes and AVX2's 6 x 2 of 8 lanes both run on any x86-64 host: LLVM splits or
    widens the vectors), a fresh compile each time (no disk or memory cache hit)."""
    from nki_lite.runtime import jit
    monkeypatch.setattr(MK, "host_geometry", lambda: request.param)
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    jit.CACHE.clear()
    yield request.param
    jit.CACHE.clear()


@pytest.mark.parametrize("geom, registers", [(MK.WIDE, 32), (MK.NARROW, 16)], ids=["avx512", "avx2"])
def test_geometry_fits_registers_and_tiles_the_psum_width(geom, registers):
    """Each block's accumulators, its row of B and one broadcast fit the vector register file (a spill
    halves the speed), and its strip width divides the 512-wide moving tile, so a full PSUM tile has no
    narrower tail strip; the micro-kernel's strips for N = 512 are all full."""
    assert geom.mr * geom.nr + geom.nr + 1 <= registers
    width = nl.tile_size.gemm_moving_fmax
    assert width % (geom.nr * geom.lanes) == 0
    assert MK._strips(width, geom) == [(0, width // (geom.nr * geom.lanes), geom.nr, geom.lanes)]


@pytest.mark.parametrize("K, M, N", [(128, 1, 1), (300, 13, 47), (640, 7, 100), (1100, 128, 512),
                                     (129, 50, 130), (257, 6, 16), (128, 8, 48)])
def test_chain_geometries_equal_interpreter(geometry, K, M, N):
    """Ragged rows (not a multiple of 6 or 8), ragged columns (not a multiple of 16 or 48), several
    groups, fp32 and fp8 operands: the same bits in both geometries, and the code generated is the
    geometry's (its name in the call site)."""
    rng = np.random.default_rng(K * M + N)
    for dts in (("float32", "float32"), ("float8_e4m3", "float8_e5m2")):
        a, b = _inputs(rng, (K, M), dts[0]), _inputs(rng, (K, N), dts[1])
        kern = _chain_kernel(K, M, N, True, None)
        c0 = np.zeros((M, N), F32)
        text = generate(kern.trace(a, b, c0)).text
        g = geometry
        assert f"_g{g.lanes}x{g.mr}x{g.nr}(" in text and f"<{g.lanes} x float>" in text
        got, want = _both(kern, a, b, c0)
        assert_bits(got, want, f"geometry {g} {dts} K={K} M={M} N={N}")


def test_multi_tile_chain_geometries(geometry):
    """stdlib.matmul's blocks (five PSUM tiles sharing the moving operand, a 44-row K tail, ragged
    M and N) in both geometries."""
    a = np.random.default_rng(5).standard_normal((300, 77)).astype(F32)
    b = np.random.default_rng(6).standard_normal((300, 200)).astype(F32)
    from nki_lite.runtime import jit
    call = S.matmul.plan(np.ascontiguousarray(a.T.repeat(14, axis=0)[:1030]), b)
    call.kernel._fast.clear()            # the module-level kernel's cached launchers (other geometry)
    before = jit.CACHE.compiles
    got, want = _both(call.kernel, *call.args)
    assert jit.CACHE.compiles > before
    text = generate(call.kernel.trace(*call.args)).text
    assert "@nkl_mmk_128x512x5_" in text and f"_g{geometry.lanes}x{geometry.mr}x{geometry.nr}(" in text
    assert_bits(got, want, f"stdlib matmul, geometry {geometry}")


@pytest.mark.parametrize("avx512, want", [(True, MK.WIDE), (False, MK.NARROW)])
def test_host_geometry_follows_avx512(monkeypatch, avx512, want):
    """AVX-512 hosts get the 32-register block, AVX2-only hosts (16 registers) the 6 x 2 ymm block;
    each block's accumulators, B vectors and broadcast fit its register file (no spills)."""
    from nki_lite.lower.llvm import target
    monkeypatch.setattr(target, "has_feature", lambda name: avx512 if name == "avx512f" else True)
    MK.host_geometry.cache_clear()
    try:
        g = MK.host_geometry()
    finally:
        MK.host_geometry.cache_clear()
    assert g == want
    assert g.mr * g.nr + g.nr + 1 <= (32 if avx512 else 16)


@pytest.mark.parametrize("tail", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("first_accumulates", [True, False])
def test_unrolled_k_loop_remainders(tail, first_accumulates):
    """The register block's k loop runs MK.UNROLL rows per trip and then the remainder: pieces whose
    depth leaves every remainder (a ragged tail of 1..7 rows; a product-initialised first piece of
    127 rows) give the interpreter's bits."""
    assert MK.UNROLL == 4
    K, M, N = 128 + tail, 13, 40
    rng = np.random.default_rng(tail)
    a, b = _inputs(rng, (K, M), "float32"), _inputs(rng, (K, N), "float32")
    c0 = _inputs(rng, (M, N), "float32").astype(F32)
    got, want = _both(_chain_kernel(K, M, N, first_accumulates, None), a, b, c0)
    assert_bits(got, want, f"K={K} first_accumulates={first_accumulates}")
