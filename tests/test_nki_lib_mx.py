"""The NKI Library's MX kernels (issue #14, session 2026-12-03 (2)): patterns they need, re-created.

- an LNC=2 exchange of a packed x4 tile with `sendrecv` is a bit copy (rmsnorm_mx_quantize_tkg's gather of
  its quantized halves; verifier rule 12 allows it as it allows dma_copy between tensors of one MX dtype);
- `if tensor:` of an HBM tensor tests an optional argument in the current dialect (moe_tkg's
  `if params.expert_params.expert_index:`); an on-chip tile stays NL-E801;
- `nl.range` loops as `nl.affine_range` (mxfp_load).
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

from .test_nki_dialect import both

ROWS = 32


@nki.jit(platform_target="trn3")
def exchange_x4(a):
    out = nl.ndarray(a.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    mine = nl.ndarray((ROWS, a.shape[1]), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a.ap(pattern=[[a.shape[1], ROWS], [1, a.shape[1]]], offset=me * ROWS * a.shape[1],
                                     dtype=nl.float8_e4m3fn_x4))
    theirs = nl.ndarray((ROWS, a.shape[1]), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.dma_copy(dst=out[nl.ds((1 - me) * ROWS, ROWS), :], src=theirs)
    return out


def test_sendrecv_moves_packed_x4_codes_bit_for_bit():
    a = np.random.default_rng(5).integers(0, 2**32, (2 * ROWS, 4), dtype=np.uint64).astype(np.uint32)
    got = exchange_x4[2](a, mode="interpret")
    assert np.array_equal(np.asarray(got).view(np.uint32), a)     # each core's rows, sent to the other and stored back


@nki.jit
def optional_bias(x, bias):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if bias:                                      # the library's optional-argument test
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=bias)
        nisa.tensor_tensor(dst=t, data1=t, data2=b, op=nl.add)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.range(1):                         # nl.range: an affine_range
        nisa.dma_copy(dst=out, src=t)
    return out


def test_hbm_tensor_is_true_and_nl_range_loops():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(both(optional_bias, x, x), 2 * x)
    np.testing.assert_array_equal(both(optional_bias, x, None), x)


@nki.jit
def branch_on_tile(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if t:
        nisa.memset(dst=t, value=0.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_on_chip_tile_in_a_branch_stays_an_error():
    with pytest.raises(errors.NkiLiteError) as ei:
        branch_on_tile(np.zeros((2, 4), np.float32), mode="interpret")
    assert ei.value.code == "NL-E801"
