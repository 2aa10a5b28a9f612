"""Data movement and indexing against plain numpy: nl.load / nl.store (with dtype casts and masks),
copies, views and slicing, nl.ds, nl.arange / nl.mgrid, masks, broadcast_to, HBM reshape,
nl.par_dim, SPMD program ids, memset / zeros / ones / full, transpose, uninitialised memory and
out-of-bounds errors.

Data movement with the same dtype keeps every bit (NaN payloads, -0); with a dtype change it
converts through fp32 (int -> int wraps).
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core.bits import UNINIT_SENTINEL as SENTINEL

from .kernels.tutorial_style import spmd_add
from .oracle import (ALL, ALL_WITH_BOOL, FLOATS, F32, assert_bits, cdiv, check_dtype, convert_ref, f32_to,
                     fast, i64_to, map1_kernel, ragged_cases, ragged_map, ref_ops, storage, values)

HERE = os.path.abspath(__file__)


def _line_of(marker: str) -> int:
    """Line number of the (unique) source line of this file containing `marker`."""
    lines = open(HERE).read().splitlines()
    hits = [i + 1 for i, s in enumerate(lines) if marker in s and "_line_of(" not in s and "_assert_oob(" not in s]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


# ----------------------------------------------------------------------------- load / store

@pytest.mark.parametrize("dt", ALL_WITH_BOOL)
@fast(3)
@given(case=ragged_cases())
def test_load_store_roundtrip_keeps_bits(dt, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, dt)
    k = map1_kernel(lambda x, m: x)
    assert_bits(k(a, case.P, case.FT, dt), a, f"load/store {dt}")


@pytest.mark.parametrize("dst", ALL_WITH_BOOL)
@pytest.mark.parametrize("src", ["float32", "bfloat16", "float8_e5m2", "int32", "uint8", "bool"])
@fast(2)
@given(case=ragged_cases(max_f=200))
def test_load_with_dtype(src, dst, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, src)

    @nki.jit
    def k(a, P, FT):
        out = nl.ndarray(a.shape, dtype=dst, buffer=nl.shared_hbm)
        ragged_map(out, (a,), P, FT, lambda x, m: x, load_dtype=dst, out_dt=dst)
        return out

    assert_bits(k(a, case.P, case.FT), convert_ref(a, src, dst), f"load {src} as {dst}")


@pytest.mark.parametrize("dst", ["float32", "bfloat16", "float8_e4m3", "int8", "uint16", "tfloat32"])
@pytest.mark.parametrize("src", ["float32", "float16", "int32"])
@fast(2)
@given(case=ragged_cases(max_f=200))
def test_store_converts_to_destination_dtype(src, dst, case):
    rng = np.random.default_rng(case.seed)
    a = values(rng, case.shape, src)
    @nki.jit
    def k(a, P, FT):
        out = nl.ndarray(a.shape, dtype=dst, buffer=nl.shared_hbm)
        ragged_map(out, (a,), P, FT, lambda x, m: x)         # the store converts
        return out

    assert_bits(k(a, case.P, case.FT), convert_ref(a, src, dst), f"store {src} into {dst}")


def test_load_errors():
    @nki.jit
    def k1(a):
        out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(nl.load(a)))
        return out

    with pytest.raises(errors.MemorySpaceError, match="hbm"):
        k1(np.ones((4, 4), np.float32))

    @nki.jit
    def k2(a):
        out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, 1.0)
        return out

    with pytest.raises(errors.ArgumentError, match="Python number"):
        k2(np.ones((4, 4), np.float32))

    @nki.jit
    def k3(a):
        out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[0, 0]))
        return out

    # one element of a 2-D tensor is a [1, 1] tile, as nki-samples' flash_attn_bwd loads sinks[b, h]
    # (tests/test_corpus_legacy_fixes.py); it was NL-E104 before
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(k3(a), a[:1, :1])


def test_load_of_vector_lands_one_element_per_partition():
    """nl.load of a 1-D view [n] gives an [n, 1] tile."""
    a = np.arange(20, dtype=np.float32).reshape(4, 5)

    @nki.jit
    def k(a):
        out = nl.ndarray((5, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a[2])
        assert t.shape == (5, 1)
        nl.store(out, t)
        return out

    assert_bits(k(a), a[2][:, None], "1-D load")


# ----------------------------------------------------------------------------- views and slicing

@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
@fast(3)
@given(T=st.integers(1, 3), P=st.integers(1, 128), F=st.integers(1, 300), seed=st.integers(0, 2 ** 32 - 1),
       data=st.data())
def test_hbm_slices_with_loop_variables(dt, T, P, F, seed, data):
    """a[i*P:(i+1)*P, c0:c1] and nl.ds(i*P, P) with an affine loop variable."""
    n = T * P
    c0 = data.draw(st.integers(0, F - 1), label="c0")
    c1 = data.draw(st.integers(c0 + 1, F), label="c1")
    a = values(np.random.default_rng(seed), (n, F), dt)

    @nki.jit
    def k(a):
        out = nl.ndarray((n, c1 - c0), dtype=a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((n, c1 - c0), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(T):
            x = nl.load(a[i * P:(i + 1) * P, c0:c1])
            nl.store(out[i * P:(i + 1) * P, :], value=x)
            y = nl.load(a[nl.ds(i * P, P), nl.ds(c0, c1 - c0)])
            nl.store(out2[nl.ds(i * P, P), :], value=y)
        return out, out2

    got, got2 = k(a)
    assert_bits(got, a[:, c0:c1], "slices")
    assert_bits(got2, a[:, c0:c1], "nl.ds")


STATIC_KEYS = {
    "[:, ::2]": (slice(None), slice(None, None, 2)),
    "[1::3, 2:9:2]": (slice(1, None, 3), slice(2, 9, 2)),
    "[-3:, -5:]": (slice(-3, None), slice(-5, None)),
    "[::-1, :]": (slice(None, None, -1), slice(None)),
    "[2:3, :]": (slice(2, 3), slice(None)),
    "[:, -1:]": (slice(None), slice(-1, None)),
    "[..., 3:7]": (Ellipsis, slice(3, 7)),
}


@pytest.mark.parametrize("key", list(STATIC_KEYS))
def test_static_basic_indexing_of_hbm(key):
    a = np.arange(10 * 12, dtype=np.float32).reshape(10, 12)
    ix = STATIC_KEYS[key]
    want = np.ascontiguousarray(a[ix])

    @nki.jit
    def k(a):
        v = a[ix]
        out = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(v))
        return out

    assert_bits(k(a), want, key)


def test_integer_index_drops_dimension():
    """x[:, 3] of a [P, F] tile is a (P, 1) view (on-chip tiles stay 2-D); x[b] of a 3-D HBM tensor is
    2-D (HBM follows numpy); the (P, 1) column stores into a (P,) HBM view."""
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)

    @nki.jit
    def k(a):
        out = nl.ndarray((5, 6), dtype=a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((5,), dtype=a.dtype, buffer=nl.shared_hbm)
        assert a[2].shape == (5, 6)
        t = nl.load(a[2])
        nl.store(out, t)
        col = t[:, 3]
        assert col.shape == (5, 1)
        nl.store(out2[nl.arange(5)], value=nl.copy(col))
        return out, out2

    got, got2 = k(a)
    assert_bits(got, a[2], "a[2]")
    assert_bits(got2, a[2, :, 3], "t[:, 3]")


@pytest.mark.parametrize("dt", ["float32", "float8_e4m3", "uint8"])
@fast(3)
@given(P=st.integers(1, 128), F=st.integers(2, 200), seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_sbuf_views_as_operands_and_destinations(dt, P, F, seed, data):
    """Slices of SBUF tiles as op inputs and as assignment targets (writes go through the view)."""
    h = data.draw(st.integers(1, F - 1), label="h")
    rng = np.random.default_rng(seed)
    a = values(rng, (P, F), dt)
    b = values(rng, (P, F), dt)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((P, 2 * F), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        buf = nl.ndarray((P, 2 * F), dtype=a.dtype, buffer=nl.sbuf)
        buf[:, 0:F] = y                      # tile copy into a view
        buf[:, F:F + h] = x[:, 0:h]          # a view into a view
        buf[:, F + h:2 * F] = nl.copy(x[:, h:F])
        buf[:, nl.ds(0, 1)] = x[:, nl.ds(F - 1, 1)]
        nl.store(out, buf)
        return out

    want = np.concatenate([b, a], axis=1)
    want[:, 0:1] = a[:, F - 1:F]
    assert_bits(k(a, b), want, "sbuf views")


def test_stepped_sbuf_view_and_tile_reuse():
    a = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.add(t[:, 0:16:2], t[:, 1:16:2]))
        return out

    assert_bits(k(a), (a[:, 0::2] + a[:, 1::2]).astype(np.int32), "stepped views")


# ----------------------------------------------------------------------------- arange / mgrid / masks

@pytest.mark.parametrize("form", ["arange", "mgrid", "mgrid_px", "arange_offset"])
@fast(3)
@given(case=ragged_cases())
def test_index_grids(form, case):
    rng = np.random.default_rng(case.seed)
    n, F = case.shape
    P = case.P
    a = values(rng, (n, F), "float32")

    @nki.jit
    def k(a):
        out = nl.ndarray((n, F), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(cdiv(n, P)):
            if form == "arange":
                ip, jf = nl.arange(P)[:, None], nl.arange(F)[None, :]
            elif form == "mgrid":
                ip, jf = nl.mgrid[0:P, 0:F]
            elif form == "mgrid_px":
                g = nl.mgrid[0:P, 0:F]
                ip, jf = g.p, g.x
            else:
                ip, jf = nl.arange(1, P + 1)[:, None] - 1, nl.arange(3, F + 3)[None, :] - 3
            m = i * P + ip < n
            nl.store(out[i * P + ip, jf], value=nl.load(a[i * P + ip, jf], mask=m), mask=m)
        return out

    assert_bits(k(a), a, form)


def test_mgrid_with_step():
    a = np.arange(6 * 20, dtype=np.float32).reshape(6, 20)

    @nki.jit
    def k(a):
        out = nl.ndarray((3, 5), dtype=a.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:6:2, 1:20:4]
        o = nl.mgrid[0:3, 0:5]
        nl.store(out[o.p, o.x], value=nl.load(a[g.p, g.x]))
        return out

    assert_bits(k(a), a[0:6:2, 1:20:4], "mgrid step")


@pytest.mark.parametrize("mask", ["and", "invert", "store_only", "free_only", "false", "equal"])
def test_masks(mask):
    n, F = 10, 12
    a = np.arange(n * F, dtype=np.float32).reshape(n, F) + 1

    @nki.jit
    def k(a):
        out = nl.ndarray((n, F), dtype=a.dtype, buffer=nl.shared_hbm)
        full = nl.full((n, F), -7.0, dtype=nl.float32)
        nl.store(out, full)
        ip = nl.arange(n)[:, None]
        jf = nl.arange(F)[None, :]
        x = nl.load(a)
        if mask == "and":
            nl.store(out[ip, jf], value=x, mask=(ip >= 2) & (ip < 7) & (jf < 5))
        elif mask == "invert":
            nl.store(out[ip, jf], value=x, mask=~(jf < 5))
        elif mask == "store_only":
            nl.store(out[ip, jf], value=x, mask=(ip < 3))
        elif mask == "free_only":
            nl.store(out[ip, jf], value=nl.multiply(x, 2.0, mask=(jf >= 6)), mask=(jf >= 6))
        elif mask == "false":
            nl.store(out[ip, jf], value=x, mask=False)
        else:
            nl.store(out[ip, jf], value=x, mask=(ip == 4))
        return out

    got = k(a)
    ip, jf = np.mgrid[0:n, 0:F]
    sel = {"and": (ip >= 2) & (ip < 7) & (jf < 5), "invert": jf >= 5, "store_only": ip < 3,
           "free_only": jf >= 6, "false": np.zeros((n, F), bool), "equal": ip == 4}[mask]
    val = a * 2 if mask == "free_only" else a
    assert_bits(got, np.where(sel, val, np.float32(-7.0)).astype(np.float32), mask)


def test_mask_prevents_out_of_bounds_access():
    """A ragged tail that would read/write past the end is legal when masked."""
    a = np.arange(130 * 3, dtype=np.float32).reshape(130, 3)
    k = map1_kernel(lambda x, m: x)
    assert_bits(k(a, 128, 3, "float32"), a, "masked tail")


# ----------------------------------------------------------------------------- broadcast_to / reshape / par_dim

@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int8"])
@fast(3)
@given(P=st.integers(1, 128), F=st.integers(1, 300), seed=st.integers(0, 2 ** 32 - 1))
def test_broadcast_to(dt, P, F, seed):
    rng = np.random.default_rng(seed)
    row = values(rng, (1, F), dt)
    col = values(rng, (P, 1), dt)

    @nki.jit
    def k(row, col):
        o1 = nl.ndarray((P, F), dtype=row.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((P, F), dtype=row.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((P, F), dtype=row.dtype, buffer=nl.shared_hbm)
        r = nl.load(row)
        c = nl.load(col)
        nl.store(o1, nl.copy(nl.broadcast_to(r, shape=(P, F))))
        nl.store(o2, c.broadcast_to((P, F)))
        nl.store(o3, c)                        # store broadcasts a [P, 1] value over the view
        return o1, o2, o3

    g1, g2, g3 = k(row, col)
    assert_bits(g1, np.broadcast_to(row, (P, F)).copy(), "row broadcast")
    assert_bits(g2, np.broadcast_to(col, (P, F)).copy(), "col broadcast")
    assert_bits(g3, np.broadcast_to(col, (P, F)).copy(), "store broadcast")


def test_broadcast_to_incompatible_shape_raises():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.broadcast_to(nl.load(a), shape=(4, 8)))
        return out

    with pytest.raises(errors.ShapeError, match="cannot broadcast"):
        k(np.ones((3, 8), np.float32))


@pytest.mark.parametrize("dt", ["float32", "float16", "uint32"])
@fast(3)
@given(rows=st.integers(1, 64), width=st.integers(1, 64), seed=st.integers(0, 2 ** 32 - 1))
def test_hbm_reshape(dt, rows, width, seed):
    """Reshape of whole HBM tensors (inputs and outputs): the same memory seen with a new shape."""
    a = values(np.random.default_rng(seed), (rows * width,), dt)

    @nki.jit
    def k(a):
        out = nl.ndarray((rows * width,), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a.reshape((rows, width)))
        nl.store(out.reshape((rows, width)), value=nl.copy(x))
        return out

    assert_bits(k(a), a, "reshape")


def test_reshape_errors():
    @nki.jit
    def k1(a):
        out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a.reshape((3, 5))))
        return out

    with pytest.raises(errors.ShapeError, match="reshape"):
        k1(np.ones((4, 4), np.float32))

    @nki.jit
    def k2(a):
        out = nl.ndarray((2, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a).reshape((2, 8)))
        return out

    with pytest.raises(errors.ShapeError, match="HBM"):
        k2(np.ones((4, 4), np.float32))


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
@fast(2)
@given(B=st.integers(1, 3), P=st.integers(1, 128), F=st.integers(1, 100), seed=st.integers(0, 2 ** 32 - 1))
def test_par_dim(dt, B, P, F, seed):
    """nl.par_dim marks the partition axis: (par_dim(P), F) and block layouts (B, par_dim(P), F)."""
    a = values(np.random.default_rng(seed), (B, P, F), dt)

    @nki.jit
    def k(a):
        out = nl.ndarray((B, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
        blocks = nl.ndarray((B, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf)
        for b in nl.affine_range(B):
            t = nl.ndarray((nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf)
            t[...] = nl.load(a[b])
            blocks[b] = nl.add(t, t)
        for b in nl.affine_range(B):
            nl.store(out[b], value=blocks[b])
        return out

    want = ref_ops(["add"], a, dt, [(a, dt)], dt)
    assert_bits(k(a), want, "par_dim")


# ----------------------------------------------------------------------------- SPMD

def test_spmd_tutorial_add():
    rng = np.random.default_rng(0)
    a = values(rng, (256, 1024), "float32", "nice")
    b = values(rng, (256, 1024), "float32", "nice")
    assert_bits(spmd_add[2, 2](a, b), (a + b).astype(np.float32), "spmd_add")


@pytest.mark.parametrize("grid", [(1,), (3,), (2, 3), (2, 1, 2)])
def test_program_ids(grid):
    """Each program writes its ids, the grid size and rank into its own row."""
    G = int(np.prod(grid))

    @nki.jit
    def k(a):
        out = nl.ndarray((G, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        ndim = nl.program_ndim()
        lin = 0
        for ax in range(ndim):
            lin = lin * grid[ax] + nl.program_id(ax)
        row = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.sbuf)
        row[...] = nl.num_programs()
        row[:, 1:2] = ndim
        for ax in range(3):
            if ax < ndim:
                row[:, 2 + ax:3 + ax] = nl.num_programs(ax)
        t = nl.load(a[nl.ds(lin, 1), :])          # a[lin] = lin: the program's linear id, read via pid
        row[:, 5:6] = t
        nl.store(out[nl.ds(lin, 1), :], value=row)
        return out

    a = np.arange(G, dtype=np.int32)[:, None].repeat(1, axis=1)
    got = k[grid](a)
    want = np.zeros((G, 8), np.int32)
    want[:, 0] = G
    want[:, 1] = len(grid)
    for ax, g in enumerate(grid):
        want[:, 2 + ax] = g
    want[:, 2 + len(grid):5] = G
    want[:, 5] = np.arange(G)
    want[:, 6:] = G
    assert_bits(got, want, f"grid {grid}")


def test_program_id_outside_grid_raises():
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out[nl.ds(nl.program_id(1), 1), :], value=nl.load(a))
        return out

    with pytest.raises(errors.ArgumentError, match="program_id"):
        k[2](np.ones((1, 1), np.float32))


# ----------------------------------------------------------------------------- memset / zeros / ones / full

MEMSET_VALUES = [0, 1, -1, 3, 300, -2.5, 0.1, 1e10, -0.0, True, 65504.0, 2 ** 31]


def memset_ref(value, dt, shape):
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        v = i64_to(np.array([value], np.int64), dt)
    else:
        v = f32_to(np.array([value], F32), dt)
    return np.broadcast_to(v.reshape(1, 1), shape).copy()


@pytest.mark.parametrize("dt", ALL_WITH_BOOL)
@pytest.mark.parametrize("how", ["nisa.memset", "nl.full", "assign"])
def test_memset_and_full(how, dt):
    """A Python value into a tile of dtype dt: ints wrap (int64 path), floats convert from fp32."""
    P, F = 3, 5

    @nki.jit
    def k(a, value):
        out = nl.ndarray((P, F), dtype=dt, buffer=nl.shared_hbm)
        if how == "nisa.memset":
            t = nisa.memset((P, F), value, dt)
        elif how == "nl.full":
            t = nl.full((P, F), value, dt)
        else:
            t = nl.ndarray((P, F), dtype=dt, buffer=nl.sbuf)
            t[...] = value
        check_dtype(t, dt)
        nl.store(out, t)
        return out

    dummy = np.zeros((1, 1), np.float32)
    for v in MEMSET_VALUES:
        assert_bits(k(dummy, v), memset_ref(v, dt, (P, F)), f"{how}({v!r}) {dt}")


@pytest.mark.parametrize("dt", ALL_WITH_BOOL)
@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_zeros_ones(dt, buffer):
    @nki.jit
    def k(a):
        o1 = nl.ndarray((4, 6), dtype=dt, buffer=nl.shared_hbm)
        o2 = nl.ndarray((4, 6), dtype=dt, buffer=nl.shared_hbm)
        z = nl.zeros((4, 6), dtype=dt, buffer=getattr(nl, buffer))
        o = nl.ones((4, 6), dtype=dt, buffer=getattr(nl, buffer))
        nl.store(o1, nl.copy(z))
        nl.store(o2, nl.copy(o))
        return o1, o2

    g0, g1 = k(np.zeros((1, 1), np.float32))
    assert_bits(g0, memset_ref(0, dt, (4, 6)), "zeros")
    assert_bits(g1, memset_ref(1, dt, (4, 6)), "ones")


# ----------------------------------------------------------------------------- transpose

@pytest.mark.parametrize("dt", ALL)
@fast(2)
@given(P=st.integers(1, 128), F=st.integers(1, 128), seed=st.integers(0, 2 ** 32 - 1))
def test_transpose_keeps_bits(dt, P, F, seed):
    a = values(np.random.default_rng(seed), (P, F), dt)

    @nki.jit
    def k(a):
        out = nl.ndarray((F, P), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.transpose(nl.load(a))
        check_dtype(t, dt)
        nl.store(out, t)
        return out

    assert_bits(k(a), np.ascontiguousarray(a.T), f"transpose {dt}")


@pytest.mark.parametrize("pair", [("float32", "bfloat16"), ("bfloat16", "float32"), ("int32", "int8"),
                                  ("float16", "float8_e5m2")])
def test_transpose_with_dtype(pair):
    src, dst = pair
    a = values(np.random.default_rng(2), (50, 70), src)

    @nki.jit
    def k(a):
        out = nl.ndarray((70, 50), dtype=dst, buffer=nl.shared_hbm)
        nl.store(out, nl.transpose(nl.load(a), dtype=dst))
        return out

    assert_bits(k(a), np.ascontiguousarray(convert_ref(a, src, dst).T), f"transpose {src}->{dst}")


def test_transpose_rank_checked():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 3, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.transpose(nl.load(a)))
        return out

    with pytest.raises(errors.ShapeError, match="2-D"):
        k(np.ones((2, 3, 4), np.float32))


# ----------------------------------------------------------------------------- uninitialised memory

@pytest.mark.parametrize("dt", ALL_WITH_BOOL)
def test_uninitialised_sbuf_reads(dt):
    """Unwritten SBUF elements read as NaN (floats), the interpreter's sentinel (ints) or True (bool)."""
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 6), dtype=dt, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 6), dtype=dt, buffer=nl.sbuf)
        t[:, 0:2] = nl.load(a)
        nl.store(out, t)
        return out

    a = values(np.random.default_rng(0), (4, 2), dt, "nice")
    got = k(a)
    assert_bits(got[:, 0:2], a, "written part")
    rest = got[:, 2:]
    if dt in FLOATS:
        assert np.isnan(rest.astype(np.float32)).all(), rest
    elif dt == "bool":
        assert rest.all()
    else:
        assert (rest == np.array(SENTINEL[dt]).astype(storage(dt))).all(), rest


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32", "uint8"])
def test_uninitialised_values_propagate_through_ops(dt):
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 6), dtype=dt, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 6), dtype=dt, buffer=nl.sbuf)
        t[0:2, :] = nl.load(a)
        nl.store(out, nl.add(t, t))
        return out

    a = values(np.random.default_rng(1), (2, 6), dt, "nice")
    got = k(a)
    assert_bits(got[0:2], ref_ops(["add"], a, dt, [(a, dt)], dt), "written rows")
    if dt in FLOATS:
        assert np.isnan(got[2:].astype(np.float32)).all()
    else:
        s = np.full((2, 6), SENTINEL[dt], np.int64)
        assert_bits(got[2:], ref_ops(["add"], s, dt, [(s, dt)], dt), "sentinel + sentinel")


def test_uninitialised_psum_is_nan():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.psum)
        nl.store(out, nl.copy(ps))
        return out

    assert np.isnan(k(np.zeros((1, 1), np.float32))).all()


def test_tile_created_in_loop_is_fresh_each_iteration():
    """A tile allocated inside a loop body starts uninitialised in every iteration."""
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2):
            t = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
            t[:, nl.ds(i, 1)] = nl.load(a[nl.ds(i, 1), nl.ds(i, 1)])
            nl.store(out[nl.ds(i, 1), :], value=t)
        return out

    got = k(np.ones((2, 2), np.float32))
    assert got[0, 0] == 1 and got[1, 1] == 1
    assert np.isnan(got[0, 1:]).all() and np.isnan(got[1, [0, 2, 3]]).all()


# ----------------------------------------------------------------------------- out-of-bounds accesses

def _assert_oob(exc_info, marker):
    msg = str(exc_info.value)
    line = _line_of(marker)
    assert f"{HERE}:{line}:" in msg, msg


def test_out_of_bounds_load_names_the_line():
    @nki.jit
    def k(a):
        out = nl.ndarray((384, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(4)[None, :]
        for i in nl.affine_range(3):
            x = nl.load(a[i * 128 + ip, jf])  # OOB-LOAD
            nl.store(out[i * 128 + ip, jf], value=x)
        return out

    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k(np.ones((300, 4), np.float32))
    _assert_oob(ei, "# OOB-LOAD")


def test_out_of_bounds_store_names_the_line():
    @nki.jit
    def k(a):
        out = nl.ndarray((10, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        for i in nl.affine_range(2):
            nl.store(out[nl.ds(i * 6, 6), :], value=x)  # OOB-STORE
        return out

    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k(np.ones((6, 4), np.float32))
    _assert_oob(ei, "# OOB-STORE")


def test_out_of_bounds_sbuf_view_names_the_line():
    @nki.jit
    def k(a):
        out = nl.ndarray((64, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        for i in nl.sequential_range(3):
            y = nl.copy(t[nl.ds(i * 64, 64), :])  # OOB-SBUF
            nl.store(out, value=y)
        return out

    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k(np.ones((128, 4), np.float32))
    _assert_oob(ei, "# OOB-SBUF")


def test_out_of_bounds_program_id_names_the_line():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a[nl.ds(nl.program_id(0) * 2, 2), :])  # OOB-PID
        nl.store(out[nl.ds(nl.program_id(0) * 2, 2), :], value=x)
        return out

    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k[3](np.ones((4, 4), np.float32))
    _assert_oob(ei, "# OOB-PID")


def test_interpreter_bounds_check_names_the_line():
    """The interpreter's own check (independent of the verifier): run the IR directly."""
    from nki_lite.runtime.interpreter import run

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out[nl.ds(i * 4, 4), :], value=nl.load(a[nl.ds(i * 3, 4), :]))  # OOB-INTERP
        return out

    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    a = np.ones((6, 4), np.float32)
    bound = k.bind((a,), {})
    ir_kernel = run_shared(trace(k.fn, bound, (), "trn2"))
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        run(ir_kernel, {"a": a})
    _assert_oob(ei, "# OOB-INTERP")
    assert "i0=1" in str(ei.value)


def test_static_out_of_bounds():
    @nki.jit
    def k1(a):
        out = nl.ndarray((2, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[nl.ds(3, 2), :]))  # OOB-STATIC
        return out

    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k1(np.ones((4, 4), np.float32))
    _assert_oob(ei, "# OOB-STATIC")

    @nki.jit
    def k2(a):
        out = nl.ndarray((1, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[7:8, :][0:1, :]))
        return out

    with pytest.raises(errors.KernelSyntaxError, match="empty slice"):
        k2(np.ones((4, 4), np.float32))

    @nki.jit
    def k3(a):
        out = nl.ndarray((4, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[:, 9:10]))
        return out

    with pytest.raises(errors.KernelSyntaxError, match="empty slice"):
        k3(np.ones((4, 4), np.float32))
