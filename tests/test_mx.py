"""MX formats (issue #14): the x4 packed dtypes, nisa.quantize_mx and nisa.nc_matmul_mx.

numerics/mx.py is checked against references written here in float64 (the ISA docs' scale formula, the
dequantized operands' product); the kernels run in both backends, JIT == interpreter bit for bit; misuse
names the kernel's line (NL-E119 layout, NL-E120 dtypes, NL-E904 writes of a resized view's tensor)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors
from nki_lite.core import dtypes as D
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.rules import CostCtx, cost_of
from nki_lite.core.ir import walk
from nki_lite.numerics import mx as MX

from . import markers
from .nki_tiles import hbm_of
from .test_nki_dialect import both       # both backends, bit for bit; the JIT's result

HERE, line_of, expect = markers.marker_helpers(__file__)
RNG = np.random.default_rng(1403)
ELEMENT = {"float8_e4m3fn_x4": ml_dtypes.float8_e4m3fn, "float8_e5m2_x4": ml_dtypes.float8_e5m2,
           "float4_e2m1fn_x4": ml_dtypes.float4_e2m1fn}
EMAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}


def raises(kernel, args, name: str, marker: str):
    return expect(kernel, args, errors.NkiLiteError, name, marker, target="trn3")


# ------------------------------------------------------------------------------ dtypes and packing

def test_public_dtypes_name_round_trip_and_are_distinct_from_their_storage():
    for name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"):
        dt = getattr(nl, name)
        assert D.name_of(dt) == name and D.is_packed(name)
    assert D.name_of(np.uint32) == "uint32" and D.itemsize("float4_e2m1fn_x4") == 2
    # distinct objects: kernels compare dtypes and key dicts by them (the NKI Library's max-exponent tables)
    mx = [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4, nl.float8_e8m0fnu]
    assert len({*mx, np.dtype(np.uint32), np.dtype(np.uint16), np.dtype(np.uint8)}) == 7
    with pytest.raises(D.UnknownDType):
        D.promote("float8_e5m2_x4", "bfloat16")


@pytest.mark.parametrize("name", sorted(ELEMENT))
def test_pack_unpack_round_trip_and_element_order(name):
    bits = MX.X4[name][1]
    codes = RNG.integers(0, 1 << bits, size=(3, 5, 4), dtype=np.uint8)
    raw = MX.pack(codes, name)
    assert np.array_equal(MX.unpack(raw, name), codes)
    # element q sits in bits q*bits..: for fp8 what viewing four fp8 bytes as uint32 gives (little-endian)
    want = sum(codes[..., q].astype(np.uint64) << (bits * q) for q in range(4))
    assert np.array_equal(raw.astype(np.uint64), want)
    vals = MX.decode(raw, name)
    ref = np.vectorize(lambda c: float(np.array([c], np.uint8).view(ELEMENT[name])[0]))(codes)
    assert np.array_equal(np.isnan(vals), np.isnan(ref)) and np.array_equal(vals[~np.isnan(vals)], ref[~np.isnan(ref)])


# ------------------------------------------------------------------------------ quantize numerics

def _quantize_reference(x, name):
    """The ISA docs, in float64: X = 2^(floor(log2 amax) - (Emax - 1)), b = that exponent + 127 clamped to
    >= 0 (2^-127 for an all-zero group); data = x / X rounded to the element format."""
    P, F = x.shape
    xs = x.astype(np.float64)
    groups = np.abs(xs).reshape(P // 8, 8, F // 4, 4).max(axis=(1, 3))
    with np.errstate(divide="ignore"):
        e = np.where(groups > 0, np.floor(np.log2(np.where(groups > 0, groups, 1))), -1000)
    b = np.clip(e - (EMAX[name] - 1) + 127, 0, 254).astype(np.int64)
    scale = np.repeat(np.repeat(np.ldexp(1.0, b - 127), 8, axis=0), 4, axis=1)
    codes = (xs / scale).astype(ELEMENT[name]).view(np.uint8).reshape(P, F // 4, 4)
    return MX.pack(codes, name), b.astype(np.uint8)


@pytest.mark.parametrize("name", sorted(EMAX))
def test_quantize_matches_the_documented_scale_and_rounding(name):
    x = (RNG.standard_normal((64, 32)) * np.ldexp(1.0, RNG.integers(-20, 20, (64, 32)))).astype(ml_dtypes.bfloat16)
    x[:8, :4] = 0                                               # an all-zero group: scale 2^-127
    x[8:16, 4:8] = np.ldexp(1.0, -133)                          # bf16 subnormals: the scale clamps at 2^-127
    data, scales = MX.quantize(x.astype(np.float32), name)
    want_data, want_scales = _quantize_reference(x, name)
    assert np.array_equal(scales, want_scales) and np.array_equal(data, want_data)
    assert scales[0, 0] == 0 and scales[1, 1] == 0


@pytest.mark.parametrize("name", sorted(EMAX))
def test_quantize_round_trip_is_exact_on_representable_data(name):
    """Values code * 2^k with one element per group at exponent Emax - 1 (so the scale is 2^k): quantize
    gives back exactly those codes and scales."""
    el = ELEMENT[name]
    finite = np.array([c for c in range(256) if np.isfinite(np.array([c], np.uint8).view(el)[0].astype(float))
                       and abs(float(np.array([c], np.uint8).view(el)[0])) < 2.0 ** (EMAX[name])], np.uint8)
    codes = RNG.choice(finite, size=(32, 16, 4))
    top = np.array([1.5 * 2.0 ** (EMAX[name] - 1)]).astype(el).view(np.uint8)[0]
    codes.reshape(4, 8, 16, 4)[:, 3, :, 2] = top               # every group holds one element at 2^(Emax-1)
    k = RNG.integers(100, 150, size=(4, 16))
    x = MX.dequantize(MX.pack(codes, name), name, k.astype(np.uint8)).reshape(32, 64)
    data, scales = MX.quantize(x.astype(ml_dtypes.bfloat16).astype(np.float32), name)
    assert np.array_equal(scales, k.astype(np.uint8))
    assert np.array_equal(MX.unpack(data, name), codes)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_quantize_group_with_nan_or_inf_is_nan(special):
    x = np.ones((32, 8), np.float32)
    x[9, 5] = special
    data, scales = MX.quantize(x, "float8_e4m3fn_x4")
    assert scales[1, 1] == 255 and scales[0, 0] != 255
    assert np.all(MX.unpack(data, "float8_e4m3fn_x4")[8:16, 1] == MX.CODE_NAN)


# ------------------------------------------------------------------------------ kernels

@nki.jit(platform_target="trn3")
def quantize_kernel(x, init, qdtype):
    P, F = x.shape
    xs = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    q = nl.ndarray((P, F // 4), dtype=qdtype, buffer=nl.sbuf)
    s = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=init)
    nisa.quantize_mx(dst=q, src=xs, dst_scale=s[4:, :])        # packed at offset 4 of each quadrant
    qo = nl.ndarray(q.shape, dtype=qdtype, buffer=nl.shared_hbm)
    so = nl.ndarray(s.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=qo, src=q)
    nisa.dma_copy(dst=so, src=s)
    return qo, so


@pytest.mark.parametrize("name", sorted(EMAX))
def test_quantize_kernel_places_scales_in_quadrants_and_keeps_other_partitions(name):
    x = (RNG.standard_normal((128, 64)) * 3).astype(ml_dtypes.bfloat16)
    q, s = both(quantize_kernel, x, 7, getattr(nl, name))
    data, scales = MX.quantize(x.astype(np.float32), name)
    assert np.array_equal(q.view(np.uint32), data)
    rows = MX.scale_rows(128) + 4
    assert np.array_equal(s[rows], scales)
    others = np.setdiff1d(np.arange(128), rows)
    assert np.all(s[others] == 7)


@nki.jit(platform_target="trn3")
def quantize_3d_kernel(x):
    P, A, B = x.shape
    xs = nl.ndarray((P, A, B), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    q = nl.ndarray((P, A, B // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    s = nl.ndarray((P, A, B // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0)
    nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
    qo = nl.ndarray(q.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    so = nl.ndarray(s.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=qo, src=q)
    nisa.dma_copy(dst=so, src=s)
    return qo, so


def test_quantize_reads_free_axes_row_major():
    """The NKI Library quantizes [P, n, T] tiles: the free axes flatten row-major into groups of 4."""
    x = RNG.standard_normal((32, 3, 8)).astype(np.float16)
    q, s = both(quantize_3d_kernel, x)
    data, scales = MX.quantize(x.astype(np.float32).reshape(32, 24), "float8_e4m3fn_x4")
    assert np.array_equal(q.view(np.uint32).reshape(32, 6), data)
    assert np.array_equal(s.reshape(32, 6)[:4], scales)


def store_psum(ps):
    """PSUM -> SBUF (fp32) -> a new HBM output."""
    o = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=ps)
    return hbm_of(o)


@nki.jit(platform_target="trn3")
def matmul_kernel(st, st_scale, mv, mv_scale, sdt, mdt, out_dt, acc):
    K, M = st_scale.shape[0] * 8, st_scale.shape[1]
    N = mv_scale.shape[1]
    s = nl.ndarray((K, M), dtype=sdt, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=st.ap(dtype=sdt, pattern=[[M, K], [1, M]], offset=0))
    m = nl.ndarray((K, N), dtype=mdt, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=mv.ap(dtype=mdt, pattern=[[N, K], [1, N]], offset=0))
    ss = nl.ndarray((max(K, 4), M), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((max(K, 4), N), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
    for q in range(K // 32):                                    # compact HBM scales -> quadrant layout
        nisa.dma_copy(dst=ss[32 * q:32 * q + 4, :], src=st_scale[4 * q:4 * q + 4, :])
        nisa.dma_copy(dst=ms[32 * q:32 * q + 4, :], src=mv_scale[4 * q:4 * q + 4, :])
    ps = nl.ndarray((M, N), dtype=out_dt, buffer=nl.psum)
    for _ in range(acc):
        nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms)
    return store_psum(ps)


def _operand(name, K, F, lo=110, hi=135):
    bits = MX.X4[name][1]
    codes = RNG.integers(0, 1 << bits, size=(K, F, 4), dtype=np.uint8)
    if bits == 8:                                               # no NaN / inf codes in the random data
        vals = MX.TABLES[name][codes]
        codes[~np.isfinite(vals)] = 0
    raw = MX.pack(codes, name)
    host = raw.view(np.uint8).reshape(K, -1) if bits == 4 else raw      # fp4: bytes, as the tutorial's host side
    scales = RNG.integers(lo, hi, size=(K // 8, F), dtype=np.uint8)
    return raw, host, scales


@pytest.mark.parametrize("sdt,mdt,K", [("float8_e4m3fn_x4", "float8_e5m2_x4", 128),
                                       ("float4_e2m1fn_x4", "float8_e5m2_x4", 64),
                                       ("float4_e2m1fn_x4", "float4_e2m1fn_x4", 32)])
def test_matmul_matches_float64_product_of_dequantized_operands(sdt, mdt, K):
    M, N = 16, 40
    s_raw, s_host, s_sc = _operand(sdt, K, M)
    m_raw, m_host, m_sc = _operand(mdt, K, N)
    got = both(matmul_kernel, s_host, s_sc.view(np.uint8), m_host, m_sc.view(ml_dtypes.float8_e8m0fnu),
               getattr(nl, sdt), getattr(nl, mdt), nl.float32, 1)
    a, b = MX.dequantize(s_raw, sdt, s_sc), MX.dequantize(m_raw, mdt, m_sc)
    ref = np.einsum("kmq,knq->mn", a, b)
    bound = np.einsum("kmq,knq->mn", np.abs(a), np.abs(b)) * 2.0 ** -23     # one fp32 rounding of the sum
    assert np.all(np.abs(got - ref) <= bound + 1e-300)
    assert got.dtype == np.float32 and np.any(got != 0)


def test_matmul_accumulates_and_rounds_to_a_bfloat16_psum_tile():
    K, M, N = 32, 8, 16
    s_raw, s_host, s_sc = _operand("float8_e4m3fn_x4", K, M, 120, 128)
    m_raw, m_host, m_sc = _operand("float8_e4m3fn_x4", K, N, 120, 128)
    args = (s_host, s_sc, m_host, m_sc.view(ml_dtypes.float8_e8m0fnu), nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4)
    one = both(matmul_kernel, *args, nl.float32, 1)
    three = both(matmul_kernel, *args, nl.float32, 3)
    assert np.array_equal(three, ((one + one).astype(np.float32) + one).astype(np.float32))
    bf = both(matmul_kernel, *args, nl.bfloat16, 1)
    assert np.array_equal(bf, one.astype(ml_dtypes.bfloat16).astype(np.float32))


@nki.jit(platform_target="trn3")
def matmul_3d_kernel(st, st_scale, mv, mv_scale):
    K, M = st_scale.shape[0] * 8, st_scale.shape[1]
    N = mv_scale.shape[1]
    s = nl.ndarray((K, 2, M // 2), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)     # [K, 2, M/2]: read row-major
    nisa.dma_copy(dst=s, src=st.ap(dtype=nl.float8_e4m3fn_x4, pattern=[[M, K], [M // 2, 2], [1, M // 2]], offset=0))
    m = nl.ndarray((K, N), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=mv.ap(dtype=nl.float8_e4m3fn_x4, pattern=[[N, K], [1, N]], offset=0))
    ss = nl.ndarray((K, 2, M // 2), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((K, N), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=ss[0:4], src=st_scale.reshape((4, 2, M // 2)))
    nisa.dma_copy(dst=ms[0:4, :], src=mv_scale)
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms)
    return store_psum(ps)


def test_matmul_reads_free_axes_of_operands_and_scales_row_major():
    K, M, N = 32, 8, 24
    s_raw, s_host, s_sc = _operand("float8_e4m3fn_x4", K, M)
    m_raw, m_host, m_sc = _operand("float8_e4m3fn_x4", K, N)
    got = both(matmul_3d_kernel, s_host, s_sc, m_host, m_sc)
    want = both(matmul_kernel, s_host, s_sc, m_host, m_sc.view(ml_dtypes.float8_e8m0fnu), nl.float8_e4m3fn_x4,
                nl.float8_e4m3fn_x4, nl.float32, 1)
    assert np.array_equal(got, want)


# ------------------------------------------------------------------------------ engine model

def test_cost_rules_use_the_documented_mx_throughput():
    K, M, N = 128, 128, 512
    _, s_host, s_sc = _operand("float8_e4m3fn_x4", K, M)
    _, m_host, m_sc = _operand("float8_e4m3fn_x4", K, N)
    k = matmul_kernel.inner.trace(s_host, s_sc, m_host, m_sc.view(ml_dtypes.float8_e8m0fnu), nl.float8_e4m3fn_x4,
                                  nl.float8_e4m3fn_x4, nl.float32, 1, target="trn3")
    ctx = CostCtx(TARGETS["trn3"], k.buffer_map)
    (c,) = [cost_of(i, ctx) for i, _ in walk(k.body) if i.op == "nc_matmul_mx"]
    assert c.engine == "tensor" and c.cycles == max(min(64, M), N) and c.flops == 2 * 4 * K * M * N
    x = RNG.standard_normal((128, 2048)).astype(ml_dtypes.bfloat16)
    kq = quantize_kernel.inner.trace(x, 0, nl.float8_e5m2_x4, target="trn3")
    ctx = CostCtx(TARGETS["trn3"], kq.buffer_map)
    (q,) = [cost_of(i, ctx) for i, _ in walk(kq.body) if i.op == "quantize_mx"]
    assert q.engine == "vector" and q.cycles == 2048 / 4


# ------------------------------------------------------------------------------ misuse

@nki.jit(platform_target="trn3")
def bad_quantize(x, case):
    P, F = x.shape
    xs = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    q = nl.ndarray((P, F // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    s = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.sbuf)
    if case == "small_scale":
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s[0:64, :])   # MARK-SMALL-SCALE
    elif case == "odd_offset":
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s[2:, :])     # MARK-ODD-OFFSET
    elif case == "dst_shape":
        nisa.quantize_mx(dst=q[:, 0:1], src=xs, dst_scale=s)    # MARK-DST-SHAPE
    elif case == "fp4_out":
        q4 = nl.ndarray((P, F // 4), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q4, src=xs, dst_scale=s)           # MARK-FP4-OUT
    elif case == "add":
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
        r = nl.ndarray(q.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=q, data2=q, op=nl.add)  # MARK-ADD
    elif case == "convert":
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
        r = nl.ndarray(q.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=q)                          # MARK-CONVERT
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=xs)
    return out


def test_quantize_rejects_float32_source_and_partitions_not_multiple_of_32():
    raises(bad_quantize, (np.ones((128, 16), np.float32), "small_scale"), "mx_dtype", "MARK-SMALL-SCALE")
    raises(bad_quantize, (np.ones((48, 16), ml_dtypes.bfloat16), "small_scale"), "mx_layout", "MARK-SMALL-SCALE")


@nki.jit(platform_target="trn3")
def bad_matmul(case):
    s = nl.ndarray((64, 16), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    m = nl.ndarray((64, 32), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    ss = nl.ndarray((64, 16), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((64, 32), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0)
    nisa.memset(dst=m, value=0)
    nisa.memset(dst=ss, value=127)
    nisa.memset(dst=ms, value=127)
    ps = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.psum)
    if case == "k_mismatch":
        nisa.nc_matmul_mx(dst=ps, stationary=s[0:32, :], moving=m, stationary_scale=ss, moving_scale=ms)  # MARK-K
    elif case == "psum_dst":
        sb = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul_mx(dst=sb, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms)  # MARK-SBUF-DST
    elif case == "odd_m":
        nisa.nc_matmul_mx(dst=ps[0:15, :], stationary=s[:, 0:15], moving=m, stationary_scale=ss,  # MARK-ODD-M
                          moving_scale=ms)
    elif case == "bf16_data":
        b = nl.ndarray((64, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.nc_matmul_mx(dst=ps, stationary=b, moving=m, stationary_scale=ss, moving_scale=ms)  # MARK-BF16
    elif case == "scale_cols":
        nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss,  # MARK-SCALE-COLS
                          moving_scale=ms[:, 0:16])
    elif case == "tiling":
        nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms,  # MARK-TILING
                          tile_position=(0, 0), tile_size=(32, 128))
    return store_psum(ps)


BF16_X = np.ones((128, 16), ml_dtypes.bfloat16)


@pytest.mark.parametrize("kernel,args,name,marker", [
    (bad_quantize, (BF16_X, "small_scale"), "mx_layout", "MARK-SMALL-SCALE"),
    (bad_quantize, (BF16_X, "odd_offset"), "mx_layout", "MARK-ODD-OFFSET"),
    (bad_quantize, (BF16_X, "dst_shape"), "mx_layout", "MARK-DST-SHAPE"),
    (bad_quantize, (BF16_X, "fp4_out"), "mx_dtype", "MARK-FP4-OUT"),
    (bad_quantize, (BF16_X, "add"), "mx_dtype", "MARK-ADD"),
    (bad_quantize, (BF16_X, "convert"), "mx_dtype", "MARK-CONVERT"),
    (bad_matmul, ("k_mismatch",), "mx_layout", "MARK-K"), (bad_matmul, ("psum_dst",), "mx_layout", "MARK-SBUF-DST"),
    (bad_matmul, ("odd_m",), "mx_layout", "MARK-ODD-M"), (bad_matmul, ("bf16_data",), "mx_dtype", "MARK-BF16"),
    (bad_matmul, ("scale_cols",), "mx_layout", "MARK-SCALE-COLS"), (bad_matmul, ("tiling",), "mx_layout", "MARK-TILING")])
def test_misuse_is_an_error_at_the_line(kernel, args, name, marker):
    raises(kernel, args, name, marker)


def test_mx_instructions_need_neuroncore_v4():
    with pytest.raises(errors.NkiLiteError) as ei:
        bad_matmul.inner.trace("tiling", target="trn2")
    assert ei.value.name == "mx_dtype" and "NeuronCore-v4" in str(ei.value)


@nki.jit(platform_target="trn3")
def write_resized(x):
    v = x.ap(dtype=nl.float4_e2m1fn_x4, pattern=[[2, 4], [1, 2]], offset=0)
    t = nl.ndarray((4, 2), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=v)
    nisa.dma_copy(dst=v, src=t)                                 # MARK-WRITE-RESIZED
    out = nl.ndarray((4, 2), dtype=nl.float4_e2m1fn_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_resized_view_reads_bytes_and_its_tensor_cannot_be_written():
    raises(write_resized, (np.arange(16, dtype=np.uint8).reshape(4, 4),), "unsupported", "MARK-WRITE-RESIZED")
