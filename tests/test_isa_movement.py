"""nisa.dma_transpose and nisa.nc_stream_shuffle (lang/isa_movement.py) on both backends, against numpy
models of NKI's documented semantics."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .both_backends import backend, nice  # noqa: F401 - autouse fixture


@pytest.mark.parametrize("shape,perm", [((48, 96), (1, 0)), ((4, 8, 16), (2, 1, 0)), ((3, 4, 5, 6), (3, 1, 2, 0))])
@pytest.mark.parametrize("from_sbuf", [False, True])
def test_dma_transpose_permutes_axes(shape, perm, from_sbuf):
    @nki.jit
    def k(x):
        out = nl.ndarray(tuple(x.shape[a] for a in perm), x.dtype, buffer=nl.shared_hbm)
        src = nl.load(x) if from_sbuf else x
        nl.store(out, value=nisa.dma_transpose(src))
        return out
    x = nice(1, shape)
    np.testing.assert_array_equal(k(x), np.transpose(x, perm))


def test_dma_transpose_of_a_view_with_dtype_and_mask():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, 16), nl.bfloat16, buffer=nl.shared_hbm)
        i, j = nl.mgrid[0:32, 0:16]
        t = nl.zeros((32, 16), nl.bfloat16, buffer=nl.sbuf)
        t[i, j] = nisa.dma_transpose(x[8:24, 0:32], dtype=nl.bfloat16, mask=(j < 10))
        nl.store(out, value=t)
        return out
    x = nice(2, (40, 40))
    got = k(x).astype(np.float32)
    want = x[8:24, 0:32].T.astype(nl.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got[:, :10], want[:, :10])
    np.testing.assert_array_equal(got[:, 10:], 0)


def test_dma_transpose_rejects_an_unsupported_permutation():
    @nki.jit
    def k(x):
        out = nl.ndarray((4, 8, 16), x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.dma_transpose(x, axes=(0, 2, 1)))
        return out
    with pytest.raises(errors.NkiLiteError) as e:
        k(nice(3, (4, 16, 8)))
    assert e.value.code == "NL-E901" and "axes" in str(e.value)


def _shuffle_model(src, dst, mask):
    out = dst.copy()
    for p in range(dst.shape[0]):
        m = mask[p % 32]
        if m != 255:
            out[p] = src[(p // 32) * 32 + m]
    return out


@pytest.mark.parametrize("n", [32, 64, 128])
def test_stream_shuffle_in_place_rotation_per_quadrant(n):
    mask = [(i + 3) % 32 for i in range(32)]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        nisa.nc_stream_shuffle(src=a, dst=a, shuffle_mask=mask)     # reads the values before the shuffle
        nl.store(out, value=a)
        return out
    x = nice(4, (n, 40))
    np.testing.assert_array_equal(k(x), _shuffle_model(x, x, mask))


def test_stream_shuffle_keep_entries_broadcast_and_psum():
    mask = [255 if i % 5 == 0 else (31 - i if i < 16 else 0) for i in range(32)]

    @nki.jit
    def k(x, y):
        out = nl.ndarray(y.shape, y.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        b = nl.ndarray(y.shape, y.dtype, buffer=nl.psum)
        b[...] = nl.load(y)
        nisa.nc_stream_shuffle(src=a, dst=b, shuffle_mask=mask)
        nl.store(out, value=b)
        return out
    x, y = nice(5, (64, 16)), nice(6, (64, 16))
    np.testing.assert_array_equal(k(x, y), _shuffle_model(x, y, mask))


def test_stream_shuffle_one_partition_to_a_quadrant():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src=nl.load(x), dst=b, shuffle_mask=[0] * 32)
        nl.store(out, value=b)
        return out
    x = nice(7, (1, 24))
    np.testing.assert_array_equal(k(x), np.repeat(x, 32, axis=0))


@pytest.mark.parametrize("bad,code", [("[0] * 31", "NL-E901"), ("[40] + [0] * 31", "NL-E901"),
                                      ("[1] * 32", "NL-E901"), ("[0.5] * 32", "NL-E904")])
def test_stream_shuffle_bad_masks(bad, code):
    ns = {"nl": nl, "nisa": nisa}
    src = ("def k(x):\n    out = nl.ndarray((32, 8), x.dtype, buffer=nl.shared_hbm)\n"
           "    b = nl.ndarray((32, 8), x.dtype, buffer=nl.sbuf)\n"
           f"    nisa.nc_stream_shuffle(src=nl.load(x), dst=b, shuffle_mask={bad})\n"
           "    nl.store(out, value=b)\n    return out\n")
    exec(compile(src, "<shuffle>", "exec"), ns)
    with pytest.raises(errors.NkiLiteError) as e:
        nki.jit(ns["k"])(nice(8, (1, 8)))
    assert e.value.code == code
