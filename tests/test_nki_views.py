"""Tensor views of the current `nki` dialect (lang/views.py, views_merge.py, flat_storage.py): `.ap` access
patterns and the NkiTensor view primitives, in kernels written here, against numpy, in both backends
(JIT == interpreter bit for bit); and the view rules' errors at the kernel's line."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

from . import markers
from .nki_tiles import hbm_of, sbuf_of
from .test_nki_dialect import both       # both backends, bit for bit; the JIT's result

HERE, line_of, _ = markers.marker_helpers(__file__)
RNG = np.random.default_rng(2026)
F32 = np.float32


def f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(F32)


def raises(kernel, args, name: str, marker: str):
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(*args, mode="interpret")
    e = ei.value
    assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
    return e


def copy(view):
    """The view copied into a fresh SBUF tile of its shape."""
    t = nl.ndarray(view.shape, dtype=view.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=view)
    return t


# ---------------------------------------------------------------- .ap on on-chip tensors

@nki.jit
def window_max(x, k):
    """[C, H, W] -> [C, H/k, W/k] maxima of k x k windows, through a 5-D access pattern of the SBUF tile."""
    c, h, w = x.shape
    t = sbuf_of(x)
    win = t.ap([[h * w, c], [k * w, h // k], [k, w // k], [w, k], [1, k]])
    return hbm_of(nl.max(win, axis=[3, 4]))


def test_ap_pooling_windows_of_an_sbuf_tile():
    x = f32(3, 8, 12)
    got = both(window_max, x, 4)
    np.testing.assert_array_equal(got, x.reshape(3, 2, 4, 3, 4).max(axis=(2, 4)))


@nki.jit
def ap_block(x):
    """Rows 4..11, columns 8..23 of a (16, 32) tile: the partition start comes from the offset."""
    t = sbuf_of(x)
    return hbm_of(copy(t.ap([[32, 8], [1, 16]], offset=4 * 32 + 8)))


def test_ap_offset_selects_partitions_and_columns():
    x = f32(16, 32)
    np.testing.assert_array_equal(both(ap_block, x), x[4:12, 8:24])


@nki.jit
def ap_loop_offset(x):
    out = nl.ndarray((4, 8, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = sbuf_of(x)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=out[i], src=t.ap([[64, 8], [1, 8]], offset=i * 8))
    return out


def test_ap_offset_may_use_a_loop_variable():
    x = f32(8, 64)
    want = np.stack([x[:, 8 * i:8 * i + 8] for i in range(4)])
    np.testing.assert_array_equal(both(ap_loop_offset, x), want)


# ---------------------------------------------------------------- .ap on HBM tensors

@nki.jit
def hbm_strided(x):
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[12, 4], [3, 4]], offset=1))      # rows 0..3, every third column from 1
    return hbm_of(t)


@nki.jit
def hbm_across_rows(x):
    t = nl.ndarray((4, 5), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[5, 4], [1, 5]]))                  # runs of 5 that cross the rows of 6
    return hbm_of(t)


@nki.jit
def hbm_write_through(x):
    out = nl.ndarray((8, 6), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    t = sbuf_of(x[0:4, 0:3])
    nisa.dma_copy(dst=out.ap([[6, 4], [2, 3]], offset=6 * 4 + 1), src=t)   # odd columns of rows 4..7
    return out


def test_ap_of_an_hbm_tensor_follows_its_dimensions():
    x = f32(8, 12)
    np.testing.assert_array_equal(both(hbm_strided, x), x[0:4, 1::3])


def test_ap_of_an_hbm_tensor_may_cross_rows():
    x = f32(4, 6)
    np.testing.assert_array_equal(both(hbm_across_rows, x), x.reshape(-1)[:20].reshape(4, 5))


def test_ap_as_a_dma_destination_writes_through():
    x = f32(8, 6)
    want = x.copy()
    want[4:8, 1::2] = x[0:4, 0:3]
    np.testing.assert_array_equal(both(hbm_write_through, x), want)


# ---------------------------------------------------------------- the view primitives

@nki.jit
def primitives(x):
    """x: (8, 4, 6) SBUF. Each output is one primitive's view copied out."""
    t = sbuf_of(x)
    a = copy(t.slice(2, 1, 6, 2))                       # (8, 4, 3)
    b = copy(t.select(1, 2))                            # (8, 6)
    c = copy(t.permute((0, 2, 1)))                      # (8, 6, 4)
    d = copy(t.flatten_dims(1, 2))                      # (8, 24)
    e = copy(t.select(1, 0).reshape_dim(1, (2, 3)))     # (8, 2, 3)
    f = copy(t.select(2, 5).expand_dim(2).broadcast(2, 3))   # (8, 4, 3)
    g = copy(t.slice(1, 1, 2).squeeze_dim(1))           # (8, 6)
    h = copy(t.rearrange(("p", "a", ("b", "c")), ("p", "c", ("a", "b")), {"b": 2}))   # (8, 3, 8)
    return tuple(hbm_of(v) for v in (a, b, c, d, e, f, g, h))


def test_view_primitives_of_an_sbuf_tile():
    x = f32(8, 4, 6)
    a, b, c, d, e, f, g, h = both(primitives, x)
    np.testing.assert_array_equal(a, x[:, :, 1:6:2])
    np.testing.assert_array_equal(b, x[:, 2, :])
    np.testing.assert_array_equal(c, x.transpose(0, 2, 1))
    np.testing.assert_array_equal(d, x.reshape(8, 24))
    np.testing.assert_array_equal(e, x[:, 0, :].reshape(8, 2, 3))
    np.testing.assert_array_equal(f, np.repeat(x[:, :, 5:6], 3, axis=2))
    np.testing.assert_array_equal(g, x[:, 1, :])
    np.testing.assert_array_equal(h, x.reshape(8, 4, 2, 3).transpose(0, 3, 1, 2).reshape(8, 3, 8))


@nki.jit
def merged_accumulator(x):
    """A [P, 2, 8] SBUF accumulator written by block, read out as [P, 16] (the matmul tutorial's layout)."""
    acc = nl.ndarray((x.shape[0], 2, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    t = sbuf_of(x)
    for j in nl.affine_range(2):
        nisa.tensor_tensor(dst=acc[:, j, :], data1=acc[:, j, :], data2=t[:, nl.ds(j * 8, 8)], op=nl.add)
    return hbm_of(copy(acc.reshape((x.shape[0], 16))))


def test_reshape_merging_free_dims_of_an_sbuf_tile():
    x = f32(16, 16)
    np.testing.assert_array_equal(both(merged_accumulator, x), x)
    k = merged_accumulator.trace(x)
    (buf,) = [b for b in k.buffers if b.name.startswith("acc")]
    assert buf.shape == (16, 16)        # stored [partitions, free size]: the merge is one affine index


@nki.jit
def hbm_views(x):
    """x: (4, 6, 8) HBM."""
    a = sbuf_of(x.select(0, 1).slice(1, 2, 8, 3))                 # (6, 2)
    b = sbuf_of(x.reshape((24, 8)).slice(0, 6, 14))               # (8, 8)
    c = sbuf_of(x[1].reshape((12, 4)))                            # a part of the tensor, reshaped
    d = sbuf_of(x[2].view(nl.int32))                              # same element size, a part
    return hbm_of(a), hbm_of(b), hbm_of(c), hbm_of(d)


def test_views_of_hbm_tensors():
    x = f32(4, 6, 8)
    a, b, c, d = both(hbm_views, x)
    np.testing.assert_array_equal(a, x[1][:, 2:8:3])
    np.testing.assert_array_equal(b, x.reshape(24, 8)[6:14])
    np.testing.assert_array_equal(c, x[1].reshape(12, 4))
    np.testing.assert_array_equal(d, x[2].view(np.int32))


@nki.jit
def patterns(x):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u = t.slice(dim=1, start=8, end=24)
    assert u.get_pattern() == t.ap(pattern=[[64, 128], [1, 16]], offset=8).get_pattern() == [[64, 128], [1, 16]]
    assert t.is_contiguous() and t.slice(1, 0, 32).is_contiguous()
    assert not t.slice(1, 0, 64, 2).is_contiguous()
    assert not t.reshape_dim(1, (8, 8)).permute((0, 2, 1)).is_contiguous()
    nisa.memset(dst=t, value=0.0)
    return hbm_of(t)


def test_get_pattern_and_contiguity():
    """The nki-aps deep dive's example: a slice and the hand-written .ap have the same pattern."""
    patterns.trace(f32(2, 2))


# ---------------------------------------------------------------- dynamic views (DMA)

@nki.jit
def gather_rows(x, rows):
    idx = sbuf_of(rows)                                       # (P, 1) int32
    t = nl.ndarray((rows.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.vector_select(0, idx))
    one = sbuf_of(rows[0:1, 0:1])
    s = nl.ndarray((x.shape[1],), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=s, src=x.select(0, one))
    return hbm_of(t), s


def test_vector_select_and_dynamic_select_gather_rows():
    x = f32(10, 8)
    rows = np.array([[3], [0], [9], [3]], np.int32)
    g, s = both(gather_rows, x, rows)
    np.testing.assert_array_equal(g, x[rows[:, 0]])
    np.testing.assert_array_equal(s, x[3])


@nki.jit
def scalar_offset_rows(x, start):
    """The deep dive's scalar dynamic access: rows start..start+3 of x, the start read at run time."""
    s = sbuf_of(start)                                        # (1, 1) int32: a row number
    t = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1], 4], [1, x.shape[1]]], offset=0, scalar_offset=s, indirect_dim=0))
    return hbm_of(t)


def test_ap_scalar_offset_reads_from_a_run_time_row():
    x = f32(12, 8)
    np.testing.assert_array_equal(both(scalar_offset_rows, x, np.array([[5]], np.int32)), x[5:9])


# ---------------------------------------------------------------- the rules, at the line

@nki.jit
def bad_partition_step(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.ap([[64, 8], [1, 32]])))  # MARK-PSTEP


@nki.jit
def bad_pattern(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.ap([[32, 16], [1]])))  # MARK-PAIR


@nki.jit
def ap_past_the_end(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.ap([[32, 16], [2, 17]])))  # MARK-AP-OOB


@nki.jit
def ap_loop_past_the_end(x):
    out = nl.ndarray((4, 16, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=out[i], src=x.ap([[32, 16], [1, 8]], offset=i * 8 + 1))  # MARK-LOOP-OOB
    return out


@nki.jit
def ap_past_the_partitions(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.ap([[32, 8], [1, 32]], offset=9 * 32)))  # MARK-AP-PART


@nki.jit
def slice_past_the_end(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.slice(1, 0, 33)))  # MARK-SLICE-OOB


@nki.jit
def permute_partition(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.permute((1, 0))))  # MARK-PERMUTE


@nki.jit
def squeeze_not_one(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.squeeze_dim(1)))  # MARK-SQUEEZE


@nki.jit
def flatten_permuted(x):
    t = sbuf_of(x)
    v = t.reshape_dim(1, (4, 8)).permute((0, 2, 1))
    return hbm_of(copy(v.flatten_dims(1, 2)))  # MARK-FLATTEN


@nki.jit
def view_on_chip(x):
    t = sbuf_of(x)
    return hbm_of(copy(t.view(nl.int32)))  # MARK-VIEW


@pytest.mark.parametrize("kernel,name,marker", [
    (bad_partition_step, "access_pattern", "MARK-PSTEP"),
    (bad_pattern, "access_pattern", "MARK-PAIR"),
    (ap_past_the_end, "out_of_bounds", "MARK-AP-OOB"),
    (ap_loop_past_the_end, "out_of_bounds", "MARK-LOOP-OOB"),
    (ap_past_the_partitions, "out_of_bounds", "MARK-AP-PART"),
    (slice_past_the_end, "out_of_bounds", "MARK-SLICE-OOB"),
    (permute_partition, "view", "MARK-PERMUTE"),
    (squeeze_not_one, "view", "MARK-SQUEEZE"),
    (flatten_permuted, "view_layout", "MARK-FLATTEN"),
    (view_on_chip, "unsupported", "MARK-VIEW"),
])
def test_view_rules_are_errors_at_the_line(kernel, name, marker):
    raises(kernel, (f32(16, 32),), name, marker)


# ---------------------------------------------------------------- Python lists of tiles

@nki.jit
def list_of_tiles(x):
    """Tiles appended in one affine loop and indexed by another loop's variable (the matmul tutorial's
    hoisted loads), plus a list of lists."""
    n = x.shape[1] // 8
    tiles = []
    for j in nl.affine_range(n):
        t = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(j * 8, 8)])
        tiles.append(t)
    rows = []
    for a in nl.affine_range(2):
        row = []
        for b in nl.affine_range(2):
            row.append(tiles[2 * a + b])
        rows.append(row)
    out = nl.ndarray((x.shape[0], 8 * n), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(n):
        nisa.dma_copy(dst=out[:, nl.ds(j * 8, 8)], src=tiles[n - 1 - j])
    for i in nl.sequential_range(3):              # a loop not involved with the lists stays a loop
        s = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=rows[1][0], data2=rows[0][1], op=nl.add)
        nisa.dma_copy(dst=out[:, nl.ds(0, 8)], src=s)
    return out


def test_lists_of_tiles_indexed_by_loop_variables():
    x = f32(4, 32)
    blocks = [x[:, 8 * j:8 * j + 8] for j in range(4)]
    want = np.concatenate(blocks[::-1], axis=1)
    want[:, 0:8] = blocks[2] + blocks[1]
    np.testing.assert_array_equal(both(list_of_tiles, x), want)
    k = list_of_tiles.trace(x)
    loops = [n for n in k.body if type(n).__name__ == "Loop"]
    assert [lp.trip for lp in loops] == [3]       # the list loops unrolled, the last one kept


@nki.jit
def range_of_loop_variable(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in range(i):      # a Python loop over a loop variable: the outer loop is traced unrolled
            nisa.dma_copy(dst=out, src=x)
    return out


def test_a_loop_variable_as_a_range_bound_unrolls_its_loop():
    x = f32(4, 4)
    np.testing.assert_array_equal(range_of_loop_variable(x), x)


@nki.jit
def double_buffered(x):
    """`i % 2` of a loop variable picks one of two buffers (the attention tutorial's double buffering)."""
    buf = nl.ndarray((x.shape[0], 2, x.shape[1] // 4), dtype=x.dtype, buffer=nl.sbuf)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        w = x.shape[1] // 4
        nisa.dma_copy(dst=buf[:, i % 2, :], src=x[:, nl.ds(i * w, w)])
        nisa.dma_copy(dst=out[:, nl.ds(i * w, w)], src=buf[:, i % 2, :])
    return out


def test_a_remainder_of_a_loop_variable_as_an_index_unrolls_the_loop():
    x = f32(4, 16)
    np.testing.assert_array_equal(both(double_buffered, x), x)
