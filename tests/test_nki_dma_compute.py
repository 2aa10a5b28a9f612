"""nisa.dma_compute (the current dialect): a DMA that adds its sources while copying.

Numerics: each source converted to fp32, added in source order with each sum rounded to fp32, the total
cast once to dst's dtype (lang/isa_dma_compute.py); interpreter and JIT are bit-identical. The library's
patterns: HBM views -> an SBUF tile (qkv_cte's fused residual add), whole HBM tensors -> HBM (qkv_tkg),
an output that is also a source (moe_cte's in-place reduction of two halves).
"""
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

from .nki_tiles import hbm_of

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(116)
BF16 = ml_dtypes.bfloat16


def fp32_sum(*xs, dtype):
    acc = xs[0].astype(np.float32)
    for x in xs[1:]:
        acc = (acc + x.astype(np.float32)).astype(np.float32)
    return acc.astype(dtype)


@nki.jit
def residual_rows(x, mlp, attn, rows: int):
    """Rows 1..rows of three HBM tensors through `.ap`, summed into an SBUF tile (qkv_cte's pattern)."""
    H = x.shape[1]
    t = nl.ndarray((rows, H), dtype=x.dtype, buffer=nl.sbuf)
    srcs = [v.ap(pattern=[[H, rows], [1, H]], offset=H) for v in (x, mlp, attn)]
    nisa.dma_compute(dst=t[0:rows, 0:H], srcs=srcs, scales=[1.0, 1.0, 1.0], reduce_op=nl.add)
    return hbm_of(t)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_sum_of_hbm_views_into_sbuf(mode, dtype):
    x, mlp, attn = (RNG.standard_normal((9, 24)).astype(dtype) for _ in range(3))
    got = np.asarray(residual_rows(x, mlp, attn, 5, mode=mode))
    want = fp32_sum(x[1:6], mlp[1:6], attn[1:6], dtype=dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@nki.jit
def whole_tensor_sum(a, b, c, out_dtype):
    """Whole HBM tensors reshaped to one row each, summed HBM -> HBM (qkv_tkg's unsharded branch)."""
    out = nl.ndarray(a.shape, dtype=out_dtype, buffer=nl.shared_hbm)
    n = a.shape[0] * a.shape[1]
    nisa.dma_compute(out.reshape((1, n)), (a.reshape((1, n)), b.reshape((1, n)), c),
                     scales=None, reduce_op=nl.add)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_whole_hbm_tensors_order_and_single_rounding(mode):
    # bf16 inputs, bf16 output: one rounding of the fp32 sum (1 + 2^-8 + 2^-8 = 1 + 2^-7, exact in bf16),
    # where rounding to bf16 after each add would give 1 both times (1 + 2^-8 is a tie, to even)
    one = np.ones((4, 8), BF16)
    tiny = np.full((4, 8), 2.0 ** -8, BF16)
    got = np.asarray(whole_tensor_sum(one, tiny, tiny, nl.bfloat16, mode=mode))
    np.testing.assert_array_equal(got.astype(np.float32), np.float32(1 + 2.0 ** -7))
    # fp32: the order matters (big + (-big) + small vs. big + small - big) and is source order
    big = np.full((4, 8), 2.0 ** 30, np.float32)
    small = np.full((4, 8), 3.0, np.float32)
    got = np.asarray(whole_tensor_sum(big, -big, small, nl.float32, mode=mode))
    np.testing.assert_array_equal(got, small)
    got = np.asarray(whole_tensor_sum(big, small, -big, nl.float32, mode=mode))
    np.testing.assert_array_equal(got, np.zeros_like(small))


@pytest.mark.parametrize("mode", MODES)
def test_integer_and_mixed_dtypes_go_through_fp32(mode):
    a = RNG.integers(-2 ** 20, 2 ** 20, (3, 16)).astype(np.int32)
    b = RNG.standard_normal((3, 16)).astype(BF16)
    c = RNG.standard_normal((3, 16)).astype(np.float16)
    got = np.asarray(whole_tensor_sum(a, b, c, nl.float32, mode=mode))
    np.testing.assert_array_equal(got, fp32_sum(a, b, c, dtype=np.float32))


@nki.jit
def fold_halves(x):
    """out[r] = x[r] + x[T + r], written into the tensor that is also the first source (moe_cte)."""
    T, H = x.shape[0] // 2, x.shape[1]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    nisa.dma_compute(dst=out.ap(pattern=[[H, T], [1, H]], offset=0),
                     srcs=[out.ap(pattern=[[H, T], [1, H]], offset=0),
                           out.ap(pattern=[[H, T], [1, H]], offset=T * H)],
                     scales=[1.0, 1.0], reduce_op=nl.add)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_destination_as_a_source(mode):
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    got = np.asarray(fold_halves(x, mode=mode))
    np.testing.assert_array_equal(got[:4], x[:4] + x[4:])
    np.testing.assert_array_equal(got[4:], x[4:])


@nki.jit
def bad_call(a, b, kind: str):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if kind == "max":
        nisa.dma_compute(out, [a, b], reduce_op=nl.maximum)
    elif kind == "scale":
        nisa.dma_compute(out, [a, b], reduce_op=nl.add, scales=[1.0, 2.0])
    elif kind == "count":
        nisa.dma_compute(out, [a] * 17, reduce_op=nl.add)
    elif kind == "psum":
        p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.dma_compute(p, [a, b], reduce_op=nl.add)
    elif kind == "shape":
        nisa.dma_compute(out[0:2, :], [a[0:2, :], b[0:3, :]], reduce_op=nl.add)
    return out


@pytest.mark.parametrize("kind,code,words", [
    ("max", "NL-E116", "reduce_op must be nl.add"), ("scale", "NL-E116", "scales must all be 1.0"),
    ("count", "NL-E116", "1 to 16 source"), ("psum", "NL-E116", "HBM or SBUF"),
    ("shape", "NL-E103", "srcs[1] shape (3, 8)")])
def test_what_the_dma_engines_do_not_support_is_an_error_at_the_line(kind, code, words):
    a = np.zeros((4, 8), np.float32)
    with pytest.raises(errors.NkiLiteError) as e:
        bad_call(a, a, kind, mode="interpret")
    assert e.value.code == code and words in str(e.value)
    assert "test_nki_dma_compute.py" in str(e.value)


def _dma_costs(kernel, *args):
    k = kernel.trace(*args, target="trn2")
    ctx = CostCtx(TARGETS["trn2"], k.buffer_map)
    return {i.op: cost_of(i, ctx) for i, _ in walk(k.body) if i.op in ("dma_compute", "dma_copy")}


def test_engine_model_streams_every_source():
    """n sources and one write: (n + 1) / 2 times the slowest source's copy, every HBM source's bytes read."""
    a = np.zeros((64, 512), np.float32)
    c = _dma_costs(whole_tensor_sum, a, a, a, nl.float32)
    one = c["dma_compute"]
    assert one.opcode == "dma_compute" and one.engine == "dma"
    assert one.hbm_read_bytes == 3 * a.nbytes and one.hbm_write_bytes == a.nbytes
    two = _dma_costs(fold_halves, np.zeros((128, 512), np.float32))
    # fold_halves' sources are each half of a [128, 512] tensor, whole_tensor_sum's a whole [64, 512] one:
    # the same bytes per source, so the three-source DMA takes 4/2 / (3/2) times as long
    assert c["dma_compute"].ns == pytest.approx(two["dma_compute"].ns * 4 / 3, rel=0.05)
