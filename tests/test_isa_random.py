"""nl.rand, nl.random_seed, nl.dropout and nisa.dropout on both backends (the autouse `backend`).

The generator is nki_lite's own (docs/numerics.md, "Random numbers"); the reference below is written
from that page, not imported from nki_lite. Dropout is checked by its documented contract and by
statistics; every kernel is also run on both backends and compared bit for bit.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .both_backends import backend  # noqa: F401 - autouse: every test on both backends
from .markers import marker_helpers

HERE, line_of, expect = marker_helpers(__file__)


# ---------------------------------------------------------------- the documented generator, in numpy

def _mix(x):
    x = np.asarray(x, dtype=np.uint64) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def reference_uniform(seed, draw, stream, shape):
    key = _mix(_mix(_mix(seed) ^ draw) ^ stream)
    h = _mix(np.arange(int(np.prod(shape)), dtype=np.uint64).reshape(shape) ^ key)
    return ((h >> 8).astype(np.float64) * 2.0 ** -24).astype(np.float32)


def both_modes(kernel, *args):
    """Run on the interpreter and the JIT; assert the outputs are bit-identical; return them."""
    a = kernel(*args, mode="interpret")
    b = kernel(*args, mode="jit")
    a_t = a if isinstance(a, tuple) else (a,)
    b_t = b if isinstance(b, tuple) else (b,)
    for x, y in zip(a_t, b_t):
        np.testing.assert_array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))
    return a


# ---------------------------------------------------------------- nl.rand / nl.random_seed

@nki.jit
def two_draws():
    out = nl.ndarray((2, 64, 40), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0], value=nl.rand((64, 40)))
    nl.store(out[1], value=nl.rand((64, 40), dtype=nl.float32))
    return out


def test_rand_is_the_documented_generator_with_seed_0():
    got = both_modes(two_draws)
    np.testing.assert_array_equal(got[0], reference_uniform(0, 0, 0, (64, 40)))
    np.testing.assert_array_equal(got[1], reference_uniform(0, 1, 0, (64, 40)))
    assert got.min() >= 0.0 and got.max() < 1.0
    assert abs(got.mean() - 0.5) < 0.01


@nki.jit
def seeded(seed_in):
    out = nl.ndarray((4, 32, 16), nl.float32, buffer=nl.shared_hbm)
    nl.random_seed(seed=7)
    nl.store(out[0], value=nl.rand((32, 16)))
    nl.store(out[1], value=nl.rand((32, 16)))
    nl.random_seed(7)
    nl.store(out[2], value=nl.rand((32, 16)))        # the same seed repeats the sequence
    nl.random_seed(seed=nl.load(seed_in))             # a seed read from a tile when rand runs
    nl.store(out[3], value=nl.rand((32, 16)))
    return out


def test_random_seed_repeats_its_sequence_and_a_tile_seed_equals_the_same_integer():
    got = both_modes(seeded, np.array([[7]], dtype=np.int32))
    np.testing.assert_array_equal(got[0], reference_uniform(7, 0, 0, (32, 16)))
    np.testing.assert_array_equal(got[1], reference_uniform(7, 1, 0, (32, 16)))
    np.testing.assert_array_equal(got[2], got[0])
    np.testing.assert_array_equal(got[3], got[0])
    other = seeded(np.array([[8]], dtype=np.int32))
    np.testing.assert_array_equal(other[3], reference_uniform(8, 0, 0, (32, 16)))


@nki.jit
def per_iteration(seeds):
    out = nl.ndarray((3, 16, 8), nl.float32, buffer=nl.shared_hbm)
    again = nl.ndarray((3, 16, 8), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        nl.store(out[i], value=nl.rand((16, 8)))            # iteration i: its own values
    for j in nl.sequential_range(3):
        nl.random_seed(seed=nl.load(seeds[j]))               # the seed set inside the loop: no stream
        nl.store(again[j], value=nl.rand((16, 8)))
    return out, again


def test_rand_in_a_loop_draws_per_iteration_and_a_seed_set_in_the_loop_restarts_it():
    out, again = both_modes(per_iteration, np.array([[[5]], [[6]], [[5]]], dtype=np.int32))
    for i in range(3):
        np.testing.assert_array_equal(out[i], reference_uniform(0, 0, i, (16, 8)))
    np.testing.assert_array_equal(again[0], reference_uniform(5, 0, 0, (16, 8)))
    np.testing.assert_array_equal(again[1], reference_uniform(6, 0, 0, (16, 8)))
    np.testing.assert_array_equal(again[2], again[0])


@nki.jit
def rand_bf16():
    out = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, value=nl.rand((128, 64), dtype=nl.bfloat16))
    return out


def test_rand_rounds_once_to_its_dtype():
    import ml_dtypes
    got = both_modes(rand_bf16)
    want = reference_uniform(0, 0, 0, (128, 64)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


# ---------------------------------------------------------------- dropout

@nki.jit
def isa_dropout(x, p):
    out = nl.ndarray((2,) + x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], value=nisa.dropout(t, prob=0.3))
    nl.store(out[1], value=nisa.dropout(t, prob=nl.load(p)))
    return out


def test_nisa_dropout_zeroes_where_u_is_below_prob_and_keeps_the_rest():
    x = np.random.default_rng(1).uniform(1, 2, (128, 512)).astype(np.float32)
    p = np.zeros((128, 1), np.float32)
    p[64:] = 1.0
    got = both_modes(isa_dropout, x, p)
    u = reference_uniform(0, 0, 0, x.shape)
    np.testing.assert_array_equal(got[0], np.where(u < np.float32(0.3), 0, x))
    frac = (got[0] == 0).mean()
    assert abs(frac - 0.3) < 0.01, frac                     # 65536 draws: 5 sigma is 0.009
    np.testing.assert_array_equal(got[1][:64], x[:64])       # prob 0: every element kept
    assert (got[1][64:] == 0).all()                          # prob 1: every element dropped


@nki.jit
def nl_dropout_int(x, rate):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    r = nl.load(rate)
    nl.store(out, value=nl.dropout(nl.load(x), rate=r[:, 0]))
    return out


def test_nl_dropout_with_a_rate_tile_keeps_integer_bits():
    x = np.random.default_rng(2).integers(1, 1 << 30, (128, 256)).astype(np.int32)
    rate = np.full((128, 1), 0.5, np.float32)
    got = both_modes(nl_dropout_int, x, rate)
    u = reference_uniform(0, 0, 0, x.shape)
    np.testing.assert_array_equal(got, np.where(u < np.float32(0.5), 0, x))
    assert abs((got == 0).mean() - 0.5) < 0.01


@nki.jit
def dropout_bad_dtype(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.dropout(nl.load(x), prob=0.5, dtype=nl.float32))  # MARK-DROP-DT
    return out


@nki.jit
def rand_1d():
    out = nl.ndarray((128,), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.rand((128,)))  # MARK-RAND-1D
    return out


@nki.jit
def seed_bad():
    out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
    nl.random_seed(seed="seven")  # MARK-SEED
    nl.store(out, value=nl.rand((8, 8)))
    return out


@pytest.mark.parametrize("kernel, args, name, marker", [
    (dropout_bad_dtype, (np.zeros((8, 8), np.int32),), "dtype", "MARK-DROP-DT"),
    (rand_1d, (), "rank", "MARK-RAND-1D"),
    (seed_bad, (), "argument", "MARK-SEED"),
])
def test_random_misuse_is_an_error_at_the_line(kernel, args, name, marker):
    expect(kernel, args, errors.NkiLiteError, name, marker)
