"""`.ap(dtype=)` views with another element size (lang/views_bitcast.py, lang/views.py `_resizable`): on-chip
read-only views of a tile's bytes (the NKI Library's mxfp_load reads an fp32 transpose result as bf16), and
HBM kernel inputs viewed as a wider dtype. Both backends, bit for bit, against numpy's `.view`."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors
from nki_lite.core.ir import walk
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.rules import CostCtx, cost_of

from . import markers
from .test_nki_dialect import both

HERE, line_of, expect = markers.marker_helpers(__file__)
RNG = np.random.default_rng(2026)


@nki.jit
def fp32_as_bf16(x, half: bool):
    """x [P, F] fp32 in SBUF viewed as [P, 2F] bf16 (or its second half, [P, F] from offset F)."""
    P, F = x.shape
    t = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    n = F if half else 2 * F
    v = t.ap(pattern=[[2 * F, P], [1, n]], offset=F if half else 0, dtype=nl.bfloat16)
    r = nl.ndarray((P, n), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=v)
    out = nl.ndarray((P, n), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("half", [False, True])
def test_on_chip_fp32_tile_read_as_bfloat16_pairs(half):
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    got = both(fp32_as_bf16, x, half)
    want = x.view(ml_dtypes.bfloat16)
    assert np.array_equal(got.view(np.uint16), (want[:, 6:] if half else want).view(np.uint16))


@nki.jit
def bf16_as_fp32_in_loop(x):
    """Each iteration rewrites the tile, then reads it through one view made before the loop: every read
    sees the bytes of that point of the program (the snapshot is refreshed before each reader)."""
    _, P, F = x.shape
    t = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
    v = t.ap(pattern=[[F // 2, P], [1, F // 2]], dtype=nl.float32)
    out = nl.ndarray((3, P, F // 2), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(3):
        nisa.dma_copy(dst=t, src=x[i])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(1))
        r = nl.ndarray((P, F // 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=v)
        nisa.dma_copy(dst=out[i], src=r)
    return out


def test_view_made_before_a_loop_sees_each_iterations_writes():
    x = RNG.standard_normal((3, 4, 8)).astype(ml_dtypes.bfloat16)
    got = both(bf16_as_fp32_in_loop, x)
    want = (x.astype(np.float32) + 1).astype(ml_dtypes.bfloat16)
    for i in range(3):
        assert np.array_equal(got[i].view(np.uint32), want[i].view(np.uint32))
    ir = bf16_as_fp32_in_loop.inner.trace(x)
    casts = [(n, loops) for n, loops in walk(ir.body) if n.op == "bitcast"]
    assert len(casts) == 1 and len(casts[0][1]) == 1              # one reader, one refresh, inside the loop
    c = cost_of(casts[0][0], CostCtx(TARGETS["trn2"], ir.buffer_map))
    assert c.engine == "none" and c.cycles == 0                   # a view: no device instruction


@nki.jit
def hbm_bf16_input_as_fp32(x):
    P, F = x.shape
    t = nl.ndarray((P, F // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[F // 2, P], [1, F // 2]], dtype=nl.float32))
    out = nl.ndarray((P, F // 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_hbm_input_viewed_as_a_wider_dtype():
    x = RNG.standard_normal((4, 16)).astype(ml_dtypes.bfloat16)
    got = both(hbm_bf16_input_as_fp32, x)
    assert np.array_equal(got.view(np.uint32), x.view(np.uint32))


@nki.jit
def write_through_view(x):
    t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    v = t.ap(pattern=[[8, 4], [1, 8]], dtype=nl.bfloat16)
    nisa.memset(dst=v, value=0.0)                                  # MARK-WRITE-VIEW
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def odd_bytes(x):
    t = nl.ndarray((4, 3), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    v = t.ap(pattern=[[1, 4], [1, 1]], dtype=nl.float32)          # MARK-ODD-BYTES
    out = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=v)
    return out


@pytest.mark.parametrize("kernel, x, marker", [
    (write_through_view, np.zeros((4, 4), np.float32), "MARK-WRITE-VIEW"),
    (odd_bytes, np.zeros((4, 3), ml_dtypes.bfloat16), "MARK-ODD-BYTES"),
])
def test_unbuilt_forms_are_errors_at_the_line(kernel, x, marker):
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(x, mode="interpret")
    e = ei.value
    assert e.name == "unsupported" and e.code == "NL-E904", str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
