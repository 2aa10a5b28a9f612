"""Kernels that return a whole HBM tensor under another shape: `return out.reshape(shape)`.

The NKI Library's kernels build an HBM result in the layout their DMAs want and return it reshaped
(`return max_values.reshape(config.out_shape), ...`); on the device a reshape of a whole HBM tensor is
the same memory under another shape. nki_lite returns the root buffer's array reshaped (or viewed as
another dtype of the same bytes) for the caller, without a copy (Kernel.output_views,
runtime/binding.py `as_returned`); `out=` arrays take the returned shape. A view of part of a tensor
stays NL-E901.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(2602)


def _through_sbuf(src, dst):
    t = nl.ndarray(dst.shape, dtype=dst.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    nisa.dma_copy(dst=dst, src=t)


@nki.jit
def flat_then_square(x):
    """x [16, 16] copied into a [1, 256] HBM result returned as [16, 16], plus the [1, 256] itself."""
    flat = nl.ndarray((1, 256), dtype=x.dtype, buffer=nl.shared_hbm)
    _through_sbuf(x.reshape((1, 256)), flat)
    doubled = nl.ndarray((2, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.reshape((2, 128)))
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=doubled, src=t)
    return flat.reshape((16, 16)), doubled


@nki.jit
def returns_one_reshape(x):
    out = nl.ndarray((1, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    _through_sbuf(x.reshape((1, 64)), out)
    return out.reshape((4, 4, 4))


@nki.jit
def returns_dtype_view(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    _through_sbuf(x, out)
    return out.view(nl.int32)


@nki.jit
def returns_a_slice(x):
    out = nl.ndarray((2, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    _through_sbuf(x, out)
    return out[0:1, :]


@pytest.mark.parametrize("mode", MODES)
def test_reshaped_result_with_a_whole_one(mode):
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    square, doubled = flat_then_square(x, mode=mode)
    assert square.shape == (16, 16) and doubled.shape == (2, 128)
    np.testing.assert_array_equal(square, x)
    np.testing.assert_array_equal(doubled, 2 * x.reshape(2, 128))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("mode", MODES)
def test_single_reshaped_result_any_rank(mode, dtype):
    x = RNG.standard_normal((8, 8)).astype(dtype)
    first = returns_one_reshape(x, mode=mode)
    again = returns_one_reshape(x, mode=mode)       # a cached call returns the same shape
    for r in (first, again):
        assert r.shape == (4, 4, 4) and r.dtype == x.dtype
        np.testing.assert_array_equal(r, x.reshape(4, 4, 4))


@pytest.mark.parametrize("mode", MODES)
def test_dtype_view_result(mode):
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    r = returns_dtype_view(x, mode=mode)
    assert r.dtype == np.int32 and r.shape == x.shape
    np.testing.assert_array_equal(r, x.view(np.int32))


@pytest.mark.parametrize("mode", MODES)
def test_out_array_takes_the_returned_shape(mode):
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    out = np.empty((4, 4, 4), np.float32)
    r = returns_one_reshape(x, out=out, mode=mode)
    assert r is out or np.shares_memory(r, out)
    np.testing.assert_array_equal(out, x.reshape(4, 4, 4))


@pytest.mark.parametrize("mode", MODES)
def test_part_of_a_tensor_is_still_refused(mode):
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    with pytest.raises(errors.NkiLiteError, match="NL-E901.*returns a view of"):
        returns_a_slice(x, mode=mode)
