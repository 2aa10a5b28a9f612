"""nl.floor / nl.ceil / nl.trunc: exact integral rounding of fp32 (numerics/fp32math/basic.py), the
same bits on both backends, NaN canonical with its sign, signed zeros and infinities kept."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.numerics import fp32math as M

from .both_backends import backend, random_bits_f32  # noqa: F401 - autouse fixture

REF = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
QNAN = np.uint32(0x7FC00000)


def _expected_bits(name, x):
    """numpy's rounding, with NaN canonicalised to sign|0x7FC00000 (docs/numerics.md)."""
    with np.errstate(invalid="ignore"):
        r = REF[name](x).view(np.uint32)
    nan_bits = (x.view(np.uint32) & np.uint32(0x80000000)) | QNAN
    return np.where(np.isnan(x), nan_bits, r)


@pytest.mark.parametrize("name", sorted(REF))
def test_definition_matches_ieee_round_to_integral(name):
    x = np.concatenate([random_bits_f32(3, (4096,)),
                        np.array([-0.0, 0.0, -0.5, 0.5, -1.5, 2.5, 8388607.5, -8388609.0, np.inf, -np.inf,
                                  1e-45, -1e-45], np.float32)])
    np.testing.assert_array_equal(M.FUNCTIONS[name](x).view(np.uint32), _expected_bits(name, x))


@nki.jit
def _round_kernel(x):
    out_f = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    out_i = nl.ndarray((3,) + x.shape, nl.int32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out_f, value=nl.floor(t))
    finite = nl.minimum(nl.maximum(t, -1e6), 1e6)     # an int32 result needs an in-range input
    nl.store(out_i[0], value=nl.floor(finite, dtype=nl.int32))
    nl.store(out_i[1], value=nl.ceil(finite, dtype=nl.int32))
    nl.store(out_i[2], value=nl.trunc(finite, dtype=nl.int32))
    return out_f, out_i


def test_kernel_rounding_bitwise_on_both_backends():
    x = random_bits_f32(5, (128, 64))
    x[:, :32] = np.random.default_rng(1).uniform(-300, 300, (128, 32)).astype(np.float32)
    out_f, out_i = _round_kernel(x)
    want = _expected_bits("floor", x)
    # the activation path computes x*scale(+bias) first: a NaN reaching floor is already +qNaN
    want[np.isnan(x)] = QNAN
    np.testing.assert_array_equal(out_f.view(np.uint32), want)
    clipped = np.minimum(np.maximum(np.nan_to_num(x, nan=0.0), -1e6), 1e6).astype(np.float32)
    fin = ~np.isnan(x)
    for k, name in enumerate(("floor", "ceil", "trunc")):
        np.testing.assert_array_equal(out_i[k][fin], REF[name](clipped[fin]).astype(np.int32), err_msg=name)


def test_numpy_ufuncs_on_tiles_mean_the_nl_ops():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=np.ceil(t) + np.floor(t))
        return out
    x = np.random.default_rng(2).uniform(-9, 9, (64, 32)).astype(np.float32)
    np.testing.assert_array_equal(k(x), np.ceil(x) + np.floor(x))
