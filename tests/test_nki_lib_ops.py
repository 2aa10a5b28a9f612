"""NKI Library patterns of issue #14 (libops), re-created in small kernels of the current dialect.

- `math.ceil((H - i * B) / 128)` of a loop variable (qkv_cte's weight blocks): true division of a loop
  variable is a Python float, so the loop unrolls (as NKI's simulator runs it in Python); of a known int it
  is the float; of an arange axis it is an error at the line.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(1416)


@nki.jit
def ragged_blocks(x, block: int):
    """Copies x's columns block by block; the last block is narrower: its width from a true division."""
    P, H = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(H / block)):
        offset = i * block
        width = min(block, math.ceil((H - offset) / 1))     # (H - offset) / 1: an Index / int
        t = nl.ndarray((P, block), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:width], src=x[:, nl.ds(offset, width)])
        nisa.dma_copy(dst=out[:, nl.ds(offset, width)], src=t[:, 0:width])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_true_division_of_a_loop_variable_unrolls(mode):
    x = RNG.standard_normal((4, 21)).astype(np.float32)
    np.testing.assert_array_equal(ragged_blocks(x, 8, mode=mode), x)


@nki.jit
def divided_axis(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.arange(x.shape[0])[:, None]
    half = i / 2  # MARK-DIV
    nisa.dma_copy(dst=out, src=x[half, :])
    return out


def test_true_division_of_an_arange_is_an_error_at_the_line():
    with pytest.raises(errors.NkiLiteError) as e:
        divided_axis(np.zeros((4, 4), np.float32))
    assert e.value.code == "NL-E807"
    assert "true division" in str(e.value) and "MARK-DIV" in str(e.value)


@nki.jit
def banks_by_int_index(x, banks: int):
    """A list filled in an affine_range loop, indexed by an int (qkv_cte's PSUM banks, indexed by
    i_tile_S * n + k after those loops unrolled): NKI's Python loop appended one tile per iteration."""
    P, F = x.shape
    tiles = []
    for b in nl.affine_range(banks):
        tiles.append(nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf))
    out = nl.ndarray((banks, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    for b in range(banks):                      # Python ints index the list
        nisa.dma_copy(dst=tiles[b], src=x)
        nisa.tensor_scalar(dst=tiles[b], data=tiles[b], op0=nl.add, operand0=float(b))
        nisa.dma_copy(dst=out[b], src=tiles[b])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_list_filled_in_a_loop_indexed_by_ints(mode):
    x = RNG.standard_normal((8, 4)).astype(np.float32)
    got = np.asarray(banks_by_int_index(x, 3, mode=mode))
    np.testing.assert_array_equal(got, np.stack([x + np.float32(b) for b in range(3)]))


@nki.jit
def past_the_end(x):
    tiles = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)]
    nisa.dma_copy(dst=tiles[1], src=x)  # MARK-PAST
    return x


def test_an_index_past_a_list_not_filled_in_a_loop_stays_an_index_error():
    with pytest.raises(IndexError):
        past_the_end(np.zeros((2, 2), np.float32))


@nki.jit
def guarded_views(w, groups: int):
    """output_proj_tkg's pattern: the view of column h is made before the `if h < H` that skips the last,
    partial group's missing columns; only the views inside the tensor are used."""
    P, H = w.shape
    t = nl.ndarray((P, H), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=w)
    out = nl.ndarray((P, H), dtype=w.dtype, buffer=nl.shared_hbm)
    for g in nl.affine_range(groups):
        for k in nl.affine_range(2):
            h = g * 2 + k
            col = t.ap(pattern=[[H, P], [1, 1]], offset=h)        # outside t for h >= H
            if h < H:
                nisa.dma_copy(dst=out[:, nl.ds(h, 1)], src=col)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_a_view_outside_its_tensor_is_fine_until_used(mode):
    w = RNG.standard_normal((4, 5)).astype(np.float32)
    got = np.asarray(guarded_views(w, 3, mode=mode))
    np.testing.assert_array_equal(got, w)


@nki.jit
def used_outside(w):
    P, H = w.shape
    t = nl.ndarray((P, H), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=w)
    col = t.ap(pattern=[[H, P], [1, 1]], offset=H)  # MARK-OOB
    out = nl.ndarray((P, 1), dtype=w.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=col)
    return out


def test_a_used_view_outside_its_tensor_is_nl_e501_at_the_view():
    with pytest.raises(errors.NkiLiteError) as e:
        used_outside(np.zeros((4, 5), np.float32))
    assert e.value.code == "NL-E501" and "MARK-OOB" in str(e.value)
