"""nisa.local_gather (lang/isa_gather.py) on both backends against a numpy model of NKI's
documented semantics; out-of-range offsets are NL-E501 with the same report in both."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .both_backends import backend, nice, random_bits_f32  # noqa: F401 - autouse fixture


def model(src, index, n, valid):
    """[P, valid, n]: each 16-partition core gathers with its own index slice, flattened partition-first."""
    P = src.shape[0]
    flat = src.reshape(P, -1)
    out = np.empty((P, valid, n), src.dtype)
    for c in range(P // 16):
        ids = index[c * 16:(c + 1) * 16].reshape(16, -1).T.reshape(-1)[:valid].astype(np.int64)
        offs = ids[:, None] + np.arange(n)[None, :]
        out[c * 16:(c + 1) * 16] = flat[c * 16:(c + 1) * 16][:, offs]
    return out


def _kernel(n, valid, out_shape):
    @nki.jit
    def k(src, index):
        out = nl.ndarray(out_shape, src.dtype, buffer=nl.shared_hbm)
        g = nisa.local_gather(nl.load(src), nl.load(index), n, valid)
        nl.store(out, value=g)
        return out
    return k


@pytest.mark.parametrize("P,n,cols,valid", [(128, 4, 4, None), (32, 1, 3, 40), (16, 8, 2, None), (64, 32, 1, 5)])
def test_local_gather_matches_the_model_bitwise(P, n, cols, valid):
    rng = np.random.default_rng(P + n)
    src = random_bits_f32(P, (P, 64, 8))
    index = rng.integers(0, 64 * 8 - n + 1, size=(P, cols)).astype(np.uint16)
    v = 16 * cols if valid is None else valid
    shape = (P, cols, 16, n) if valid is None else (P, v, n)
    got = _kernel(n, valid, shape)(src, index)
    np.testing.assert_array_equal(got.reshape(P, v, n).view(np.uint32), model(src, index, n, v).view(np.uint32))


def test_local_gather_of_a_view_with_a_mask_and_bf16():
    @nki.jit
    def k(src, index):
        out = nl.ndarray((32, 2, 16, 2), nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(src)
        g = nl.zeros((32, 2, 16, 2), nl.bfloat16, buffer=nl.sbuf)
        i = nl.mgrid[0:32, 0:2, 0:16, 0:2]
        g[i.p, i.x, i.y, i.z] = nisa.local_gather(t[:, 8:40], nl.load(index), 2, mask=(i.p < 20))
        nl.store(out, value=g)
        return out
    src = nice(3, (32, 48), "bfloat16")
    index = np.random.default_rng(4).integers(0, 31, size=(32, 2)).astype(np.uint16)
    got = k(src, index).astype(np.float32).reshape(32, 32, 2)
    want = model(src[:, 8:40], index, 2, 32).astype(np.float32)
    np.testing.assert_array_equal(got[:20], want[:20])
    np.testing.assert_array_equal(got[20:], 0)


def test_local_gather_offset_past_the_partition_is_nl_e501():
    index = np.zeros((16, 1), np.uint16)
    index[5, 0] = 62                        # 62 + 4 elements > 64
    with pytest.raises(errors.NkiLiteError) as e:
        _kernel(4, None, (16, 1, 16, 4))(nice(5, (16, 64)), index)
    assert e.value.code == "NL-E501" and "dimension 1" in str(e.value) and "[0, 63]" in str(e.value)


@pytest.mark.parametrize("call,code", [
    ("nisa.local_gather(t, idx, 3)", "NL-E901"),                               # n not a power of two <= 32
    ("nisa.local_gather(t, t, 1)", "NL-E201"),                                  # index not uint16
    ("nisa.local_gather(t, idx, 1, 33)", "NL-E901"),                           # more indices than the core has
])
def test_local_gather_argument_checks(call, code):
    ns = {"nl": nl, "nisa": nisa}
    src = ("def k(src, index):\n    out = nl.ndarray((16, 1, 16, 1), src.dtype, buffer=nl.shared_hbm)\n"
           "    t = nl.load(src)\n    idx = nl.load(index)\n"
           f"    nl.store(out, value={call})\n    return out\n")
    exec(compile(src, "<gather>", "exec"), ns)
    with pytest.raises(errors.NkiLiteError) as e:
        nki.jit(ns["k"])(nice(6, (16, 8)), np.zeros((16, 2), np.uint16))
    assert e.value.code == code


def test_local_gather_engine_model_uses_the_documented_estimate():
    from nki_lite.core.ir import walk
    from nki_lite.core.targets import TARGETS
    from nki_lite.lower.cost.rules import CostCtx, cost_of
    traced = _kernel(4, None, (128, 4, 16, 4)).trace(nice(7, (128, 64)), np.zeros((128, 4), np.uint16),
                                                    target="trn1")
    ctx = CostCtx(TARGETS["trn1"], traced.buffer_map)
    costs = [cost_of(ins, ctx) for ins, _ in walk(traced.body) if ins.op == "local_gather"]
    c = ((28 + 4 * 4) / (4 * 4)) / min(4 / 4, 4)     # fp32, n = 4, t = 4
    assert len(costs) == 1 and costs[0].engine == "gpsimd"
    assert costs[0].cycles == pytest.approx(150 + 64 * 4 / c)
