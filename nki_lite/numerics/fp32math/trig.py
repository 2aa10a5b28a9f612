"""sin, cos, tan (Cody-Waite reduction by pi/2) and arctan."""
from __future__ import annotations

import numpy as np

from .base import (F32, U32, _HALF, _INF_BITS, _ONE, _SIGN, _TWO, _ZERO, _abs, _bits, _c, _coeffs,
    _copysign_bits, _finish, _from_bits, _horner, _odd_poly, _prep)

# sin / cos / tan: Cody-Waite reduction by pi/2 in six parts; PIO2_1..5 have 8 significant bits
# each, so j * PIO2_k is exact for j < 2^16 (|x| <= 102943); the parts sum to pi/2 within 1e-22.
TWO_OVER_PI = _c("0.636619772367581343")
PIO2_1 = _c("1.5703125")                    # 0x3FC90000
PIO2_2 = _c("0.000484466552734375")         # 0x39FE0000
PIO2_3 = _c("-6.407499313354492e-07")       # 0xB52C0000
PIO2_4 = _c("9.89530235528946e-10")         # 0x30880000
PIO2_5 = _c("2.5579538487363607e-12")       # 0x2C340000
PIO2_6 = _c("5.390302953474238e-15")        # 0x27C234C5
QUARTER, FOUR = _c("0.25"), _c("4.0")
# Cephes sinf/cosf polynomials on [-pi/4, pi/4]
SIN_P = _coeffs("-1.9515295891E-4", "8.3321608736E-3", "-1.6666654611E-1")
COS_P = _coeffs("2.443315711809948E-5", "-1.388731625493765E-3", "4.166664568298827E-2")
# Cephes tanf polynomial on [-pi/4, pi/4]
TAN_P = _coeffs("9.38540185543E-3", "3.11992232697E-3", "2.44301354525E-2",
                "5.34112807005E-2", "1.33387994085E-1", "3.33331568548E-1")

# arctan: Cephes atanf
TAN3PI8 = _c("2.414213562373095")
TANPI8 = _c("0.4142135623730950")
PIO2_HI = _c("1.57079632679489661923")      # 0x3FC90FDB
PIO2_LO = _c("-4.37113900018624283e-8")     # pi/2 - PIO2_HI
PIO4_HI = _c("0.785398163397448309616")     # 0x3F490FDB
PIO4_LO = _c("-2.18556950009312142e-8")     # pi/4 - PIO4_HI
ATAN_P = _coeffs("8.05374449538e-2", "-1.38776856032E-1", "1.99777106478E-1",
                 "-3.33329491539E-1")


def _sincos_reduce(x: np.ndarray):
    """|x| = j*pi/2 + r, r in ~[-pi/4, pi/4]; returns (r, q = j mod 4 as float, finite mask)."""
    a = _abs(x)
    finite = _bits(a) < U32(_INF_BITS)
    a = np.where(finite, a, _ZERO)
    j = np.rint(a * TWO_OVER_PI)
    r = a - j * PIO2_1              # exact (Sterbenz; j*PIO2_1 exact)
    r = r - j * PIO2_2              # exact for |x| <= 102943
    r = r - j * PIO2_3
    r = r - j * PIO2_4
    t = j * PIO2_5
    t = t + j * PIO2_6
    r = r - t
    r = np.where(r < _ONE, r, _ONE)            # only active beyond |x| > 102943 (no accuracy)
    r = np.where(r > -_ONE, r, -_ONE)
    q = j * QUARTER
    q = np.floor(q)
    q = q * FOUR
    q = j - q
    return r, q, finite


def _cos_poly(z):
    c = _horner(z, COS_P)
    c = c * z
    c = c * z
    c = c - _HALF * z
    return c + _ONE


def _reduced(x, value, odd: bool):
    """sin / cos / tan: `value(r, z, q)` of x reduced to r (z = r*r) in quadrant q; an odd function
    takes x's sign bit (so sin(-0) = -0); non-finite x gives NaN."""
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r, q, finite = _sincos_reduce(x)
        res = value(r, r * r, q)
        if odd:
            res = _from_bits(_bits(res) ^ (_bits(x) & U32(_SIGN)))
        res = np.where(finite, res, F32(np.nan))
        return _finish(x, res, shape)


def _sin_q(r, z, q):
    s, c = _odd_poly(r, z, SIN_P), _cos_poly(z)
    return np.where(q == _ZERO, s, np.where(q == _ONE, c, np.where(q == _TWO, -s, -c)))


def _cos_q(r, z, q):
    s, c = _odd_poly(r, z, SIN_P), _cos_poly(z)
    return np.where(q == _ZERO, c, np.where(q == _ONE, -s, np.where(q == _TWO, -c, s)))


def _tan_q(r, z, q):
    t = _odd_poly(r, z, TAN_P)
    odd = (q == _ONE) | (q == F32(3.0))
    return np.where(odd, F32(-1.0) / t, t)


def sin(x):
    return _reduced(x, _sin_q, odd=True)


def cos(x):
    return _reduced(x, _cos_q, odd=False)


def tan(x):
    return _reduced(x, _tan_q, odd=True)


def arctan(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        a = _abs(x)
        big = a > TAN3PI8
        mid = a > TANPI8
        u_big = F32(-1.0) / a
        u_mid = (a - _ONE) / (a + _ONE)
        u = np.where(big, u_big, np.where(mid, u_mid, a))
        hi = np.where(big, PIO2_HI, np.where(mid, PIO4_HI, _ZERO))
        lo = np.where(big, PIO2_LO, np.where(mid, PIO4_LO, _ZERO))
        z = u * u
        p = _odd_poly(u, z, ATAN_P)
        r = lo + p
        r = hi + r
        return _finish(x, _copysign_bits(r, x), shape)
