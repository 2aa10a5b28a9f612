"""Verifier rules 7 (static out-of-bounds accesses) and 8 (unmasked ragged tails)."""
import math

import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


expect = _expect


# ------------------------------------------------------------------------------ rule 7

@nki.jit
def window(x, start):
    out = nl.ndarray((128, 200), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, nl.ds(start, 200)])  # MARK-WINDOW
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_static_window_past_the_end(target):
    e = expect(window, (spec((128, 4000)), 3900), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-WINDOW",
               target)
    msg = str(e)
    assert isinstance(e, IndexError)
    assert "[3900, 4099]" in msg and "4000" in msg and "dimension 1" in msg
    assert "mask=(i_f + 3900 < 4000)" in e.hint


def test_static_window_inside_passes():
    window.trace(spec((128, 4000)), 3800, target="trn2")


@nki.jit
def strips(x, trips, mode):
    out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(trips):
        if mode == "exact":
            t = nl.load(x[ip, i * 512 + i_f], mask=(i * 512 + i_f < x.shape[1]))
        elif mode == "loop":
            t = nl.load(x[ip, i * 512 + i_f], mask=(i < trips - 1))
        elif mode == "partition-only":
            t = nl.load(x[ip, i * 512 + i_f], mask=(ip < 64))  # MARK-PMASK
        elif mode == "negative":
            t = nl.load(x[ip, i * 512 + i_f - 10])  # MARK-NEG
        else:
            t = nl.load(x[ip, i * 512 + i_f])  # MARK-STRIPS
        acc[...] = nl.add(acc, t)
    nl.store(out, value=acc)
    return out


def test_every_iteration_past_the_end_is_out_of_bounds_not_ragged():
    # 9 strips of 512 over 4000 columns: two iterations run past the end
    e = expect(strips, (spec((128, 4000)), 9, "plain"), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-STRIPS")
    assert "[0, 4607]" in str(e) and "4000" in str(e) and "mask=(i * 512 + i_f < 4000)" in e.hint


def test_negative_index():
    e = expect(strips, (spec((128, 4000)), 7, "negative"), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-NEG")
    assert "[-10, " in str(e) and ">= 0" in e.hint


@pytest.mark.parametrize("mode", ("exact", "loop"))
def test_masks_that_keep_the_access_inside_pass(mode):
    strips.trace(spec((128, 4000)), 8, mode, target="trn2")


def test_mask_on_another_dimension_does_not_hide_the_error():
    e = expect(strips, (spec((128, 4000)), 9, "partition-only"), errors.IndexOutOfBoundsError, "out_of_bounds",
               "MARK-PMASK")
    assert "& (i * 512 + i_f < 4000)" in e.hint


def test_store_out_of_bounds_names_the_store():
    @nki.jit
    def k(x):
        out = nl.ndarray((100, 64), x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[0:100, :], value=t[0:100, :])
        nl.store(out[nl.ds(50, 64), :], value=t[0:64, :])  # MARK-STORE
        return out
    e = expect(k, (spec((128, 64)),), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-STORE")
    assert "output 'out'" in str(e) and "[50, 113]" in str(e)


# ------------------------------------------------------------------------------ rule 8

@nki.jit
def rows(x, masked):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    iy = nl.arange(x.shape[1])[None, :]
    for i in nl.affine_range(math.ceil(x.shape[0] / 128)):
        if masked:
            t = nl.load(x[i * 128 + ip, iy], mask=(i * 128 + ip < x.shape[0]))
        else:
            t = nl.load(x[i * 128 + ip, iy])  # MARK-RAGGED
        nl.store(out[i * 128 + ip, iy], value=t, mask=(i * 128 + ip < x.shape[0]))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_unmasked_ragged_tail_suggests_the_exact_mask(target):
    e = expect(rows, (spec((1000, 64)), False), errors.IndexOutOfBoundsError, "ragged_tail", "MARK-RAGGED", target)
    assert "mask=(i * 128 + ip < 1000)" in e.hint
    assert "[0, 1023]" in str(e) and "1000" in str(e) and "i=7" in str(e)


@pytest.mark.parametrize("target", TARGETS)
def test_masked_ragged_tail_passes(target):
    rows.trace(spec((1000, 64)), True, target=target)


def test_exact_multiple_needs_no_mask():
    rows.trace(spec((1024, 64)), False, target="trn2")


def test_ragged_tail_over_spmd_grid():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        t = nl.load(x[nl.program_id(0) * 128 + ip, iy])  # MARK-GRID
        nl.store(out[nl.program_id(0) * 128 + ip, iy], value=t, mask=(nl.program_id(0) * 128 + ip < 300))
        return out
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        k[3].trace(spec((300, 64)), target="trn2")
    e = ei.value
    assert e.name == "ragged_tail" and f"{HERE}:{line_of('MARK-GRID')}:" in str(e)
    assert "mask=(nl.program_id(0) * 128 + ip < 300)" in e.hint


def test_ragged_tail_with_a_mask_on_another_axis_says_extend():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        for i in nl.affine_range(3):
            t = nl.load(x[i * 128 + ip, iy], mask=(iy < 64))  # MARK-EXTEND
            nl.store(out[i * 128 + ip, iy], value=t, mask=(i * 128 + ip < 300))
        return out
    e = expect(k, (spec((300, 64)),), errors.IndexOutOfBoundsError, "ragged_tail", "MARK-EXTEND")
    assert "& (i * 128 + ip < 300)" in e.hint


def test_huge_masked_iteration_space_uses_the_proportional_mask():
    # the second mask term ties three tile axes to the loop: 200 x 128 x 64 points to enumerate is over
    # the budget, so the exact solver gives up; the first term is the index itself and bounds it exactly
    @nki.jit
    def k(x, masked):
        n = x.shape[0]
        out = nl.ndarray((128, 512, 64), x.dtype, buffer=nl.shared_hbm)
        i0 = nl.arange(128)[:, None, None]
        i1 = nl.arange(512)[None, :, None]
        i2 = nl.arange(64)[None, None, :]
        acc = nl.zeros((128, 512, 64), x.dtype, buffer=nl.sbuf)
        for i in nl.sequential_range(200):
            tie = (i * 128 + i0 + i1 + i2 < 10 ** 6)
            if masked:
                t = nl.load(x[i * 128 + i0, i1, i2], mask=(i * 128 + i0 < n) & tie)
            else:
                t = nl.load(x[i * 128 + i0, i1, i2], mask=tie)
            acc[...] = nl.maximum(acc, t)
        nl.store(out, value=acc)
        return out
    kern = k.trace(spec((25550, 512, 64), nl.float8_e4m3), True, target="trn2")
    assert kern is not None
    # undecidable within the budget (the real access does run past row 25549): not reported, by design
    k.trace(spec((25550, 512, 64), nl.float8_e4m3), False, target="trn2")
