"""nki_lite.numerics.fma: exactly-rounded float32 FMA vs an exact rational reference.

Python 3.11 has no math.fma, so the reference computes a*b + c exactly with fractions.Fraction
and rounds it to float32 (round half to even) by hand; non-finite inputs follow the IEEE rules,
written out explicitly.
"""
from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nki_lite.numerics.fma import fma_f32, mul_add_f32

SLOW = os.environ.get("NKI_LITE_SLOW_TESTS") == "1"
F32_MAX_EXP = 128   # 2**128 is the first power of two above float32's range


# ------------------------------------------------------------------------------- reference
def round_fraction_to_f32(q: Fraction, negative_zero: bool = False) -> np.float32:
    """Exact rational -> float32, round to nearest, ties to even, gradual underflow, overflow
    to +-inf.  A zero result takes the sign of q (or `negative_zero` if q == 0)."""
    if q == 0:
        return np.float32(-0.0 if negative_zero else 0.0)
    neg = q < 0
    q = -q if neg else q
    e = q.numerator.bit_length() - q.denominator.bit_length()   # 2**e <= q < 2**(e+2)
    if Fraction(2) ** e > q:
        e -= 1
    if Fraction(2) ** (e + 1) <= q:
        e += 1
    assert Fraction(2) ** e <= q < Fraction(2) ** (e + 1)
    ulp = Fraction(2) ** (max(e, -126) - 23)
    m = round(q / ulp)                  # Fraction.__round__: half to even
    v = m * ulp
    if v >= Fraction(2) ** F32_MAX_EXP:
        r = np.float32(np.inf)
    else:
        r = np.float32(float(v))        # v is a float32 value: float() and np.float32 exact
        assert Fraction(float(r)) == v
    return -r if neg else r


def fma_reference(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    fa, fb, fc = float(a), float(b), float(c)
    if math.isnan(fa) or math.isnan(fb) or math.isnan(fc):
        return np.float32(np.nan)
    if math.isinf(fa) or math.isinf(fb):
        if fa == 0 or fb == 0:
            return np.float32(np.nan)                         # inf * 0
        prod_neg = (math.copysign(1, fa) < 0) != (math.copysign(1, fb) < 0)
        if math.isinf(fc) and (fc < 0) != prod_neg:
            return np.float32(np.nan)                         # inf - inf
        return np.float32(-np.inf if prod_neg else np.inf)
    if math.isinf(fc):
        return np.float32(fc)
    q = Fraction(fa) * Fraction(fb) + Fraction(fc)
    prod_neg = (math.copysign(1, fa) < 0) != (math.copysign(1, fb) < 0)
    both_neg_zero = (fa == 0 or fb == 0) and fc == 0 and prod_neg and math.copysign(1, fc) < 0
    return round_fraction_to_f32(q, negative_zero=both_neg_zero)


def f32bits(x) -> np.ndarray:
    return np.array(x, dtype=np.float32, order="C", copy=True).view(np.uint32)


def check_against_reference(a, b, c):
    a, b, c = (np.asarray(v, np.float32).ravel() for v in (a, b, c))
    got = fma_f32(a, b, c)
    want = np.array([fma_reference(x, y, z) for x, y, z in zip(a, b, c)], np.float32)
    nan_w = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan_w)
    assert np.all(f32bits(got[nan_w]) == 0x7FC00000)              # canonical NaN
    bad = np.nonzero(f32bits(got[~nan_w]) != f32bits(want[~nan_w]))[0]
    if len(bad):
        i = np.nonzero(~nan_w)[0][bad[:5]]
        pytest.fail(f"{len(bad)} mismatches, e.g. " + "; ".join(
            f"fma({a[k]!r}, {b[k]!r}, {c[k]!r}) = {got[k]!r}, want {want[k]!r}" for k in i))
    return got, want


def naive(a, b, c):
    """The double-rounding shortcut fma_f32 must NOT be equal to."""
    a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
    with np.errstate(all="ignore"):
        return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def test_reference_rounding_matches_numpy_f64_to_f32():
    """Self-check of round_fraction_to_f32: float64 -> float32 (one RNE rounding by numpy)."""
    rng = np.random.default_rng(0)
    u = rng.integers(0, 1 << 64, size=4000, dtype=np.uint64)
    e = rng.integers(1023 - 160, 1023 + 132, size=4000, dtype=np.uint64)
    x = ((u & np.uint64(0x800FFFFFFFFFFFFF)) | (e << np.uint64(52))).view(np.float64)
    # add exact float32 midpoints (ties) too
    y = np.array([1 + 2**-24, 1 + 3 * 2**-24, 2.0**-150, 3 * 2.0**-150, (2 - 2**-24) * 2.0**127])
    x = np.concatenate([x, y, -y])
    with np.errstate(over="ignore"):
        want = x.astype(np.float32)
    got = np.array([round_fraction_to_f32(Fraction(v)) for v in x], np.float32)
    assert np.array_equal(f32bits(got), f32bits(want))


# ---------------------------------------------------------------------- hand-constructed cases
def test_double_rounding_case_is_fixed():
    # a*b = (97*257) * 673 * 2**-24 = (2**24 + 1) * 2**-24 = 1 + 2**-24: an exact float32
    # midpoint between 1 and 1 + 2**-23.  c = 2**-60 pushes the exact sum just above it.
    a, b, c = np.float32(24929 * 2.0**-15), np.float32(673 * 2.0**-9), np.float32(2.0**-60)
    assert Fraction(float(a)) * Fraction(float(b)) == 1 + Fraction(1, 2**24)
    assert float(naive(a, b, c)) == 1.0                     # f64 rounds onto the midpoint, tie->even
    assert float(fma_f32(a, b, c)) == 1 + 2.0**-23          # true fma: just above the midpoint
    assert float(mul_add_f32(a, b, c)) == 1.0               # unfused: a*b rounds to 1, + tiny
    check_against_reference(a, b, c)
    # mirrored: exact just below the midpoint 1 + 3*2**-24 whose even neighbour is above
    a2, b2 = np.float32(1549 * 2.0**-11), np.float32((2**24 + 3) // 1549 * 2.0**-13)
    assert Fraction(float(a2)) * Fraction(float(b2)) == 1 + Fraction(3, 2**24)
    c2 = np.float32(-(2.0**-60))
    assert float(naive(a2, b2, c2)) == 1 + 2.0**-22
    assert float(fma_f32(a2, b2, c2)) == 1 + 2.0**-23
    check_against_reference(a2, b2, c2)
    # negative mirror of the first case
    assert float(fma_f32(-a, b, -c)) == -(1 + 2.0**-23)


def test_signed_zeros():
    pz, nz = np.float32(0.0), np.float32(-0.0)
    cases = [  # a, b, c, expected sign bit of the zero result
        (nz, 1, pz, 0), (nz, 1, nz, 1), (pz, 1, nz, 0), (pz, -1, nz, 1), (nz, -1, nz, 0),
        (pz, 1, pz, 0), (1, 1, -1, 0), (-1, 1, 1, 0), (2, 3, -6, 0), (-2, 3, 6, 0),
        (1e-30, 1e-30, nz, 0), (-1e-30, 1e-30, pz, 1), (-1e-30, 1e-30, nz, 1),  # underflow
        (nz, np.float32(3e38), nz, 1),
    ]
    for a, b, c, sb in cases:
        r = fma_f32(a, b, c)
        assert float(r) == 0.0 and int(f32bits(r)) >> 31 == sb, (a, b, c, r)
        check_against_reference(a, b, c)


def test_specials():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    snan = np.array([0x7F800001], np.uint32).view(np.float32)[0]
    neg_nan = np.array([0xFFC01234], np.uint32).view(np.float32)[0]
    nan_cases = [(inf, 0, 1), (0, -inf, 1), (inf, 1, -inf), (-inf, 1, inf), (inf, -inf, inf),
                 (nan, 1, 1), (1, nan, 1), (1, 1, nan), (snan, 1, 1), (neg_nan, 2, 3),
                 (inf, 0, nan), (0, 0, nan)]
    for a, b, c in nan_cases:
        r = fma_f32(a, b, c)
        assert int(f32bits(r)) == 0x7FC00000, (a, b, c)
    inf_cases = [((inf, 2, 1), np.inf), ((inf, -2, 1), -np.inf), ((1, 1, -inf), -np.inf),
                 ((-inf, -1, inf), np.inf), ((3e38, 3e38, 0), np.inf), ((3e38, -3e38, 0), -np.inf),
                 ((np.float32(3.4e38), 1, np.float32(3.4e38)), np.inf),
                 ((np.float32(1e30), np.float32(1e30), -inf), -np.inf)]
    for (a, b, c), want in inf_cases:
        assert float(fma_f32(a, b, c)) == want, (a, b, c)
    # a*b = 2**200 is finite in float64: finite + -inf = -inf (not NaN)
    assert float(fma_f32(np.float32(2.0**100), np.float32(2.0**100), -inf)) == -np.inf
    # large product cancelled back into range (a*b overflows float32, not float64)
    big = np.float32(3.0e38)
    r = fma_f32(np.float32(2.0**64), np.float32(2.0**64), -big)      # 2**128 - 3e38 < max
    check_against_reference(np.float32(2.0**64), np.float32(2.0**64), -big)
    assert np.isfinite(r)
    # overflow threshold: exact (2 - 2**-24) * 2**127 rounds to inf; a hair below -> max
    thr = (2 - 2.0**-24) * 2.0**127
    a, b = np.float32(2.0**64), np.float32((2 - 2.0**-23) * 2.0**63)
    c_hi = np.float32(thr - float(a) * float(b))
    assert Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c_hi)) == Fraction(thr)
    assert float(fma_f32(a, b, c_hi)) == np.inf
    c_lo = np.nextafter(c_hi, np.float32(0))
    assert float(fma_f32(a, b, c_lo)) == float(np.finfo(np.float32).max)
    check_against_reference([a, a], [b, b], [c_hi, c_lo])


def test_subnormal_results():
    tiny = np.float32(2.0**-149)
    cases = [(np.float32(2.0**-75), np.float32(2.0**-75), np.float32(0)),          # 2**-150: tie -> 0
             (np.float32(3 * 2.0**-76), np.float32(2.0**-74), np.float32(0)),      # 1.5 * 2**-149 -> 2 ulps
             (np.float32(2.0**-75), np.float32(2.0**-75), tiny),                   # 1.5 ulps -> 2
             (np.float32(2.0**-75), np.float32(-(2.0**-75)), tiny),                # 0.5 ulp tie -> 0
             (np.float32(1.5), np.float32(2.0**-126), -np.float32(2.0**-126)),     # 2**-127 exact
             (np.float32(1 + 2.0**-23), np.float32(2.0**-127), np.float32(2.0**-149))]
    for a, b, c in cases:
        check_against_reference(a, b, c)
    assert float(fma_f32(*cases[0])) == 0.0
    assert float(fma_f32(*cases[1])) == 2.0**-148
    assert float(fma_f32(*cases[3])) == 0.0 and int(f32bits(fma_f32(*cases[3]))) == 0


def test_broadcasting_and_types():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = fma_f32(a, np.float32(2), np.array([1, 2, 3], np.float32))
    assert r.shape == (2, 3) and r.dtype == np.float32
    assert np.array_equal(r, a * 2 + np.array([1, 2, 3], np.float32))
    r0 = fma_f32(np.float32(2), np.float32(3), np.float32(4))
    assert r0.shape == () and r0.dtype == np.float32 and float(r0) == 10.0
    assert fma_f32(a.T, a.T, a.T).shape == (3, 2)
    assert fma_f32(a[:, ::-1], 1, 0).tolist() == a[:, ::-1].tolist()
    m = mul_add_f32(a, np.float32(2), np.float32(1))
    assert m.dtype == np.float32 and m.shape == (2, 3)
    assert fma_f32(np.zeros((0, 3), np.float32), 1, 1).shape == (0, 3)


# ------------------------------------------------------------------------------ random triples
def _rand_f32(rng, n, emin, emax):
    e = rng.integers(emin + 127, emax + 127 + 1, size=n, dtype=np.int64).astype(np.uint32)
    m = rng.integers(0, 1 << 23, size=n, dtype=np.int64).astype(np.uint32)
    s = rng.integers(0, 2, size=n, dtype=np.int64).astype(np.uint32) << np.uint32(31)
    return (s | (e << np.uint32(23)) | m).view(np.float32)


def random_triples(seed: int, n: int):
    """a, b, c float32 arrays; 6 categories of n triples each."""
    rng = np.random.default_rng(seed)
    A, B, C = [], [], []

    def add(a, b, c):
        A.append(np.asarray(a, np.float32)), B.append(np.asarray(b, np.float32))
        C.append(np.asarray(c, np.float32))

    # 1. generic, overlapping magnitudes
    a, b = _rand_f32(rng, n, -20, 20), _rand_f32(rng, n, -20, 20)
    add(a, b, _rand_f32(rng, n, -40, 40))
    # 2. near ties: c chosen so that a*b + c lands near a float32 midpoint
    a, b = _rand_f32(rng, n, -30, 30), _rand_f32(rng, n, -30, 30)
    p = a.astype(np.float64) * b.astype(np.float64)
    v = p.astype(np.float32)
    half = np.spacing(np.abs(v)).astype(np.float64) / 2 * rng.choice([-1.0, 1.0], n)
    c = ((v.astype(np.float64) + half) - p).astype(np.float32)        # m - p is exact in f64
    k = rng.integers(-2, 3, size=n)
    c = np.where(k > 0, np.nextafter(c, np.float32(np.inf)), np.where(k < 0, np.nextafter(c, -np.float32(np.inf)), c))
    add(a, b, c)
    # 3. products that are exactly float32 midpoints (25 significant bits), c tiny:
    #    the double-rounding trap (f64 rounds p + c onto the midpoint)
    x = rng.integers(1 << 11, 1 << 12, size=4 * n) | 1
    y = rng.integers(1 << 12, 1 << 13, size=4 * n) | 1
    sel = (x * y) >= (1 << 24)
    x, y = x[sel][:n], y[sel][:n]
    m = len(x)
    ea, eb = rng.integers(-40, 20, size=m), rng.integers(-40, 20, size=m)
    a = np.ldexp(x.astype(np.float64), ea).astype(np.float32)
    b = np.ldexp(y.astype(np.float64), eb).astype(np.float32) * rng.choice([-1, 1], m).astype(np.float32)
    p = a.astype(np.float64) * b.astype(np.float64)
    pe = np.frexp(p)[1]
    c = (np.ldexp(rng.uniform(0.5, 1.0, m), pe - rng.integers(55, 80, size=m)) *
         rng.choice([-1.0, 1.0], m)).astype(np.float32)
    add(a, b, c)
    # 4. cancellation: c = -round(a*b) (+- a few ulps)
    a, b = _rand_f32(rng, n, -60, 60), _rand_f32(rng, n, -60, 60)
    c = -(a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)
    k = rng.integers(-3, 4, size=n)
    for step in range(3):
        c = np.where(k > step, np.nextafter(c, np.float32(np.inf)), c)
        c = np.where(k < -step, np.nextafter(c, -np.float32(np.inf)), c)
    add(a, b, c)
    # 5. subnormal / underflow region
    a, b = _rand_f32(rng, n, -80, -60), _rand_f32(rng, n, -80, -60)
    sub = (rng.integers(0, 1 << 23, size=n, dtype=np.int64).astype(np.uint32)
           | (rng.integers(0, 2, size=n, dtype=np.int64).astype(np.uint32) << np.uint32(31))).view(np.float32)
    add(a, b, np.where(rng.random(n) < 0.5, sub, _rand_f32(rng, n, -130, -120)))
    # 6. overflow region
    a, b = _rand_f32(rng, n, 60, 66), _rand_f32(rng, n, 60, 66)
    add(a, b, _rand_f32(rng, n, 120, 127))
    return np.concatenate(A), np.concatenate(B), np.concatenate(C)


def test_random_triples_vs_fraction_reference():
    a, b, c = random_triples(seed=42, n=700)
    got, want = check_against_reference(a, b, c)
    # the generator must actually exercise the double-rounding trap and the unfused difference
    nv = naive(a, b, c)
    fin = np.isfinite(want)
    assert np.count_nonzero(f32bits(nv[fin]) != f32bits(want[fin])) >= 50
    ma = mul_add_f32(a, b, c)
    assert np.count_nonzero(f32bits(ma[fin]) != f32bits(want[fin])) >= 500


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="slow profile: set NKI_LITE_SLOW_TESTS=1")
def test_many_random_triples_vs_fraction_reference():
    for seed in range(10):
        check_against_reference(*random_triples(seed=1000 + seed, n=5000))


def test_mul_add_is_two_float32_roundings():
    a, b, c = random_triples(seed=3, n=100)
    got = mul_add_f32(a, b, c)
    for x, y, z, g in zip(a, b, c, got):
        p = round_fraction_to_f32(Fraction(float(x)) * Fraction(float(y)))   # first rounding
        if not (np.isfinite(p) and np.isfinite(z)):
            assert not np.isfinite(g)
            continue
        neg0 = float(p) == 0 and float(z) == 0 and math.copysign(1, float(p)) < 0 \
            and math.copysign(1, float(z)) < 0
        w = round_fraction_to_f32(Fraction(float(p)) + Fraction(float(z)), negative_zero=neg0)
        assert int(f32bits(g)) == int(f32bits(w)), (x, y, z, g, w)


# ---------------------------------------------------------------------------- property test
_bitpattern = st.integers(0, 2**32 - 1).map(lambda u: np.array([u], np.uint32).view(np.float32)[0])
_f32 = st.one_of(_bitpattern, st.floats(width=32, allow_nan=True, allow_infinity=True)
                 .map(np.float32))


@settings(max_examples=500, deadline=None, database=None)
@given(_f32, _f32, _f32)
def test_property_fma_matches_exact_rounding(a, b, c):
    check_against_reference(a, b, c)
