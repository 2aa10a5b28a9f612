"""The interpreter's fp32 matmul k-chain (numerics/fma.fma_outer_chain_f32) is fma_f32 step by step,
bit for bit, including the rare sums that land on a float32 rounding midpoint, subnormal results,
overflow and NaN. (The fast chain made nki-samples' fp32 flash-attention tests practical to
interpret.)"""
import numpy as np
import pytest

from nki_lite.numerics.fma import fma_f32, fma_outer_chain_f32

RNG = np.random.default_rng(5)


def stepwise(s, m, acc, start):
    for k in range(start, s.shape[0]):
        acc = fma_f32(s[k][:, None], m[k][None, :], acc)
    return acc


def same_bits(a, b):
    np.testing.assert_array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def test_random_chains():
    s, m = RNG.standard_normal((64, 16)).astype(np.float32), RNG.standard_normal((64, 24)).astype(np.float32)
    acc = RNG.standard_normal((16, 24)).astype(np.float32)
    same_bits(fma_outer_chain_f32(s, m, acc, 0), stepwise(s, m, acc, 0))


def test_midpoint_sums_are_rounded_once():
    """a*b = 1 + 2**-24 (a midpoint of float32) plus a tiny c: naive double rounding gives 1.0."""
    a, b = np.float32(24929 * 2.0 ** -15), np.float32(673 * 2.0 ** -9)
    s = np.array([[a, 1.0], [2.0 ** -40, 1.0]], np.float32)
    m = np.array([[b, 1.0], [1.0, 2.0 ** -24]], np.float32)
    acc = np.array([[2.0 ** -60, 0.0], [-1.0, 1.0]], np.float32)
    got = fma_outer_chain_f32(s, m, acc, 0)
    same_bits(got, stepwise(s, m, acc, 0))
    assert got[0, 0] != np.float32(1.0)


@pytest.mark.parametrize("scale", [2.0 ** -140, 2.0 ** -120, 2.0 ** 60, 1.0])
def test_subnormal_overflow_and_special_values(scale):
    s = (RNG.standard_normal((32, 8)) * scale).astype(np.float32)
    m = (RNG.standard_normal((32, 8)) * (scale if scale > 1 else 1.0)).astype(np.float32)
    s[3, 0], m[5, 1], s[7, 2] = np.inf, np.nan, -np.inf
    acc = (RNG.standard_normal((8, 8)) * scale).astype(np.float32)
    for start in (0, 1, 32):
        same_bits(fma_outer_chain_f32(s, m, acc, start), stepwise(s, m, acc, start))
