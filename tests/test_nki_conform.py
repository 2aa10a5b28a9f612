"""Current-dialect elementwise operands with equal element counts but different free shapes.

The reference's rule for tensor_tensor and its kin is "the same partition axis size and the same number of
elements per partition"; elements pair in each operand's row-major order (nki/conform.py). Also here: the
current dialect's `nl.shared_identity_matrix` is an SBUF tensor (usable straight as a matmul operand).
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors
from nki_lite.nki.conform import _refinement

from .nki_tiles import hbm_of, sbuf_of

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(160)


@nki.jit
def minus_broadcast_max(x, m):
    """x [P, G*W] minus m [P, W] broadcast over G as a [P, G, W] view."""
    xs, ms = sbuf_of(x), sbuf_of(m)
    groups = x.shape[1] // m.shape[1]
    nisa.tensor_tensor(xs, xs, ms.expand_dim(1).broadcast(1, groups), op=nl.subtract)
    return hbm_of(xs)


@nki.jit
def column_plus_row_view(x, b):
    """x [P, N] seen as [P, N, 1] plus b [P, N] seen as [P, 1, N]: N pairs per partition, not N*N."""
    xs, bs = sbuf_of(x), sbuf_of(b)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out.expand_dim(2), data1=xs.expand_dim(2), data2=bs.expand_dim(1), op=nl.add)
    return hbm_of(out)


@nki.jit
def exp_into_split_dst(x):
    """activation and tensor_copy from [P, 4*W] into a [P, 4, W] view of the destination."""
    xs = sbuf_of(x)
    e = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=e.reshape_dim(1, [4, x.shape[1] // 4]), op=nl.exp, data=xs)
    nisa.tensor_copy(dst=c.reshape_dim(1, [4, x.shape[1] // 4]), src=e)
    return hbm_of(c)


@nki.jit
def transposed_counts(x, y):
    xs, ys = sbuf_of(x), sbuf_of(y)
    out = nl.ndarray((2, 24), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out.reshape_dim(1, [6, 4]), data1=xs.reshape_dim(1, [6, 4]),
                       data2=ys.reshape_dim(1, [4, 6]), op=nl.add)
    return hbm_of(out)


@nki.jit
def transpose_by_identity(x):
    xs = sbuf_of(x)
    ident = nl.shared_identity_matrix(x.shape[0], dtype=nl.float32)
    p = nl.ndarray(x.shape[::-1], dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=xs, moving=ident, is_transpose=True)
    r = nl.ndarray(p.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    into = nl.ndarray((x.shape[0], x.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
    nl.shared_identity_matrix(x.shape[0], dtype=nl.float32, dst=into)
    return hbm_of(r), hbm_of(into)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("groups,width", [(8, 20), (2, 64), (5, 1)])
def test_broadcast_view_pairs_row_major(mode, groups, width):
    x = RNG.standard_normal((128, groups * width)).astype(np.float32)
    m = RNG.standard_normal((128, width)).astype(np.float32)
    want = (x.reshape(128, groups, width) - m[:, None, :]).reshape(x.shape)
    np.testing.assert_array_equal(minus_broadcast_max(x, m, mode=mode), want)


@pytest.mark.parametrize("mode", MODES)
def test_equal_counts_pair_elements_not_broadcast(mode):
    x = RNG.standard_normal((16, 48)).astype(np.float32)
    b = RNG.standard_normal((16, 48)).astype(np.float32)
    np.testing.assert_array_equal(column_plus_row_view(x, b, mode=mode), x + b)


@pytest.mark.parametrize("mode", MODES)
def test_destination_of_another_shape(mode):
    x = RNG.uniform(-2, 2, (8, 40)).astype(np.float32)
    got = exp_into_split_dst(x, mode=mode)
    ref = exp_into_split_dst(x, mode="interpret")
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)


def test_no_common_refinement_is_still_a_shape_error():
    x = RNG.standard_normal((2, 24)).astype(np.float32)
    with pytest.raises(errors.NkiLiteError, match="NL-E103"):
        transposed_counts(x, x, mode="interpret")


@pytest.mark.parametrize("shapes,want", [
    ([[160], [8, 20]], [8, 20]),
    ([[8, 20], [160]], [8, 20]),
    ([[4, 6], [24]], [4, 6]),
    ([[2, 12], [4, 6]], [2, 2, 6]),
    ([[6, 4], [4, 6]], None),
    ([[512], [512]], [512]),
])
def test_refinement(shapes, want):
    assert _refinement(shapes) == want


@pytest.mark.parametrize("mode", MODES)
def test_identity_matrix_is_in_sbuf(mode):
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    t, ident = transpose_by_identity(x, mode=mode)
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(ident, np.eye(64, dtype=np.float32))
