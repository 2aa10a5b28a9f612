"""erf and the exact gelu: fitted piecewise polynomials times e^(-x^2) (or e^(-x^2/2)) with the
square split exactly (Veltkamp) so the exponent is accurate."""
from __future__ import annotations

import numpy as np

from .base import (F32, _HALF, _ONE, _c, _clamped_abs, _coeffs, _finish, _horner, _ldexp, _prep,
    _saturating_odd, _signbit)
from .explog import _exp_parts

# erf / erfc: fitted for nki_lite (weighted-Lawson minimax in float64, coefficients rounded to
# float32 highest degree first with the lower ones refitted; see the doc).
# erf(x) = x + x*Q(x^2) on |x| < 1
ERF_SMALL = _coeffs("7.853823626646772e-05", "-0.0008010183228179812", "0.005188326817005873",
                    "-0.026853810995817184", "0.1128358468413353", "-0.3761262595653534",
                    "0.12837916612625122")
ERF_CLAMP = _c("4.0")     # erf(x) rounds to 1 for x >= 3.92
# R(y) = erfc(y) * exp(y^2) for y >= 1: degree-9 pieces in s = y - centre on [1,2) and [2,3)
ERFC_R1 = _coeffs("-7.653969805687666e-05", "0.00023810728453099728", "-0.0006612868746742606",
                  "0.001882868935354054", "-0.005145980976521969", "0.013377632945775986",
                  "-0.03293090686202049", "0.07615102827548981", "-0.1636229157447815",
                  "0.32158541679382324")
ERFC_R2 = _coeffs("-4.374493528302992e-06", "1.6656955267535523e-05", "-5.883862468181178e-05",
                  "0.0002108666958520189", "-0.0007335928385145962", "0.002467050449922681",
                  "-0.008001569658517838", "0.02493799664080143", "-0.0743473470211029",
                  "0.21080636978149414")
# ... and y >= 3: y * R(y) = A(1/y^2), degree 6
ERFC_ASYM = _coeffs("13.390830039978027", "-8.728646278381348", "3.1701126098632812",
                    "-1.0360324382781982", "0.422635942697525", "-0.2820889353752136",
                    "0.5641895532608032")
ERFC_C1, ERFC_C2 = _c("1.5"), _c("2.5")
ERF_ONE, ERF_TWO, ERF_THREE = _c("1.0"), _c("2.0"), _c("3.0")
VELTKAMP = _c("4097.0")   # 2^12 + 1: splits a float32 into 12 + 11 significant bits

# gelu: G(u) = Phi(-u) * exp(u^2/2) (u = |x|), degree-9 pieces in s = u - centre on [0,1.5),
# [1.5,3), [3,4.5); for u >= 4.5: u * G(u) = S(1/u^2), degree 5. Fitted like erf.
GELU_G0 = _coeffs("-5.1434235501801595e-05", "0.00018568336963653564", "-0.0005524827865883708",
                  "0.0017358475597575307", "-0.005182694643735886", "0.014361927285790443",
                  "-0.03668440133333206", "0.08495312184095383", "-0.17376792430877686",
                  "0.300232470035553")
GELU_G1 = _coeffs("-1.279776256524201e-06", "5.745790076616686e-06", "-2.2915000954526477e-05",
                  "9.430896170670167e-05", "-0.00037322190473787487", "0.0014067862648516893",
                  "-0.005031280219554901", "0.016947366297245026", "-0.05322542041540146",
                  "0.15365193784236908")
GELU_G2 = _coeffs("-6.595078616555838e-08", "3.65933829016285e-07", "-1.880790364339191e-06",
                  "9.847116416494828e-06", "-5.01302674820181e-05", "0.00024712036247365177",
                  "-0.0011773458682000637", "0.005403521936386824", "-0.023795243352651596",
                  "0.10003920644521713")
GELU_ASYM = _coeffs("-101.67323303222656", "30.030498504638672", "-5.689319610595703",
                    "1.1929117441177368", "-0.3989178538322449", "0.398942232131958")
GELU_C0, GELU_C1, GELU_C2 = _c("0.75"), _c("2.25"), _c("3.75")
GELU_B1, GELU_B2, GELU_B3 = _c("1.5"), _c("3.0"), _c("4.5")
GELU_CLAMP = _c("16.0")   # results round to -0 below x = -14.36 and to x above x = 5.42


def _split_square(a: np.ndarray):
    """a*a = A + B + C exactly (Veltkamp split, 0 <= a <= 16): A=ah*ah, B=2*ah*al, C=al*al."""
    c = a * VELTKAMP
    ah = c - (c - a)
    al = a - ah
    A = ah * ah
    B = ah * al
    B = B + B
    C = al * al
    return A, B, C


def _two_sum_hi_lo(A, B, C):
    """hi + lo ~= A + B + C with |B| <= |A|: hi = A + B, lo = ((A - hi) + B) + C."""
    hi = A + B
    lo = A - hi
    lo = lo + B
    lo = lo + C
    return hi, lo


def _erfc_r(y: np.ndarray) -> np.ndarray:
    """R(y) = erfc(y) * exp(y^2) for finite y >= 1 (lanes with y < 1 are computed, unused)."""
    p1 = y < ERF_TWO
    s = y - np.where(p1, ERFC_C1, ERFC_C2)
    poly = _horner(s, [np.where(p1, c1, c2) for c1, c2 in zip(ERFC_R1, ERFC_R2)])
    ya = np.where(y < ERF_THREE, ERF_THREE, y)
    u = ya * ya
    u = _ONE / u
    asym = _horner(u, ERFC_ASYM)
    asym = asym / ya
    return np.where(y < ERF_THREE, poly, asym)


def erf(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        ac = _clamped_abs(x, ERF_CLAMP)                       # NaN -> 4
        z = ac * ac
        q = _horner(z, ERF_SMALL)
        q = ac * q
        small = ac + q
        A, B, C = _split_square(ac)
        hi, lo = _two_sum_hi_lo(A, B, C)
        y, n = _exp_parts(-hi, -lo)
        R = _erfc_r(ac)
        c = R * y
        c = _ldexp(c, n)
        return _saturating_odd(x, ac, ERF_ONE, small, c, shape)


def gelu(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        u = _clamped_abs(x, GELU_CLAMP)                       # NaN -> 16
        A, B, C = _split_square(u)                            # u^2 = A + B + C exactly
        A, B, C = A * _HALF, B * _HALF, C * _HALF
        hi, lo = _two_sum_hi_lo(A, B, C)
        y, n = _exp_parts(-hi, -lo)                          # e^(-u^2/2) = y * 2^n
        # G(u) = Phi(-u) e^(u^2/2): piecewise polynomial (u < 4.5) or S(1/u^2)/u
        p0 = u < GELU_B1
        p1 = u < GELU_B2
        s = u - np.where(p0, GELU_C0, np.where(p1, GELU_C1, GELU_C2))
        g = _horner(s, [np.where(p0, c0, np.where(p1, c1, c2))
                        for c0, c1, c2 in zip(GELU_G0, GELU_G1, GELU_G2)])
        poly = u < GELU_B3
        ua = np.where(poly, GELU_B3, u)
        w = ua * ua
        w = _ONE / w
        S = _horner(w, GELU_ASYM)                             # u * G(u) for u >= 4.5
        # x < 0: gelu = x * Phi(-u) = ((x*G) * y) * 2^n, with x*G = -S in the asymptotic range
        xg = np.where(poly, x * g, -S)
        neg = xg * y
        neg = _ldexp(neg, n)
        # x >= 0: gelu = x * (1 - Phi(-u)) = x * (1 - (G * y) * 2^n)
        g = np.where(poly, g, S / ua)
        c = g * y
        c = _ldexp(c, n)
        c = _ONE - c
        pos = x * c
        r = np.where(_signbit(x), neg, pos)
        r = np.where(x < -GELU_CLAMP, F32(-0.0), r)
        return _finish(x, r, shape)
