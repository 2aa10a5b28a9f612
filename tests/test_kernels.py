"""Kernels in the tutorials' style, run in the interpreter and compared with numpy."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nki_lite.numerics import fp32math
from nki_lite.testing import assert_close

from .kernels.tutorial_style import (nl_matmul, rmsnorm, rmsnorm_ref, row_softmax, row_softmax_ref, spmd_add,
                                     tiled_matmul)

F32 = np.float32


def test_spmd_add_2x2_grid_is_exact():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 1024)).astype(F32)
    b = rng.standard_normal((256, 1024)).astype(F32)
    out = spmd_add[2, 2](a, b)
    assert out.dtype == F32 and np.array_equal(out, a + b)


def test_spmd_add_3x1_grid_covers_only_its_programs():
    a = np.ones((384, 512), F32)
    out = spmd_add[3, 1](a, a)
    assert np.array_equal(out, 2 * a)
    # a grid that covers half the columns leaves the rest uninitialised (NaN), like the hardware's garbage
    half = spmd_add[3, 1](np.ones((384, 1024), F32), np.ones((384, 1024), F32))
    assert np.all(half[:, :512] == 2) and np.all(np.isnan(half[:, 512:]))


def in_order_matmul(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """PSUM semantics: start from 0 (nl.zeros), add each k's exact product in k order, fp32 rounding."""
    a = lhsT.astype(F32)
    b = rhs.astype(F32)
    acc = np.zeros((a.shape[1], b.shape[1]), F32)
    for k in range(a.shape[0]):
        acc = (acc + a[k][:, None] * b[k][None, :]).astype(F32)
    return acc


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, np.float16])
def test_tiled_matmul_multi_step_psum_accumulation_bitwise(dtype):
    rng = np.random.default_rng(2)
    K, M, N = 384, 256, 1024           # 3 k-tiles accumulate in PSUM; 2 x 2 output tiles
    lhsT = rng.standard_normal((K, M)).astype(dtype)
    rhs = rng.standard_normal((K, N)).astype(dtype)
    out = tiled_matmul(lhsT, rhs)
    ref = in_order_matmul(lhsT, rhs)
    assert out.dtype == F32
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))
    exact = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert_close(out, exact, rtol=1e-5, atol=1e-4)


def test_nl_matmul_with_transpose_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 256)).astype(F32)
    y = rng.standard_normal((256, 512)).astype(F32)
    assert_close(nl_matmul(x, y), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 700), seed=st.integers(0, 2 ** 16))
def test_row_softmax_ragged_rows(rows, cols, seed):
    x = (np.random.default_rng(seed).standard_normal((rows, cols)) * 4).astype(F32)
    out = row_softmax(x)
    assert out.shape == (rows, cols) and not np.isnan(out).any()
    assert_close(out, row_softmax_ref(x), rtol=2e-5, atol=1e-7)


def test_row_softmax_bitwise_against_the_contract():
    x = np.random.default_rng(4).standard_normal((130, 33)).astype(F32)
    out = row_softmax(x)
    from nki_lite.numerics.alu import reduce_fp32
    m = reduce_fp32("maximum", x)
    e = fp32math.exp((x - m[:, None]).astype(F32))
    s = reduce_fp32("add", e)
    ref = (e * fp32math.reciprocal(s)[:, None]).astype(F32)
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 640), seed=st.integers(0, 2 ** 16))
def test_rmsnorm_masked_ragged_rows(rows, cols, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, cols)).astype(F32)
    g = rng.standard_normal(cols).astype(F32)
    out = rmsnorm(a, g)
    assert out.shape == (rows, cols) and not np.isnan(out).any()
    assert_close(out, rmsnorm_ref(a, g), rtol=5e-5, atol=1e-6)


def test_rmsnorm_bf16_output_dtype():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((200, 256)).astype(ml_dtypes.bfloat16)
    g = rng.standard_normal(256).astype(ml_dtypes.bfloat16)
    out = rmsnorm(a, g)
    assert out.dtype == ml_dtypes.bfloat16
    assert_close(out, rmsnorm_ref(a, g), dtype=ml_dtypes.bfloat16)
