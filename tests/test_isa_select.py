"""nisa.range_select, select_reduce (and the accumulator chain they share), nc_match_replace8,
tensor_partition_reduce and sequence_bounds on both backends (the autouse `backend`), against numpy
references written from NKI's documentation (its "NumPy equivalent" blocks); every kernel also runs
on both backends and is compared bit for bit.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .both_backends import backend  # noqa: F401 - autouse: every test on both backends
from .markers import marker_helpers

HERE, line_of, expect = marker_helpers(__file__)
RNG = np.random.default_rng(13)
FP32_MIN = np.finfo(np.float32).min


def both_modes(kernel, *args):
    a = kernel(*args, mode="interpret")
    b = kernel(*args, mode="jit")
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))
    return a


# ---------------------------------------------------------------- range_select

@nki.jit
def range_select_kernel(x, b0, b1):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    y = nisa.range_select(on_true_tile=nl.load(x), comp_op0=np.greater_equal, comp_op1=np.less,
                          bound0=nl.load(b0), bound1=nl.load(b1), reduce_cmd=nisa.reduce_cmd.reset_reduce,
                          reduce_res=r, reduce_op=np.max, range_start=16)
    nl.store(out, value=y)
    nl.store(red, value=r)
    return out, red


def test_range_select_keeps_the_index_range_and_reduces_max():
    x = RNG.standard_normal((64, 200)).astype(np.float32)
    b0 = RNG.integers(0, 100, (64, 1)).astype(np.float32)
    b1 = b0 + RNG.integers(1, 100, (64, 1)).astype(np.float32)
    out, red = both_modes(range_select_kernel, x, b0, b1)
    i = 16 + np.arange(200)[None, :]
    want = np.where((i >= b0) & (i < b1), x, FP32_MIN)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(red, want.max(axis=1, keepdims=True))


@nki.jit
def range_select_chain(x, b0, b1, n):
    red = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    t = nl.load(x)
    lo, hi = nl.load(b0), nl.load(b1)
    nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=lo, bound1=hi,
                      reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=np.max)
    for k in nl.static_range(1, n):
        t2 = nl.add(t, float(k))
        nisa.range_select(on_true_tile=t2, comp_op0=np.greater_equal, comp_op1=np.less, bound0=lo, bound1=hi,
                          reduce_cmd=nisa.reduce_cmd.reduce, reduce_op=np.max, range_start=k * 64,
                          reduce_res=r if k == n - 1 else None)
    nl.store(red, value=r)
    return red


def test_range_select_chains_its_max_across_instructions_through_the_accumulator():
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    b0 = np.zeros((32, 1), np.float32)
    b1 = np.full((32, 1), 150, np.float32)
    red = both_modes(range_select_chain, x, b0, b1, 3)
    want = np.full((32, 1), -np.inf, np.float32)
    for k in range(3):
        i = k * 64 + np.arange(64)[None, :]
        sel = np.where((i >= 0) & (i < 150), (x + np.float32(k)).astype(np.float32), FP32_MIN)
        want = np.maximum(want, sel.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(red, want)


@nki.jit
def chains_per_iteration(x):
    out = nl.ndarray((x.shape[0], 4), nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(4):
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(on_true_tile=nl.load(x[:, nl.ds(j * 32, 32)]), comp_op0=np.greater_equal,
                          comp_op1=np.less, bound0=0.0, bound1=16.0, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                          reduce_res=r, reduce_op=np.max)
        nl.store(out[:, j], value=r)
    return out


def test_accumulator_chains_in_affine_range_iterations_are_independent():
    x = RNG.standard_normal((16, 128)).astype(np.float32)
    out = both_modes(chains_per_iteration, x)
    np.testing.assert_array_equal(out, x.reshape(16, 4, 32)[:, :, :16].max(axis=2))


# ---------------------------------------------------------------- select_reduce

@nki.jit
def select_reduce_kernel(pred, x, f, reverse):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=dst, predicate=nl.load(pred), on_true=nl.load(x), on_false=nl.load(f),
                       reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.max,
                       reverse_pred=reverse)
    nl.store(out, value=dst)
    nl.store(red, value=r)
    return out, red


@pytest.mark.parametrize("reverse", [False, True])
def test_select_reduce_selects_by_predicate_and_reduces_max(reverse):
    pred = RNG.integers(0, 3, (128, 96)).astype(np.uint8)
    x = RNG.standard_normal((128, 96)).astype(np.float32)
    f = RNG.standard_normal((128, 1)).astype(np.float32)
    out, red = both_modes(select_reduce_kernel, pred, x, f, reverse)
    p = (pred != 0) if not reverse else (pred == 0)
    want = np.where(p, x, f)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(red, want.max(axis=1, keepdims=True))


@nki.jit
def select_scalar(pred, x):
    out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
    nisa.select_reduce(dst=dst, predicate=nl.load(pred), on_true=nl.load(x), on_false=nl.fp32.min)
    nl.store(out, value=dst)
    return out


def test_select_reduce_rounds_into_dst_and_fp32_min_becomes_minus_inf_in_bf16():
    pred = np.zeros((64, 32), np.uint8)
    pred[:32] = 1
    x = np.ones((64, 32), np.float32)
    out = both_modes(select_scalar, pred, x).astype(np.float32)
    assert (out[:32] == 1).all() and (out[32:] == -np.inf).all()


@nki.jit
def select_into_columns(pred, x):
    out = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.shared_hbm)
    cols = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.sbuf)
    dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(2):
        nisa.select_reduce(dst=dst[:, nl.ds(k * 16, 16)], predicate=nl.load(pred[:, nl.ds(k * 16, 16)]),
                           on_true=nl.load(x[:, nl.ds(k * 16, 16)]), on_false=-1e30,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=cols[:, k], reduce_op=np.max)
    nl.store(out, value=cols)
    return out


def test_select_reduce_into_integer_indexed_column_views():
    """reduce_res=max_local[:, k] (a [P] view), as the samples' paged flash attention writes it."""
    pred = RNG.integers(0, 2, (128, 32)).astype(np.uint8)
    x = RNG.standard_normal((128, 32)).astype(np.float32)
    out = both_modes(select_into_columns, pred, x)
    sel = np.where(pred != 0, x, np.float32(-1e30)).reshape(128, 2, 16)
    np.testing.assert_array_equal(out, sel.max(axis=2))


# ---------------------------------------------------------------- nc_match_replace8

def documented_match_replace8(data, vals, imm):
    """The NumPy equivalent of nki.isa.nc_match_replace8's documentation."""
    d2 = data.reshape(data.shape[0], -1).copy()
    v2 = vals.reshape(vals.shape[0], -1)
    idx = np.zeros(v2.shape, np.uint32)
    for i in range(d2.shape[0]):
        for j in range(v2.shape[1]):
            m = np.where(d2[i] == v2[i, j])[0]
            if m.size:
                idx[i, j] = m[0]
                d2[i, m[0]] = imm
    return d2.reshape(data.shape), idx


@nki.jit
def match_replace(x, imm):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((x.shape[0], 8), nl.uint32, buffer=nl.shared_hbm)
    idx = nl.ndarray((x.shape[0], 8), nl.uint32, buffer=nl.sbuf)
    t = nl.load(x)
    top = nisa.max8(src=t)
    nl.store(out, value=nisa.nc_match_replace8(data=t, vals=top, imm=imm, dst_idx=idx))
    nl.store(idx_out, value=idx)
    return out, idx_out


@pytest.mark.parametrize("shape", [(128, 300), (32, 4, 5)])
def test_match_replace8_is_the_documented_numpy_equivalent(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    x.reshape(shape[0], -1)[:, 7] = x.reshape(shape[0], -1)[:, 3]     # duplicates: first, then second occurrence
    out, idx = both_modes(match_replace, x, -np.inf)
    top = -np.sort(-x.reshape(shape[0], -1), axis=1)[:, :8]
    want, want_idx = documented_match_replace8(x, top, np.float32(-np.inf))
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(idx, want_idx)


@nki.jit
def match_replace_in_place(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    t[...] = nisa.nc_match_replace8(data=t, vals=nisa.max8(src=t), imm=0.0)
    nl.store(out, value=t)
    return out


def test_match_replace8_in_place():
    x = RNG.uniform(1, 2, (64, 40)).astype(np.float32)
    out = both_modes(match_replace_in_place, x)
    top = -np.sort(-x, axis=1)[:, :8]
    np.testing.assert_array_equal(out, documented_match_replace8(x, top, np.float32(0))[0])


# ---------------------------------------------------------------- tensor_partition_reduce

@nki.jit
def partition_reduce(x, op):
    out = nl.ndarray((1,) + x.shape[1:], x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.tensor_partition_reduce(op, nl.load(x)))
    return out


def test_partition_reduce_add_and_max_over_partitions():
    x = RNG.standard_normal((128, 8, 6)).astype(np.float32)
    s = both_modes(partition_reduce, x, np.add)
    np.testing.assert_allclose(s, x.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(both_modes(partition_reduce, x, np.maximum), x.max(axis=0, keepdims=True))


@pytest.mark.parametrize("op, ref", [(np.bitwise_or, np.bitwise_or.reduce), (np.bitwise_and, np.bitwise_and.reduce)])
def test_partition_reduce_bitwise_on_integers(op, ref):
    x = RNG.integers(-2 ** 31, 2 ** 31, (100, 33), dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(both_modes(partition_reduce, x, op), ref(x, axis=0, keepdims=True))


# ---------------------------------------------------------------- sequence_bounds

def documented_bounds(seq):
    """The reference of NKI's sequence_bounds example."""
    n = len(seq)
    lo, hi = np.zeros(n), np.zeros(n)
    lo[0] = 0 if seq[0] != 0 else n
    for i in range(1, n):
        lo[i] = n if seq[i] == 0 else lo[i - 1] if seq[i] == seq[i - 1] else i
    hi[-1] = n if seq[-1] != 0 else -1
    for i in range(n - 2, -1, -1):
        hi[i] = -1 if seq[i] == 0 else hi[i + 1] if seq[i] == seq[i + 1] else i + 1
    return np.vstack((lo, hi))[None]


@nki.jit
def bounds_kernel(ids):
    out = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.sequence_bounds(segment_ids=nl.load(ids)))
    return out


@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_sequence_bounds_is_the_documented_reference(dt):
    ids = np.array([[0, 3, 3, 3, 5, 0, 0, 2, 2, 7, 7, 7, 7, 0, 1, 1]], dtype=dt)
    got = both_modes(bounds_kernel, ids)
    np.testing.assert_array_equal(got, documented_bounds(ids[0]).astype(dt))
    ids2 = np.sort(RNG.integers(0, 12, (1, 64))).astype(dt)
    np.testing.assert_array_equal(both_modes(bounds_kernel, ids2), documented_bounds(ids2[0]).astype(dt))


# ---------------------------------------------------------------- verification: errors at the line

@nki.jit
def bad_compare(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    y = nisa.range_select(on_true_tile=nl.load(x), comp_op0=np.add, comp_op1=np.less,  # MARK-CMP
                          bound0=0.0, bound1=1.0)
    nl.store(out, value=y)
    return out


@nki.jit
def bad_reduce_op(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nisa.select_reduce(dst=t, predicate=nl.load(x, dtype=nl.uint8), on_true=t, on_false=0.0,  # MARK-RED
                       reduce_op=np.add)
    nl.store(out, value=t)
    return out


@nki.jit
def bad_vals(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nisa.nc_match_replace8(data=t, vals=t[:, 0:4], imm=0.0))  # MARK-VALS
    return out


@nki.jit
def bad_partition_op(x):
    out = nl.ndarray((1, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.tensor_partition_reduce(np.multiply, nl.load(x)))  # MARK-PROD
    return out


@nki.jit
def bad_bitwise(x):
    out = nl.ndarray((1, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.tensor_partition_reduce(np.bitwise_or, nl.load(x)))  # MARK-BITF
    return out


@nki.jit
def bad_bounds(x):
    out = nl.ndarray((2, 2, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.sequence_bounds(segment_ids=nl.load(x)))  # MARK-SEQ
    return out


@nki.jit
def bad_chain(x):
    out = nl.ndarray((64, 1), nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
    t = nl.load(x)
    nisa.range_select(on_true_tile=t, comp_op0=np.less, comp_op1=np.less, bound0=0.0, bound1=1.0,
                      reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.range_select(on_true_tile=t[0:64], comp_op0=np.less, comp_op1=np.less, bound0=0.0,  # MARK-CHAIN
                      bound1=1.0, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=r)
    nl.store(out, value=r)
    return out


@pytest.mark.parametrize("kernel, name, marker", [
    (bad_compare, "isa_operand", "MARK-CMP"),
    (bad_reduce_op, "isa_operand", "MARK-RED"),
    (bad_vals, "shape_mismatch", "MARK-VALS"),
    (bad_partition_op, "isa_operand", "MARK-PROD"),
    (bad_bitwise, "dtype", "MARK-BITF"),
    (bad_bounds, "shape_mismatch", "MARK-SEQ"),
    (bad_chain, "accumulator", "MARK-CHAIN"),
])
def test_misuse_is_an_error_at_the_line(kernel, name, marker):
    expect(kernel, (np.zeros((128, 16), np.float32),), errors.NkiLiteError, name, marker)


# ---------------------------------------------------------------- masks and narrow dtypes

@nki.jit
def masked_family(x, pred, ids):
    """Every instruction of this file under a mask, on bf16 data: the backends must agree bit for bit;
    select_reduce writes dst in place, so its masked-off elements keep their zeros."""
    P, F = x.shape
    ip, jf = nl.mgrid[0:P, 0:F]
    m = (ip < P // 2) & (jf < F - 5)
    outs = nl.ndarray((4, P, F), nl.float32, buffer=nl.shared_hbm)
    red = nl.ndarray((2, P, 1), nl.float32, buffer=nl.shared_hbm)
    col = nl.ndarray((1, F), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r0 = nl.zeros((P, 1), nl.float32)
    r1 = nl.zeros((P, 1), nl.float32)
    a = nl.zeros((P, F), nl.bfloat16)
    a[ip, jf] = nisa.range_select(on_true_tile=t, comp_op0=np.greater, comp_op1=np.less_equal, bound0=3.0,
                                  bound1=40.0, reduce_cmd=nisa.reduce_cmd.idle, reduce_res=r0, mask=m)
    b = nl.zeros((P, F), nl.bfloat16)
    nisa.select_reduce(dst=b, predicate=nl.load(pred), on_true=t, on_false=-2.0, reduce_res=r1, mask=m)
    c = nl.zeros((P, F), nl.bfloat16)
    c[ip, jf] = nisa.nc_match_replace8(data=t, vals=nisa.max8(src=t), imm=9.0, mask=m)
    d = nisa.tensor_partition_reduce(np.add, t, dtype=nl.float32, mask=m)   # columns >= F - 5: not written
    for k, v in enumerate((a, b, c)):
        nl.store(outs[k], value=nl.copy(v, dtype=nl.float32))
    nl.store(outs[3], value=nl.copy(nisa.dropout(t, prob=0.5, mask=m), dtype=nl.float32))
    nl.store(red[0], value=r0)
    nl.store(red[1], value=r1)
    nl.store(col, value=d)
    return outs, red, col


def test_masked_instructions_agree_bitwise_and_leave_masked_off_elements():
    import ml_dtypes
    x = (RNG.standard_normal((64, 48)) * 4).astype(ml_dtypes.bfloat16)
    x[3, 7] = np.nan
    pred = RNG.integers(0, 2, (64, 48)).astype(np.uint8)
    outs, red, col = both_modes(masked_family, x, pred, None)
    off = np.ones((64, 48), bool)
    off[:32, :43] = False
    assert (outs[1][off] == 0).all()
    xf = x.astype(np.float32)
    i = np.arange(48)[None, :]
    want = np.where((i > 3) & (i <= 40), xf, np.finfo(np.float32).min)[:32, :43]
    np.testing.assert_array_equal(outs[0][:32, :43], want.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert np.isnan(red[0][3, 0]) or red[0][3, 0] == np.nanmax(want[3])
    np.testing.assert_allclose(col[0, :43], xf[:32, :43].sum(axis=0), rtol=1e-2, atol=1e-2)
