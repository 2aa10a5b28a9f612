"""The current dialect's dst-first forms of legacy instructions (nki_lite/nki/isa_wrappers.py).

Each is run in a current-dialect kernel, in both backends (JIT == interpreter bit for bit), against a
numpy model or against the legacy instruction it stands for (whose own tests hold it to numpy), so a
wrapper that passes an operand to the wrong parameter, or drops dst's dtype, fails here."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_lite.isa as legacy
import nki_lite.language as lnl
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

from . import markers
from .test_nki_dialect import both, load, save  # one run-both-backends helper for the dialect's tests

HERE, line_of, _expect = markers.marker_helpers(__file__)
RNG = np.random.default_rng(1403)
F32 = np.float32


@nki.jit
def shuffle_and_transpose(a):
    t = load(a)
    s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(s, t, [(i + 1) % 32 for i in range(32)])
    tt = nl.ndarray((a.shape[1], a.shape[0]), dtype=t.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tt, t)
    return save(s), save(tt)


def test_stream_shuffle_and_dma_transpose_take_dst_first():
    a = RNG.standard_normal((32, 16)).astype(F32)
    s, tt = both(shuffle_and_transpose, a)
    np.testing.assert_array_equal(s, a[[(i + 1) % 32 for i in range(32)]])
    np.testing.assert_array_equal(tt, a.T)


@nki.jit
def exponential_kernel(a, m):
    t = load(a)
    mx = load(m)
    e = nl.ndarray(t.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    s = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(e, t, max_value=mx, reduce_res=s)
    e2 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(e2, t)
    return save(e), save(s), save(e2)


def test_exponential_is_exp_of_src_minus_max_rounded_once_with_its_row_sum():
    a = RNG.uniform(-3, 3, (16, 24)).astype(F32)
    m = a.max(axis=1, keepdims=True)
    e, s, e2 = both(exponential_kernel, a, m)
    exact = np.exp((a - m).astype(np.float64))
    # one rounding of the fp32 result to bf16 (nki_lite's exp is within 1 ulp of fp32)
    np.testing.assert_allclose(e.astype(F32), exact, rtol=2 ** -7)
    assert e.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(s[:, 0], exact.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(e2, np.exp(a.astype(np.float64)), rtol=1e-6)


@nki.jit
def against_legacy(x, b0, b1, pred):
    t = load(x)
    lo, hi, p = load(b0), load(b1), load(pred)
    r1 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(r1, t, np.greater_equal, np.less, lo, hi, range_start=4)
    r2 = legacy.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=lo, bound1=hi,
                             reduce_cmd=legacy.reduce_cmd.reset_reduce, reduce_op=np.maximum, range_start=4,
                             dtype=lnl.float32)
    s1 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(s1, p, t, -1.0)
    s2 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    legacy.select_reduce(dst=s2, predicate=p, on_true=t, on_false=-1.0)
    m1 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    top = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(top, t)
    nisa.nc_match_replace8(m1, t, top, 0.0)
    m2 = legacy.nc_match_replace8(data=t, vals=top, imm=0.0, dtype=lnl.float32)
    pr1 = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(pr1, np.add, t)
    pr2 = legacy.tensor_partition_reduce(np.add, t, dtype=lnl.float32)
    d1 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dropout(d1, t, 0.0)
    return (save(r1), save(r2), save(s1), save(s2), save(m1), save(m2), save(pr1), save(pr2), save(d1))


def test_select_reduce_match_partition_reduce_and_dropout_match_the_legacy_instructions():
    x = RNG.standard_normal((16, 40)).astype(F32)
    b0 = RNG.integers(0, 20, (16, 1)).astype(F32)
    b1 = b0 + RNG.integers(1, 20, (16, 1)).astype(F32)
    pred = (RNG.random((16, 40)) < 0.5).astype(np.uint8)
    r1, r2, s1, s2, m1, m2, pr1, pr2, d1 = both(against_legacy, x, b0, b1, pred)
    for a, b in ((r1, r2), (s1, s2), (m1, m2), (pr1, pr2)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(s1, np.where(pred != 0, x, -1.0))
    np.testing.assert_allclose(pr1, x.astype(np.float64).sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(d1, x)                                 # prob 0 keeps every element


@nki.jit
def exponential_accumulating(a):
    t = load(a)
    e = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(e, t, reduce_cmd=nisa.reduce_cmd.reduce)  # MARK-EXP-CMD
    return save(e)


@nki.jit
def transpose_oob(a):
    t = load(a)
    tt = nl.ndarray((a.shape[1], a.shape[0]), dtype=t.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(tt, t, oob_mode=nisa.oob_mode.skip)  # MARK-TR-OOB
    return save(tt)


@pytest.mark.parametrize("kernel, marker", [(exponential_accumulating, "MARK-EXP-CMD"),
                                            (transpose_oob, "MARK-TR-OOB")])
def test_values_not_built_are_nl_e916_at_the_line(kernel, marker):
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(np.ones((8, 8), F32), mode="interpret")
    assert ei.value.name == "nki_argument_not_built", str(ei.value)
    assert f"{HERE}:{line_of(marker)}:" in str(ei.value)


@nki.jit
def gather_kernel(src, index):
    s, ix = load(src), load(index)
    g1 = nl.ndarray((src.shape[0], 40, 2), dtype=src.dtype, buffer=nl.sbuf)
    nisa.local_gather(g1, s, ix, 2, 40)
    g2 = legacy.local_gather(s, ix, 2, 40)
    return save(g1), save(g2)


def test_local_gather_takes_dst_first():
    src = RNG.standard_normal((32, 16, 4)).astype(F32)
    index = RNG.integers(0, 16 * 4 - 1, size=(32, 3)).astype(np.uint16)
    g1, g2 = both(gather_kernel, src, index)
    np.testing.assert_array_equal(g1, g2)
    flat, ids = src.reshape(32, -1), index[:16].reshape(16, -1).T.reshape(-1)[:40].astype(np.int64)
    np.testing.assert_array_equal(g1[:16], flat[:16][:, ids[:, None] + np.arange(2)[None, :]])


@nki.jit
def dma_between_shapes(a):
    t = nl.ndarray((1, a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)                      # (n,) HBM -> (1, n) SBUF: same element count
    nisa.tensor_scalar(t, t, np.multiply, 2.0)
    out = nl.ndarray((a.shape[0] // 4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)                    # (1, n) SBUF -> (n/4, 4) HBM, row-major
    return out


@nki.jit
def dma_count_mismatch(a):
    t = nl.ndarray((1, a.shape[0] - 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)  # MARK-DMA-COUNT
    return save(t)


def test_dma_copy_takes_any_shapes_with_the_same_element_count():
    a = RNG.standard_normal(20).astype(F32)
    np.testing.assert_array_equal(both(dma_between_shapes, a), (a * 2).reshape(5, 4))
    with pytest.raises(errors.NkiLiteError) as ei:
        dma_count_mismatch(a, mode="interpret")
    assert ei.value.name == "shape_mismatch" and f"{HERE}:{line_of('MARK-DMA-COUNT')}:" in str(ei.value)


@nki.jit
def optional_operand(a, b=None):
    t = load(a)
    if b != None and not (b == None):  # noqa: E711  (the NKI Library's spelling of an optional-argument test)
        nisa.tensor_tensor(t, t, load(b), np.add)
    return save(t)


def test_a_tensor_compared_with_none_is_a_python_bool():
    a = RNG.standard_normal((8, 8)).astype(F32)
    np.testing.assert_array_equal(both(optional_operand, a), a)
    np.testing.assert_array_equal(both(optional_operand, a, a), a + a)


@nki.jit
def dma_view_unit_axes(a):
    t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[1])                   # (n,) view of a row -> (1, n): a size-1 axis apart
    out = nl.ndarray((2, a.shape[1], 1), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0], src=t)                 # (1, n) -> (n, 1) view
    nisa.dma_copy(dst=out[1], src=a[0])              # (n,) view -> (n, 1) view
    one = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=one, src=a[0, 0:1])            # (1,) view -> (1, 1): all axes of size 1
    last = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=last, src=one)
    return out, last


def test_dma_copy_between_views_that_differ_by_size_one_axes():
    a = RNG.standard_normal((2, 12)).astype(F32)
    out, last = both(dma_view_unit_axes, a)
    np.testing.assert_array_equal(out[:, :, 0], a[::-1])
    assert last[0, 0] == a[0, 0]
