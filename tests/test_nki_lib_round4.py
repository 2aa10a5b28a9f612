"""NKI Library patterns of issue #14, round 4, re-created in small kernels of the current dialect.

- The core id of a per-core (LNC=2) trace and the program id of a one-program launch are Python ints, so
  shard sizes computed from them are ints wherever NKI wants a trace-time int (`.ap` pattern counts, nl.ds).
- `.ap(scalar_offset=...)` with a trace-time value (an int or a loop variable) is that offset along the base
  tensor's indirect_dim, known statically.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

from .nki_tiles import hbm_of, sbuf_of

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(1404)


@nki.jit
def uneven_row_shards(a):
    """Core c copies its share of a's rows, the last core the remainder: shard sizes from the core id."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cores, me = nl.num_programs(), nl.program_id(0)
    per_core = a.shape[0] // cores
    start = me * per_core
    rows = a.shape[0] - start if me == cores - 1 else per_core
    t = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    # the shard as an explicit access pattern ([step, num] counts are the computed ints) ...
    nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], rows], [1, a.shape[1]]], offset=start * a.shape[1]))
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(me + 2))
    # ... and written back through an nl.ds of the computed size
    nisa.dma_copy(dst=out[nl.ds(start, rows), :], src=t)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_shard_sizes_from_the_core_id_are_ints(lnc):
    a = RNG.standard_normal((7, 5)).astype(np.float32)
    got = np.asarray(uneven_row_shards[lnc](a))
    per = 7 // lnc
    want = a.copy()
    for c in range(lnc):
        stop = 7 if c == lnc - 1 else (c + 1) * per
        want[c * per:stop] = a[c * per:stop] * np.float32(c + 2)
    np.testing.assert_array_equal(got, want)


@nki.jit
def rows_by_scalar_offset(a, picks: int):
    """Row `b` of a for b in range(picks), each through `.ap(scalar_offset=b, indirect_dim=0)`."""
    out = nl.ndarray((picks, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(picks):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], 1], [1, a.shape[1]]], offset=0, scalar_offset=b,
                                      indirect_dim=0))
        nisa.dma_copy(dst=out[b], src=t)
    return out


@nki.jit
def column_by_int_scalar_offset(a):
    """Column 3 of a, through `.ap(scalar_offset=3, indirect_dim=1)` (the base tensor's dim 1)."""
    t = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], a.shape[0]], [1, 1]], scalar_offset=3, indirect_dim=1))
    return hbm_of(t)


@pytest.mark.parametrize("mode", MODES)
def test_scalar_offset_of_a_loop_variable(mode):
    a = RNG.standard_normal((6, 9)).astype(np.float32)
    np.testing.assert_array_equal(rows_by_scalar_offset(a, 4, mode=mode), a[:4])
    np.testing.assert_array_equal(column_by_int_scalar_offset(a, mode=mode), a[:, 3:4])


@nki.jit
def one_element_copies(a):
    """dma_copy between a 0-d element view and a [1, 1] view, both ways (the library's sink load)."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(t, 0.0)
    for b in nl.affine_range(2):
        nisa.dma_copy(dst=t[b, 1], src=a[b:b + 1, 2:3])
    nisa.dma_copy(dst=t[2:3, 0:1], src=a[3, 0])
    return hbm_of(t)


@pytest.mark.parametrize("mode", MODES)
def test_dma_copy_of_one_element_between_shapes(mode):
    a = RNG.standard_normal((4, 3)).astype(np.float32)
    want = np.zeros_like(a)
    want[0, 1], want[1, 1], want[2, 0] = a[0, 2], a[1, 2], a[3, 0]
    np.testing.assert_array_equal(one_element_copies(a, mode=mode), want)


@nki.jit
def minus_psum_mean_broadcast(x, w):
    """x [P, N*H1] minus a PSUM matmul result [P, N] broadcast over H1: the read counts the N distinct PSUM
    elements per partition, not N*H1 (library layernorm_tkg: 320 x 24 = 7680 > 4096)."""
    xs, ws = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf), nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    nisa.dma_copy(dst=ws, src=w)
    ones = nl.ndarray((w.shape[0], x.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(ones, 1.0)
    mean = nl.ndarray((x.shape[0], w.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=mean, stationary=ones, moving=ws)
    h1 = x.shape[1] // w.shape[1]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(out.reshape_dim(1, [w.shape[1], h1]), xs.reshape_dim(1, [w.shape[1], h1]),
                       mean.expand_dim(2).broadcast(2, h1), nl.subtract)
    return hbm_of(out)


@pytest.mark.parametrize("mode", MODES)
def test_psum_read_limit_counts_distinct_elements(mode):
    x = RNG.standard_normal((4, 320 * 24)).astype(np.float32)
    w = RNG.standard_normal((2, 320)).astype(np.float32)
    col = (w[0] + w[1]).astype(np.float32)
    want = x - np.repeat(col, 24)[None, :]
    np.testing.assert_allclose(minus_psum_mean_broadcast(x, w, mode=mode), want, rtol=1e-6, atol=1e-5)


@nki.jit
def wide_sbuf_read(x, n: int, broadcast: bool):
    """A Vector Engine read of n elements per partition from SBUF, as n distinct ones or one broadcast."""
    if broadcast:
        t = nl.ndarray((x.shape[0], 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        src = t.broadcast(1, n)
    else:
        t = nl.ndarray((x.shape[0], n), dtype=nl.bfloat16, buffer=nl.sbuf)
        src = t
    nisa.memset(t, 1.0)
    s = nl.ndarray((x.shape[0], n), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=src, op0=nl.multiply, operand0=2.0)
    return hbm_of(s)


def test_read_limit_still_holds_for_distinct_elements():
    """The 64K SBUF read limit: 65537 distinct elements are NL-E102; one element broadcast 65537 times is not."""
    x = np.zeros((1, 1), np.float32)
    with pytest.raises(errors.NkiLiteError, match="NL-E102"):
        wide_sbuf_read(x, 65537, False, mode="interpret")
    assert (np.asarray(wide_sbuf_read(x, 65537, True, mode="interpret"), np.float32) == 2.0).all()


@nki.jit
def abs_max_rows(x):
    """Row abs-max through tensor_scalar_reduce(op0=nl.abs, reduce_op=nl.maximum) (library rmsnorm_quant)."""
    xs = sbuf_of(x)
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    m = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=a, data=xs, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum, reduce_res=m)
    both = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=both[:, 0:x.shape[1]], src=a)
    nisa.tensor_copy(dst=both[:, x.shape[1]:x.shape[1] + 1], src=m)
    return hbm_of(both)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_abs_as_an_alu_op(mode, dtype):
    x = (RNG.standard_normal((8, 37)) * 50).astype(dtype)
    x[0, 0] = -0.0 if dtype == np.float32 else -7
    got = np.asarray(abs_max_rows(x, mode=mode))
    want = np.concatenate([np.abs(x), np.abs(x).max(axis=1, keepdims=True)], axis=1)
    np.testing.assert_array_equal(got, want)
    if dtype == np.float32:
        assert not np.signbit(got[0, 0])


@nki.jit
def transpose_into_bf16_psum(x, is_transpose: bool):
    """x [K, M] bf16 transposed on the Tensor Engine (identity moving) into a bf16 PSUM tile [M, K]."""
    xs = sbuf_of(x)
    ident = nl.shared_identity_matrix(x.shape[0], dtype=x.dtype)
    p = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=xs, moving=ident, is_transpose=is_transpose)
    s = nl.ndarray(p.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p)
    return hbm_of(s)


@pytest.mark.parametrize("mode", MODES)
def test_transpose_mode_writes_the_input_dtype_to_psum(mode):
    import ml_dtypes
    x = RNG.standard_normal((16, 8)).astype(ml_dtypes.bfloat16)
    got = transpose_into_bf16_psum(x, True, mode=mode, target="trn2")
    np.testing.assert_array_equal(np.asarray(got), x.T)


@pytest.mark.parametrize("is_transpose, target", [(False, "trn2"), (True, "trn1")])
def test_bf16_psum_stays_an_error_outside_transpose_mode(is_transpose, target):
    import ml_dtypes
    x = RNG.standard_normal((16, 8)).astype(ml_dtypes.bfloat16)
    with pytest.raises(errors.NkiLiteError, match="NL-E201"):
        transpose_into_bf16_psum(x, is_transpose, mode="interpret", target=target)


@nki.jit
def core0_stores_the_sum(a, store_on_core0: bool):
    """Both cores exchange their halves with sendrecv; only core 0 stores the sum (library indexed_flatten)."""
    rows = a.shape[0] // 2
    me = nl.program_id(0)
    mine = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[me * rows:(me + 1) * rows, :])
    theirs = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    total = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    out = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if me == 0 and store_on_core0:
        nisa.dma_copy(dst=out, src=total)
    return out


def test_an_output_written_by_one_core_only():
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(core0_stores_the_sum[2](a, True)), a[:4] + a[4:])


def test_an_output_no_core_writes_is_still_nl_e702():
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    with pytest.raises(errors.NkiLiteError, match="NL-E702"):
        core0_stores_the_sum[2](a, False)


@nki.jit
def plus_constant_file(x, path: str):
    """x plus the contents of a .npy file read by nl.shared_constant(path) (library rotational topk)."""
    c = nl.shared_constant(path)
    cs = sbuf_of(c)
    xs = sbuf_of(x)
    nisa.tensor_tensor(dst=xs, data1=xs, data2=cs, op=nl.add)
    return hbm_of(xs)


@pytest.mark.parametrize("mode", MODES)
def test_shared_constant_from_an_npy_file(mode, tmp_path):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    c = RNG.standard_normal((4, 6)).astype(np.float32)
    np.save(tmp_path / "c.npy", c)
    np.testing.assert_array_equal(plus_constant_file(x, str(tmp_path / "c.npy"), mode=mode), x + c)


def test_shared_constant_of_a_missing_file_names_it(tmp_path):
    with pytest.raises(errors.NkiLiteError, match="cannot read the .npy file"):
        plus_constant_file(np.zeros((4, 6), np.float32), str(tmp_path / "absent.npy"), mode="interpret")


@nki.jit
def gather_per_partition(data, idx):
    """nisa.nc_n_gather from a [P, 3, 8] tile (free dims flattened) at uint32 indices [P, 2, 5]."""
    ds = sbuf_of(data)
    ix = sbuf_of(idx)
    out = nl.ndarray(idx.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=out, data=ds, indices=ix)
    return hbm_of(out)


@pytest.mark.parametrize("mode", MODES)
def test_nc_n_gather_per_partition(mode):
    data = RNG.standard_normal((4, 3, 8)).astype(np.float32)
    idx = RNG.integers(0, 24, (4, 2, 5)).astype(np.uint32)
    want = np.stack([data[p].reshape(-1)[idx[p].reshape(-1)].reshape(2, 5) for p in range(4)])
    np.testing.assert_array_equal(gather_per_partition(data, idx, mode=mode), want)


def test_nc_n_gather_out_of_range_index_is_an_error():
    data = np.zeros((4, 3, 8), np.float32)
    idx = np.full((4, 2, 5), 24, np.uint32)
    with pytest.raises(errors.NkiLiteError, match="NL-E503"):
        gather_per_partition(data, idx, mode="interpret")


@nki.jit
def asserts_its_view(dummy, cols: int):
    """A trace-time check on a view's shape (the library's TensorView tests), then a store."""
    t = nl.ndarray((8, 32), dtype=nl.float32, buffer=nl.sbuf)
    v = t.slice(1, 0, cols)
    assert v.shape == (8, 16), f"slice gave {v.shape}"
    nisa.memset(v, 0.0)
    nisa.dma_copy(dst=dummy, src=v)
    return dummy


def test_trace_only_frontend_traces_and_verifies():
    from nki_lite.nki.frontend import ParserFrontend
    dummy = np.zeros((8, 16), np.float32)
    one = ParserFrontend().compile(asserts_its_view, inputs={"dummy": dummy, "cols": 16}, target="trn2", lnc=1)
    assert len(one.kernels) == 1 and one.module is None
    assert "memset" in str(one.kernels[0])
    two = ParserFrontend().compile(uneven_row_shards, inputs={"a": np.zeros((7, 5), np.float32)}, target="trn2",
                                   lnc=2)
    assert len(two.kernels) == 2
    with pytest.raises(AssertionError, match="slice gave"):
        ParserFrontend().compile(asserts_its_view, inputs={"dummy": dummy, "cols": 12}, target="trn2", lnc=1)


@nki.jit
def doubled_row_shards(a):
    """Each core doubles its shard of rows, row by row; with one row on two cores core 0's shard is
    nl.ds(0, 0), an empty slice whose loop runs 0 times (library cross_entropy_forward)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cores, me = nl.num_programs(), nl.program_id(0)
    per = a.shape[0] // cores
    rows = a.shape[0] - me * per if me == cores - 1 else per
    src, dst = a[nl.ds(me * per, rows)], out[nl.ds(me * per, rows)]
    for b in nl.affine_range(rows):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src[b:b + 1, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=dst[b:b + 1, :], src=t)
    return out


@pytest.mark.parametrize("rows", [1, 3])
def test_an_empty_shard_of_nl_ds_size_zero(rows):
    a = RNG.standard_normal((rows, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(doubled_row_shards[2](a)), a * np.float32(2))


def test_nl_ds_of_a_negative_size_is_an_error():
    @nki.jit
    def negative(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[nl.ds(0, -1)], src=a[nl.ds(0, -1)])
        return out
    with pytest.raises(errors.NkiLiteError, match="NL-E807"):
        negative(np.zeros((2, 2), np.float32), mode="interpret")


def test_per_core_programs_in_jit_mode_say_they_run_in_the_interpreter():
    from nki_lite.runtime import notices
    from nki_lite.runtime.notices import NkiLitePerformanceWarning
    notices._WARNED.clear()
    a = RNG.standard_normal((7, 5)).astype(np.float32)
    with pytest.warns(NkiLitePerformanceWarning, match="per-core programs in the interpreter"):
        got = uneven_row_shards[2](a, mode="jit")
    np.testing.assert_array_equal(np.asarray(got)[:3], a[:3] * np.float32(2))


@nki.jit
def private_scratch_through_views(a, off):
    """A private-HBM scratch filled through a reshape view, written through `.ap(scalar_offset=tile)` on the
    root, read back through another reshape view (library indexed_flatten's partial result)."""
    buf = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.private_hbm)
    init = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=init, value=-1)
    nisa.dma_copy(dst=buf.reshape((4, 8)), src=init)
    o = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=o, src=off)
    t = sbuf_of(a)
    nisa.dma_copy(dst=buf.ap(pattern=[[4, 2], [1, 4]], offset=4, scalar_offset=o, indirect_dim=0), src=t,
                  oob_mode=nisa.oob_mode.skip)
    s = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=buf.reshape((4, 8)))
    return hbm_of(s)


@pytest.mark.parametrize("mode", MODES)
def test_views_of_a_private_hbm_tensor_share_its_memory(mode):
    a = np.arange(8, dtype=np.int32).reshape(2, 4) + 1
    want = np.full((8, 4), -1, np.int32)
    want[4:6] = a                                  # offset 4 elements = row 1, plus scalar_offset 3 rows
    got = private_scratch_through_views(a, np.array([[3]], np.int32), mode=mode)
    np.testing.assert_array_equal(np.asarray(got).reshape(8, 4), want)


@nki.jit
def compact_3d(x, before):
    """nisa.nonzero_with_count on src [P, 3, 8] and dst [P, 1, 25]: free dims counted row-major."""
    xs = sbuf_of(x)
    r = nl.ndarray(before.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=before)
    nisa.nonzero_with_count(dst=r, src=xs, index_offset=5, padding_val=-3)
    return hbm_of(r)


@pytest.mark.parametrize("mode", MODES)
def test_nonzero_with_count_of_multi_dim_free_shapes(mode):
    x = (RNG.random((32, 3, 8)) < 0.4).astype(np.float32) * RNG.standard_normal((32, 3, 8)).astype(np.float32)
    before = RNG.integers(-100, 100, (32, 1, 25)).astype(np.int32)
    want = before.copy()
    for p in (0, 16):                               # each GpSimd core's first partition
        pos = np.flatnonzero(x[p].reshape(-1) != 0)
        row = np.full(25, -3, np.int32)
        row[:pos.size] = pos + 5
        row[-1] = pos.size
        want[p, 0] = row
    np.testing.assert_array_equal(compact_3d(x, before, mode=mode), want)
