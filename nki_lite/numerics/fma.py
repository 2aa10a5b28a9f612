"""Exactly-rounded float32 fused multiply-add, computed in float64 with round-to-odd.

``fma_f32(a, b, c)`` returns ``RNE_f32(a*b + c)`` evaluated on the exact real values, i.e. what
an IEEE-754 ``fmaf`` returns (C, ``llvm.fma.f32``), for float32 arrays (numpy broadcasting).

Why the obvious ``float32(float64(a) * b + c)`` is wrong: ``a*b`` is exact in float64 (24+24
significant bits <= 53, exponents within range), but ``p + c`` is rounded to float64 and then
rounded again to float32.  When the first rounding lands exactly on a float32 rounding midpoint
the second one breaks the tie to even although the exact value was above/below it
(example: a = 24929 * 2**-15, b = 673 * 2**-9, a*b = 1 + 2**-24, c = 2**-60: the naive result is
1.0, the fma is 1 + 2**-23).

Algorithm (the JIT implements the same steps with the same types):
1. ``p = f64(a) * f64(b)``                      exact (no rounding, no overflow, no underflow:
                                                |p| in [2**-298, 2**256] or 0)
2. ``s = p + f64(c)``                           float64, round to nearest even
3. ``t = s - p; err = (p - (s - t)) + (f64(c) - t)``   TwoSum (Knuth): ``s + err == p + c``
                                                exactly (valid: no overflow can occur)
4. round-to-odd: if ``err != 0`` and the last bit of ``s``'s significand is 0, move ``s`` one
   ulp towards ``err``: on the int64 bits, ``bits += 1`` if sign(err) == sign(s) (magnitude
   grows) else ``bits -= 1``.  ``s`` is never 0 when ``err != 0`` (p + c is a non-zero
   multiple of 2**-298, so it cannot round to 0 in float64).
   Result: ``s`` = the exact sum rounded to 53 bits with "sticky" odd last bit.
5. ``f32(s)`` (RNE).  Rounding to odd at p = 53 bits followed by rounding to nearest at
   q <= p - 2 = 51 bits equals direct rounding (Boldo & Melquiond, "Emulation of FMA and
   correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008), including
   float32 subnormal results (fewer than 24 bits) and overflow to +-inf.

Specials: steps 1-2 already follow IEEE for inf/NaN (inf*0 -> NaN, inf - inf -> NaN, x + inf ->
inf); steps 3-4 are skipped when ``s`` is not finite.  Every NaN result is returned as the
canonical quiet NaN 0x7FC00000 (input payloads are not propagated, so the result does not
depend on the platform's NaN propagation rules).  Signed zeros follow IEEE RNE: an exact zero
sum is +0 except (-0) + (-0) = -0 (e.g. fma(-0, 1, -0) = -0, fma(-0, 1, +0) = +0,
fma(1, 1, -1) = +0); a non-zero sum that underflows to zero keeps its sign.  Float64 addition
obeys the same rules, so no special code is needed for zeros.

Assumes the default floating-point environment (round-to-nearest, no FTZ/DAZ), which numpy
always runs with; FTZ cannot matter for steps 1-4 anyway since every float64 intermediate is
either 0 or >= 2**-298 in magnitude, far above float64's subnormal range, but step 5 produces
float32 subnormals and requires FTZ off.

``mul_add_f32(a, b, c)`` is the *unfused* reference: ``f32(f32(a*b) + c)``, two roundings.
"""
from __future__ import annotations

import numpy as np

__all__ = ["fma_f32", "fma_outer_chain_f32", "mul_add_f32"]

_QNAN = np.float32(np.nan)  # bits 0x7FC00000


def _f32_args(a, b, c):
    return [np.asarray(v, dtype=np.float32) for v in (a, b, c)]


def fma_f32(a, b, c) -> np.ndarray:
    """Correctly rounded float32 ``a*b + c`` (single rounding), with numpy broadcasting."""
    a, b, c = _f32_args(a, b, c)
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    a, b, c = (np.atleast_1d(v) for v in (a, b, c))     # keep ndarrays (not scalars) below
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)      # exact
        c64 = c.astype(np.float64)
        s = p + c64                                           # RNE in float64
        t = s - p
        err = (p - (s - t)) + (c64 - t)                       # TwoSum: s + err == p + c
        bits = s.view(np.int64)
        fix = np.isfinite(s) & (err != 0) & ((bits & 1) == 0)
        towards = np.where(np.signbit(err) == np.signbit(s), np.int64(1), np.int64(-1))
        s_odd = np.where(fix, bits + towards, bits).view(np.float64)   # round-to-odd
        r = s_odd.astype(np.float32)                          # single correct rounding
        r = np.where(np.isnan(r), _QNAN, r)
    return r.reshape(shape)


_F32_HALF_ULP = np.int64(1 << 28)          # a float64 whose low 29 significand bits are 1000...0 sits
_LOW29 = np.int64((1 << 29) - 1)           # exactly halfway between two float32 neighbours
_F32_NORMAL_MIN = 2.0 ** -126


def fma_outer_chain_f32(s: np.ndarray, m: np.ndarray, acc: np.ndarray, start: int = 0) -> np.ndarray:
    """`acc = fma_f32(s[k][:, None], m[k][None, :], acc)` for k = start .. K-1 (a matmul's k-chain of
    outer products), bit for bit, with fewer numpy passes per step.

    Why it is the same: p = s*m is exact in float64 and `p + acc` rounds once to float64; rounding that
    to float32 differs from the single correct rounding only when the float64 sum landed exactly on a
    float32 rounding midpoint (rounding is monotonic and every midpoint of normal float32 values is a
    float64, so the first rounding cannot cross one), or in float32's subnormal range, whose midpoints
    sit elsewhere. Those elements (rare: one float64 in 2**29 for random data) are recomputed with
    fma_f32. NaN results are canonicalised at the end, which is what canonicalising every step gives:
    a NaN stays NaN through every later step."""
    acc = np.array(acc, dtype=np.float32)
    if start >= s.shape[0]:
        return acc                        # no step ran: nothing to canonicalise either
    s64, m64 = s.astype(np.float64), m.astype(np.float64)
    with np.errstate(all="ignore"):
        for k in range(start, s.shape[0]):
            total = np.multiply.outer(s64[k], m64[k])
            total += acc
            r = total.astype(np.float32)
            bits = total.view(np.int64)
            risky = (bits & _LOW29) == _F32_HALF_ULP
            risky |= (np.abs(total) < _F32_NORMAL_MIN) & (total != 0)
            if risky.any():
                i, j = np.nonzero(risky)
                r[i, j] = fma_f32(s[k][i], m[k][j], acc[i, j])
            acc = r
        return np.where(np.isnan(acc), _QNAN, acc)


def mul_add_f32(a, b, c) -> np.ndarray:
    """Unfused float32 ``a*b + c``: the product is rounded to float32, then the sum."""
    a, b, c = _f32_args(a, b, c)
    with np.errstate(all="ignore"):
        return np.asarray(np.multiply(a, b, dtype=np.float32) + c, dtype=np.float32)
