"""nisa reductions and statistics (lang/isa_reduce.py): tensor_tensor_scan, bn_stats / bn_aggr,
tensor_scalar_reduce, max8 / nc_find_index8, against bitwise numpy references of the documented
semantics (tests/oracle.py), with their error cases, on both backends; last, a kernel of the nisa ops
through the legacy `neuronxcc.nki` imports (compat), checked against these references."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.testing import assert_close

from .oracle import F32, alu_f32, assert_bits, canon, f32_to, reduce_fp32_ref, storage, values, widen

from .both_backends import REDUCE_OPS, backend, nice, random_bits_f32, rng_of  # noqa: F401 - backend: autouse fixture

BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


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
