"""Verifier rule 9: writes that conflict between iterations of an affine_range loop."""

import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


def expect(kernel, args, name, marker, target="trn2"):
    e = _expect(kernel, args, errors.DependencyError, name, marker, target)
    assert isinstance(e, ValueError)
    return e


@nki.jit
def store_each(x, mode):
    out = nl.ndarray((512, 64) if mode == "indexed" else (128, 64), x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(64)[None, :]
    rng = nl.sequential_range if mode == "sequential" else nl.affine_range
    for i in rng(4):
        t = nl.load(x[i * 128 + ip, iy])
        if mode == "indexed":
            nl.store(out[i * 128 + ip, iy], value=t)
        else:
            nl.store(out[ip, iy], value=t)  # MARK-SAME
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_every_iteration_writes_the_same_place(target):
    e = expect(store_each, (spec((512, 64)), "same"), "loop_dependency", "MARK-SAME", target)
    msg = str(e)
    assert "out[0, 0]" in msg and "i=0" in msg and "i=1" in msg and "sequential_range" in e.hint


@pytest.mark.parametrize("mode", ("indexed", "sequential"))
def test_indexed_or_sequential_pass(mode):
    store_each.trace(spec((512, 64)), mode, target="trn2")


@nki.jit
def reuse_tile(x, inside):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(64)[None, :]
    buf = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        if inside:
            buf = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
        buf[...] = nl.load(x[i * 128 + ip, iy])  # MARK-REUSE
        nl.store(out[i * 128 + ip, iy], value=buf)
    return out


def test_on_chip_tile_declared_outside_the_loop():
    e = expect(reuse_tile, (spec((512, 64)), False), "loop_dependency", "MARK-REUSE")
    assert "allocated outside the loop" in str(e)


def test_on_chip_tile_allocated_inside_the_loop_is_per_iteration():
    reuse_tile.trace(spec((512, 64)), True, target="trn2")


@nki.jit
def accumulate(x, how):
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(64)[None, :]
    acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(4):
        t = nl.load(x[i * 128 + ip, iy])
        if how == "psum":
            acc += t
        else:
            acc[...] = nl.add(t, t)  # MARK-OVERWRITE
    nl.store(out, value=nl.copy(acc))
    return out


def test_psum_add_accumulation_is_allowed():
    accumulate.trace(spec((512, 64)), "psum", target="trn2")


def test_psum_overwrite_is_not_accumulation():
    expect(accumulate, (spec((512, 64)), "overwrite"), "loop_dependency", "MARK-OVERWRITE")


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_psum_accumulation_is_allowed(target):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(a.shape[0] // 128):
            acc += nisa.nc_matmul(nl.load(a[kk * 128:(kk + 1) * 128, :]), nl.load(b[kk * 128:(kk + 1) * 128, :]))
        nl.store(out, value=nl.copy(acc))
        return out
    k.trace(spec((512, 128)), spec((512, 512)), target=target)


def test_interleaved_columns_do_not_conflict():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 256), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        for i in nl.affine_range(4):
            t = nl.load(x[ip, i * 64 + i_f])
            nl.store(out[ip, 4 * i_f + i], value=t)
        return out
    k.trace(spec((128, 256)), target="trn2")


def test_writes_kept_apart_by_masks_do_not_conflict():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.load(x)
        for i in nl.affine_range(2):
            nl.store(out[ip, i_f], value=t, mask=(i_f >= i * 32) & (i_f < i * 32 + 32))
        return out
    k.trace(spec((128, 64)), target="trn2")


def test_overlapping_masks_conflict():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.load(x)
        for i in nl.affine_range(2):
            nl.store(out[ip, i_f], value=t, mask=(i_f >= i * 30) & (i_f < i * 30 + 34))  # MARK-MASKS
        return out
    e = expect(k, (spec((128, 64)),), "loop_dependency", "MARK-MASKS")
    assert "out[0, 30]" in str(e) or "out[" in str(e)


def test_two_stores_overlapping_across_iterations():
    @nki.jit
    def k(x):
        out = nl.ndarray((640, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        for i in nl.affine_range(4):
            t = nl.load(x[i * 128 + ip, iy])
            nl.store(out[i * 128 + ip, iy], value=t)
            nl.store(out[i * 128 + 128 + ip, iy], value=t)  # MARK-PAIR
        return out
    e = expect(k, (spec((512, 64)),), "loop_dependency", "MARK-PAIR")
    assert f"test_verify_deps.py:{line_of('MARK-PAIR') - 1}" in str(e)


def test_inner_loop_conflict_inside_outer_affine_loop():
    @nki.jit
    def k(x):
        out = nl.ndarray((256, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        for i in nl.affine_range(2):
            for j in nl.affine_range(3):
                t = nl.load(x[i * 128 + ip, iy])
                nl.store(out[i * 128 + ip, iy], value=t)  # MARK-INNER
        return out
    e = expect(k, (spec((256, 64)),), "loop_dependency", "MARK-INNER")
    assert "over `j`" in str(e)


def test_spmd_programs_share_nothing_with_loops():
    @nki.jit
    def k(x):
        out = nl.ndarray((256, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(32)[None, :]
        for j in nl.affine_range(2):
            t = nl.load(x[nl.program_id(0) * 128 + ip, j * 32 + iy])
            nl.store(out[nl.program_id(0) * 128 + ip, j * 32 + iy], value=t)
        return out
    k[2].trace(spec((256, 64)), target="trn2")


def test_large_tile_written_in_every_iteration():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 32768), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.load(x)
            nl.store(out, value=t)  # MARK-BIG
        return out
    e = expect(k, (spec((128, 32768)),), "loop_dependency", "MARK-BIG")
    assert "i=0 and i=1" in str(e)


def test_private_hbm_scratch_created_in_the_loop_is_per_iteration():
    @nki.jit
    def k(x):
        out = nl.ndarray((512, 64), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        for i in nl.affine_range(4):
            scratch = nl.ndarray((128, 64), x.dtype, buffer=nl.hbm)
            nl.store(scratch, value=nl.load(x[i * 128 + ip, iy]))
            nl.store(out[i * 128 + ip, iy], value=nl.load(scratch))
        return out
    k.trace(spec((512, 64)), target="trn2")
