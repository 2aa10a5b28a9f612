"""Indirect (tile-valued) indexing: gathers and scatters through nl.load / nl.store / nisa.dma_copy,
oob_mode, read-modify-write DMA (dst_rmw_op, nl.atomic_rmw), nisa.tensor_copy_dynamic_src and
nl.gather_flattened; the analyses' conservative view of run-time indices; the engine model's charge.

Every kernel runs on both backends (`mode`) and is compared with numpy (exactly: data movement
copies bits; the read-modify-write adds round once per element in fp32).
"""
import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core.ir import walk
from nki_lite.core.targets import TARGETS
from nki_lite.lower import analysis
from nki_lite.lower.cost.rules import CostCtx, cost_of

from .markers import marker_helpers

HERE, line_of, _ = marker_helpers(__file__)
RNG = np.random.default_rng(13)


@pytest.fixture(params=("interpret", "jit"))
def mode(request):
    return request.param


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------ gathers

@nki.jit
def gather_rows(data, idx, n: int, dtype=None):
    out = nl.ndarray([n, data.shape[1]], dtype=dtype or data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(n)[:, None]
    i_f = nl.arange(data.shape[1])[None, :]
    it = nl.load(idx[i_p])
    nl.store(out, value=nl.load(data[it[i_p, 0], i_f], dtype=dtype))
    return out


def test_load_gathers_rows_named_by_a_loaded_index_tile(mode):
    data = f32(96, 40)
    idx = RNG.integers(0, 96, 48).astype(np.int32)          # repeats included
    np.testing.assert_array_equal(gather_rows(data, idx, 48, mode=mode), data[idx])


def test_gather_with_a_dtype_cast_agrees_bitwise_between_backends():
    data = f32(64, 32)
    idx = RNG.permutation(64)[:32].astype(np.int32)
    a = gather_rows(data, idx, 32, nl.bfloat16, mode="interpret")
    b = gather_rows(data, idx, 32, nl.bfloat16, mode="jit")
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    np.testing.assert_array_equal(a, data[idx].astype(ml_dtypes.bfloat16))


@nki.jit
def gather_by_iota(data):
    out = nl.ndarray([32, data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    it = nisa.iota(3 * nl.arange(32)[:, None], dtype=np.int32)
    nl.store(out, value=nl.load(data[it, nl.arange(data.shape[1])[None, :]]))
    return out


def test_an_iota_tile_indexes_directly(mode):
    data = f32(100, 16)
    np.testing.assert_array_equal(gather_by_iota(data, mode=mode), data[3 * np.arange(32)])


# ------------------------------------------------------------------------------ scatters, oob_mode

@nki.jit
def scatter_rows(x, idx, rows: int, how: str):
    out = nl.ndarray([rows, x.shape[1]], dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    nl.store(out, value=nl.full((rows, x.shape[1]), -1.0, dtype=x.dtype))
    it = nl.load(idx[nl.arange(n)[:, None]])
    i_f = nl.arange(x.shape[1])[None, :]
    t = nl.load(x)
    if how == "store":
        nl.store(out[it, i_f], value=t)
    elif how == "skip":
        nisa.dma_copy(dst=out[it, i_f], src=t, oob_mode=nisa.oob_mode.skip)
    elif how == "error":
        nisa.dma_copy(dst=out[it, i_f], src=t, oob_mode=nisa.oob_mode.error)  # scatter_err
    else:
        nisa.dma_copy(dst=out[it, i_f], src=t, dst_rmw_op=np.add)
    return out


def test_store_scatters_rows(mode):
    x = f32(32, 24)
    idx = RNG.permutation(80)[:32].astype(np.int32)
    want = np.full((80, 24), -1, np.float32)
    want[idx] = x
    np.testing.assert_array_equal(scatter_rows(x, idx, 80, "store", mode=mode), want)


def test_oob_skip_leaves_out_of_range_rows_untransferred(mode):
    x = f32(16, 8)
    idx = np.array([0, 5, 40, -1, 7, 39, 100, 3] * 2, np.int32)     # rows 40, -1, 100 do not exist
    idx[8:] = np.arange(10, 18)
    want = np.full((40, 8), -1, np.float32)
    ok = (idx >= 0) & (idx < 40)
    want[idx[ok]] = x[ok]
    np.testing.assert_array_equal(scatter_rows(x, idx, 40, "skip", mode=mode), want)


@pytest.mark.parametrize("bad", [40, -3])
def test_oob_error_names_the_index_value_and_the_line(mode, bad):
    x = f32(8, 4)
    idx = np.array([1, 2, bad, 4, 100, 5, 6, 7], np.int32)           # the first bad one is reported
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        scatter_rows(x, idx, 40, "error", mode=mode)
    e = ei.value
    assert e.code == "NL-E503"
    assert f"indirect index {bad} on dimension 0" in str(e) and "[0, 39]" in str(e)
    assert "at tile element [2, 0]" in str(e)
    assert e.loc.line == line_of("scatter_err")


def test_oob_error_message_is_the_same_on_both_backends():
    x = f32(8, 4)
    idx = np.array([1, 2, 3, 4, 100, 5, 6, 7], np.int32)
    msgs = []
    for m in ("interpret", "jit"):
        with pytest.raises(errors.IndexOutOfBoundsError) as ei:
            scatter_rows(x, idx, 40, "error", mode=m)
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1]


def test_dst_rmw_add_accumulates_repeated_indices_in_fp32(mode):
    x = f32(16, 8)
    idx = np.array([2, 2, 2, 5, 5, 0, 1, 3, 4, 6, 7, 8, 9, 2, 5, 0], np.int32)
    want = np.full((12, 8), -1, np.float32)
    for k in range(16):                                   # one fp32 rounding per element, row-major
        want[idx[k]] = want[idx[k]] + x[k]
    got = scatter_rows(x, idx, 12, "rmw", mode=mode)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@nki.jit
def rmw_rows(base, idx, val):
    out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(base))
    it = nl.load(idx)
    nl.atomic_rmw(out[it, nl.arange(base.shape[1])[None, :]], value=nl.load(val), op=np.add)
    return out


def test_atomic_rmw_adds_into_indexed_rows(mode):
    base, val = f32(64, 32), f32(16, 32)
    idx = RNG.permutation(64)[:16].astype(np.int32).reshape(16, 1)
    want = base.copy()
    want[idx[:, 0]] += val
    np.testing.assert_array_equal(rmw_rows(base, idx, val, mode=mode), want)


# ------------------------------------------------------------------------------ on-chip dynamic copies

@nki.jit
def dynamic_columns(src, offsets):
    n = offsets.shape[1]
    out = nl.ndarray([src.shape[0], n], dtype=src.dtype, buffer=nl.shared_hbm)
    sb = nl.load(src)
    off = nl.load(offsets)
    res = nl.ndarray([src.shape[0], n], dtype=src.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:src.shape[0], 0:1]
    for k in nl.affine_range(n):
        res[ix, k] = nisa.tensor_copy_dynamic_src(sb[ix, off[0, k] + iy])
    nl.store(out, value=res)
    return out


def test_tensor_copy_dynamic_src_reads_columns_at_runtime_offsets(mode):
    src = f32(64, 100)
    offs = RNG.integers(0, 100, (1, 12)).astype(np.int32)
    np.testing.assert_array_equal(dynamic_columns(src, offs, mode=mode), src[:, offs[0]])


@nki.jit
def dynamic_middle(src, offsets):
    n = offsets.shape[1]
    out = nl.ndarray([src.shape[0], n, src.shape[2]], dtype=src.dtype, buffer=nl.shared_hbm)
    sb = nl.load(src)
    off = nl.load(offsets)
    res = nl.ndarray([src.shape[0], n, src.shape[2]], dtype=src.dtype, buffer=nl.sbuf)
    ix, _, iz = nl.mgrid[0:src.shape[0], 0:1, 0:src.shape[2]]
    for k in nl.affine_range(n):
        res[ix, k, iz] = nisa.tensor_copy_dynamic_src(sb[ix, off[0, k], iz])
    nl.store(out, value=res)
    return out


def test_a_scalar_index_tile_selects_a_middle_dimension(mode):
    src = f32(32, 20, 4)
    offs = RNG.integers(0, 20, (1, 6)).astype(np.int32)
    np.testing.assert_array_equal(dynamic_middle(src, offs, mode=mode), src[:, offs[0], :])


@nki.jit
def gather_free(data, idx):
    out = nl.ndarray(idx.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.gather_flattened(data=nl.load(data), indices=nl.load(idx)))
    return out


def test_gather_flattened_gathers_within_each_partition(mode):
    data = f32(32, 50)
    idx = RNG.integers(0, 50, (32, 10)).astype(np.uint32)
    np.testing.assert_array_equal(gather_free(data, idx, mode=mode), np.take_along_axis(data, idx, axis=1))


@nki.jit
def by_assignment(src, offsets, idx):
    n = offsets.shape[1]
    out = nl.ndarray([src.shape[0] * 2, n], dtype=src.dtype, buffer=nl.shared_hbm)
    sb = nl.load(src)
    off = nl.load(offsets)
    res = nl.ndarray([src.shape[0], n], dtype=src.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:src.shape[0], 0:1]
    for k in nl.affine_range(n):
        res[ix, k] = sb[ix, off[0, k] + iy]                       # an on-chip dynamic copy
    nl.store(out, value=nl.zeros((src.shape[0] * 2, n), dtype=src.dtype))
    out[nl.load(idx), nl.arange(n)[None, :]] = res                 # an indirect store
    return out


def test_assignment_forms_move_through_indirect_views(mode):
    src = f32(16, 30)
    offs = RNG.integers(0, 30, (1, 5)).astype(np.int32)
    idx = RNG.permutation(32)[:16].astype(np.int32).reshape(16, 1)
    want = np.zeros((32, 5), np.float32)
    want[idx[:, 0]] = src[:, offs[0]]
    np.testing.assert_array_equal(by_assignment(src, offs, idx, mode=mode), want)


# ------------------------------------------------------------------------------ errors at trace time

def test_an_indirect_view_used_by_compute_is_an_error_at_the_line():
    @nki.jit
    def k(data, idx):
        out = nl.ndarray([8, 4], dtype=data.dtype, buffer=nl.shared_hbm)
        t = nl.load(data)
        it = nl.load(idx)
        nl.store(out, value=nl.exp(t[it, nl.arange(4)[None, :]]))  # misuse
        return out
    with pytest.raises(errors.NkiLiteError) as ei:
        k(f32(16, 4), np.zeros((8, 1), np.int32), mode="interpret")
    assert ei.value.code == "NL-E504" and ei.value.loc.line == line_of("misuse")


def test_a_float_index_tile_is_a_dtype_error():
    @nki.jit
    def k(data, idx):
        out = nl.ndarray([8, 4], dtype=data.dtype, buffer=nl.shared_hbm)
        it = nl.load(idx)
        nl.store(out, value=nl.load(data[it, nl.arange(4)[None, :]]))
        return out
    with pytest.raises(errors.NkiLiteError) as ei:
        k(f32(16, 4), np.zeros((8, 1), np.float32), mode="interpret")
    assert ei.value.code == "NL-E201"


# ------------------------------------------------------------------------------ analyses and costs

@nki.jit
def scatter_per_program(x, idx):
    out = nl.ndarray([64, x.shape[2]], dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    it = nl.load(idx[p])
    nl.store(out[it, nl.arange(x.shape[2])[None, :]], value=nl.load(x[p]))
    return out


@pytest.mark.filterwarnings("error")
def test_indirect_writes_are_never_proven_independent(mode):
    x = f32(2, 16, 8)
    idx = np.stack([np.arange(16), np.arange(16)]).astype(np.int32).reshape(2, 16, 1)   # both write rows 0..15
    kern = scatter_per_program[2].trace(x, idx)
    assert not analysis.of(kern).programs_independent
    got = scatter_per_program[2](x, idx, mode=mode)
    np.testing.assert_array_equal(got[:16], x[1])             # programs in order: the last one wins


@nki.jit
def stores_in_a_loop(x, idx):
    out = nl.ndarray([64, x.shape[2]], dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.zeros((64, x.shape[2]), dtype=x.dtype))
    for i in nl.affine_range(x.shape[0]):
        it = nl.load(idx[i])
        nl.store(out[it, nl.arange(x.shape[2])[None, :]], value=nl.load(x[i]))
    return out


def test_indirect_stores_in_an_affine_loop_are_not_a_false_race(mode):
    x = f32(4, 16, 8)
    idx = np.arange(64).astype(np.int32).reshape(4, 16, 1)       # disjoint rows: valid on hardware
    np.testing.assert_array_equal(stores_in_a_loop(x, idx, mode=mode), x.reshape(64, 8))


def test_engine_model_charges_one_descriptor_per_index_row():
    k = gather_rows.trace(f32(96, 40), np.zeros(48, np.int32), 48)
    ctx = CostCtx(TARGETS["trn2"], k.buffer_map)
    (c,) = [cost_of(i, ctx) for i, _ in walk(k.body) if i.op == "dma_indirect"]
    assert c.descriptors == 48 and c.dma_bytes == 48 * 40 * 4 and "indirect" in c.formula


def test_engine_model_charges_min_ii_dynamic_for_dynamic_copies():
    k = dynamic_columns.trace(f32(64, 100), np.zeros((1, 12), np.int32))
    ctx = CostCtx(TARGETS["trn2"], k.buffer_map)
    costs = [cost_of(i, ctx) for i, _ in walk(k.body) if i.op == "copy_dynamic"]
    assert costs and all(c.cycles == TARGETS["trn2"].min_ii_dynamic for c in costs)


# ------------------------------------------------------------------------------ debug checks see indirect moves

@nki.jit
def gather_from_scratch(data, idx, fill: bool):
    out = nl.ndarray([16, data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.hbm)
    if fill:
        nl.store(tmp, value=nl.load(data))
    it = nl.load(idx)
    nl.store(out, value=nl.load(tmp[it, nl.arange(data.shape[1])[None, :]]))
    return out


def test_uninitialised_read_check_follows_indirect_moves(monkeypatch):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    data = f32(32, 8)
    idx = RNG.permutation(32)[:16].astype(np.int32).reshape(16, 1)
    np.testing.assert_array_equal(gather_from_scratch(data, idx, True, mode="interpret"), data[idx[:, 0]])
    with pytest.raises(errors.NkiLiteError) as ei:             # the gathered rows were never written
        gather_from_scratch(data, idx, False, mode="interpret")
    assert ei.value.code == "NL-E902"


def test_schedule_regions_take_the_whole_indirect_dimension():
    from nki_lite.lower.cost.plan import Plan
    k = stores_in_a_loop.trace(f32(4, 16, 8), np.zeros((4, 16, 1), np.int32))
    plan = Plan(k, TARGETS["trn2"])
    (info,) = [plan.info[id(i)] for i, _ in walk(plan.body) if i.op == "dma_indirect"]
    (w,) = info.writes
    lo, hi = w.box({v: 0 for v in w.coef} | {"i0": 2})
    assert (lo[0], hi[0]) == (0, 63) and (lo[1], hi[1]) == (0, 7)   # any row of out, whatever i0


def test_bf16_read_modify_write_agrees_bitwise_between_backends():
    x = f32(16, 8).astype(ml_dtypes.bfloat16)
    idx = np.array([3, 3, 1, 0, 3, 2, 2, 5, 6, 7, 8, 9, 10, 11, 1, 0], np.int32)   # repeats accumulate
    a = scatter_rows(x, idx, 12, "rmw", mode="interpret")
    b = scatter_rows(x, idx, 12, "rmw", mode="jit")
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    want = np.full((12, 8), -1, np.float32).astype(ml_dtypes.bfloat16)
    for k in range(16):                       # fp32 add, one rounding to bf16 per element
        want[idx[k]] = (want[idx[k]].astype(np.float32) + x[k].astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(a.view(np.uint16), want.view(np.uint16))


@nki.jit
def indices_by_element(data):
    """The public gather_flattened example's pattern: an index tile filled element by element."""
    idx = nl.zeros((data.shape[0], 4), dtype=nl.uint32)
    for i in nl.static_range(data.shape[0]):
        for j in nl.static_range(4):
            idx[i, j] = 3 * j + i % 2
    out = nl.ndarray([data.shape[0], 4], dtype=data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.gather_flattened(data=nl.load(data), indices=idx))
    return out


def test_an_index_tile_filled_element_by_element(mode):
    data = f32(6, 16)
    want = np.take_along_axis(data, (3 * np.arange(4)[None, :] + np.arange(6)[:, None] % 2), axis=1)
    np.testing.assert_array_equal(indices_by_element(data, mode=mode), want)
