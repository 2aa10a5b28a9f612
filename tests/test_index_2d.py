"""Integer indexing keeps on-chip tiles at least 2-D (lang/tile.py _kept_points; NKI language guide, "The
partition dimension is special"): an integer on the partition axis keeps it at size 1, integers on free axes
drop them unless the result would have fewer than 2 dimensions (then the last one stays at size 1); HBM
tensors follow numpy. Kernels written here, in both dialects, against numpy, in both backends."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .test_nki_dialect import both

RNG = np.random.default_rng(2612)
F32 = np.float32


def f32(*shape):
    return RNG.uniform(-2, 2, shape).astype(F32)


# ---------------------------------------------------------------- shapes (legacy dialect)

@nki.jit
def shapes_of_views(a):
    """The shapes of integer-indexed views, asserted while tracing; the kernel itself copies a through."""
    t = nl.ndarray((8, 6, 4), dtype=a.dtype, buffer=nl.sbuf)
    assert t[0, 0, 3].shape == (1, 1)          # partition kept, last free axis kept
    assert t[:, 0].shape == (8, 4)             # a free axis drops while the result stays 2-D
    assert t[:, 0, 3].shape == (8, 1)          # the last free axis stays to keep 2-D
    assert t[0].shape == (1, 6, 4)             # the partition axis never drops
    assert t[0, 2].shape == (1, 4)
    assert t[:, 2][:, 1].shape == (8, 1)       # composes: a column of a row-dropped view
    p = nl.ndarray((8, 5), dtype=nl.float32, buffer=nl.psum)
    assert p[:, 3].shape == (8, 1) and p[2, 3].shape == (1, 1) and p[2].shape == (1, 5)
    blocks = nl.ndarray((3, nl.par_dim(8), 2), dtype=a.dtype, buffer=nl.sbuf)
    assert blocks[1].shape == (8, 2)           # a leading block axis (before par_dim) drops like a free axis
    assert blocks[1, :, 0].shape == (8, 1)
    assert blocks[1, 0, 0].shape == (1, 1)
    h = nl.ndarray((4, 8, 2), dtype=a.dtype, buffer=nl.shared_hbm)
    assert h[0].shape == (8, 2) and h[0, :, 1].shape == (8,) and h[0, 0, 1].shape == ()   # HBM: numpy
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def test_integer_indexing_shapes_on_chip_and_hbm():
    a = f32(8, 4)
    np.testing.assert_array_equal(both(shapes_of_views, a), a)


# ---------------------------------------------------------------- the flash-attention running-max pattern

def _update_running_max(m_col, scores):
    """A helper given one [P, 1] column of a running-max buffer: it indexes the column with [:, 0], as an
    attention kernel's inner step does with its m/l buffers."""
    prev = nl.copy(m_col[:, 0])
    m_col[:, 0] = nl.maximum(prev, nl.max(scores, axis=1, keepdims=True))
    return nisa.activation(nl.exp, scores, bias=m_col[:, 0], scale=-1.0)


@nki.jit
def running_max(x):
    """x [T, P, F]: for each step i, buf[:, i + 1] is the running max of rows over steps 0..i and out[i]
    exp(max - x[i]) (a column passed to a helper that indexes it [:, 0])."""
    T, P, F = x.shape
    buf = nl.full((P, T + 1), fill_value=-1e30, dtype=nl.float32, buffer=nl.sbuf)
    out = nl.ndarray((T, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    m = nl.ndarray((P, T + 1), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(T):
        buf[:, i + 1] = nl.copy(buf[:, i])
        e = _update_running_max(buf[:, i + 1], nl.load(x[i]))
        nl.store(out[i], e)
    nl.store(m, buf)
    return out, m


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_a_column_passed_to_a_helper_that_indexes_it(mode):
    x = f32(3, 8, 16)
    out, m = running_max(x, mode=mode)
    want_m = np.maximum.accumulate(x.max(axis=2), axis=0)          # [T, P]
    np.testing.assert_array_equal(m[:, 1:], want_m.T)
    np.testing.assert_allclose(out, np.exp(want_m[:, :, None] - x), rtol=2e-6)    # exp(scale * x + bias)


# ---------------------------------------------------------------- 3-D tiles, PSUM, stores across size-1 axes

@nki.jit
def slices_of_3d(x):
    """x [P, A, B] in SBUF: t[:, j, :] rows, t[:, j, k] columns, t[p] (a [1, A, B] slab) and t[p, j] (a
    [1, B] row), stored into HBM views of the numpy shapes."""
    P, A, B = x.shape
    t = nl.load(x)
    mid = nl.ndarray((P, B), dtype=x.dtype, buffer=nl.shared_hbm)
    col = nl.ndarray((P,), dtype=x.dtype, buffer=nl.shared_hbm)
    slab = nl.ndarray((A, B), dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.ndarray((B,), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(mid, nl.copy(t[:, 1, :]))
    nl.store(col, nl.copy(t[:, 2, B - 1]))            # [P, 1] tile into a [P] HBM tensor
    nl.store(slab, t[P - 1])                          # [1, A, B] into [A, B]
    nl.store(row, nl.copy(t[3, 0]))                   # [1, B] into [B]
    return mid, col, slab, row


def test_3d_tile_integer_indexing_values():
    x = f32(8, 3, 5)
    mid, col, slab, row = both(slices_of_3d, x)
    np.testing.assert_array_equal(mid, x[:, 1, :])
    np.testing.assert_array_equal(col, x[:, 2, 4])
    np.testing.assert_array_equal(slab, x[7])
    np.testing.assert_array_equal(row, x[3, 0])


@nki.jit
def psum_columns(a, b):
    """A matmul into PSUM; each PSUM column p[:, j] ([M, 1]) is added to the whole SBUF product row by row
    (a [M, 1] operand broadcasting along the free axis) and p[0] ([1, N]) is stored into an [N] view."""
    K, M = a.shape
    _, N = b.shape
    p = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    p[...] = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
    prod = nl.copy(p)
    out = nl.ndarray((N, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    first = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(N):
        assert p[:, j].shape == (M, 1)
        nl.store(out[j], nl.add(prod, p[:, j]))
    nl.store(first, nl.copy(p[0]))
    return out, first


def test_psum_columns_broadcast_and_rows_store():
    a = RNG.integers(-4, 5, (16, 8)).astype(F32)       # small integers: the fp32 matmul is exact
    b = RNG.integers(-4, 5, (16, 6)).astype(F32)
    out, first = both(psum_columns, a, b)
    p = a.T @ b
    np.testing.assert_array_equal(out, np.stack([p + p[:, j:j + 1] for j in range(6)]))
    np.testing.assert_array_equal(first, p[0])


@nki.jit
def row_mismatch(a):
    t = nl.load(a)
    out = nl.ndarray((a.shape[1], 2), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(t[0]))                      # a [1, F] row into an [F, 2] view
    return out


def test_size_one_axes_pair_only_the_same_elements():
    """Shapes that differ by size-1 axes pair their elements only when the other axes agree in order:
    a [1, F] row does not store into an [F, 2] view (NL-E103)."""
    with pytest.raises(errors.NkiLiteError) as ei:
        row_mismatch(f32(8, 3), mode="interpret")
    assert ei.value.name == "shape_mismatch" and "(1, 3)" in str(ei.value), str(ei.value)


# ---------------------------------------------------------------- the current dialect

def test_current_dialect_views_stay_2d():
    import nki_lite.nki as cnki
    import nki_lite.nki.isa as cisa
    import nki_lite.nki.language as cnl
    from .nki_tiles import hbm_of, sbuf_of

    @cnki.jit
    def columns(x):
        t = sbuf_of(x)                                # [P, A, B]
        assert t[0, 0, 2].shape == (1, 1) and t[:, 0].shape == t.shape[::2] and t[:, 0, 2].shape == (8, 1)
        assert t[0].shape == (1,) + tuple(t.shape[1:])
        col = cnl.ndarray((8, 1), dtype=x.dtype, buffer=cnl.sbuf)
        cisa.tensor_copy(dst=col, src=t[:, 1, 3])
        row = cnl.ndarray((1, 4), dtype=x.dtype, buffer=cnl.sbuf)
        cisa.tensor_copy(dst=row, src=t[5, 2])
        return hbm_of(col), hbm_of(row)

    x = f32(8, 3, 4)
    col, row = both(columns, x)
    np.testing.assert_array_equal(col, x[:, 1, 3:4])
    np.testing.assert_array_equal(row, x[5, 2][None, :])
