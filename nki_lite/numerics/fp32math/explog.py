"""The exp/log family: exp, log, tanh and the functions built on e^-|x| (sigmoid, silu,
gelu_apprx_tanh, softplus, mish)."""
from __future__ import annotations

import numpy as np

from .base import (F32, I32, U32, _ABS, _HALF, _INF_BITS, _ONE, _SIGN, _TWO, _abs, _bits, _c, _clamped_abs,
    _coeffs, _finish, _finish_never_nan, _from_bits, _horner, _ldexp, _odd_poly, _prep, _saturating_odd,
    _signbit)

# exp: Cody-Waite split of ln2 (Cephes expf); LN2_HI has 9 significant bits so n*LN2_HI is exact
# for |n| < 2^15.
LOG2E = _c("1.44269504088896341")
LN2_HI = _c("0.693359375")
LN2_LO = _c("-2.12194440e-4")
# Cephes expf minimax polynomial: e^r = 1 + r + r^2 * P(r), |r| <= ln2/2
EXP_P = _coeffs("1.9875691500E-4", "1.3981999507E-3", "8.3334519073E-3",
                "4.1665795894E-2", "1.6666665459E-1", "5.0000001201E-1")
EXP_HI = _c("89.0")       # clamp: every x >= 88.7228394 overflows anyway
EXP_LO = _c("-104.0")     # clamp: every x <= -103.972 rounds to 0 anyway
NEG_CLAMP = _c("110.0")   # sigmoid/silu/softplus/mish: e^-110 * 110 < 2^-150

# log: Cephes logf, log(1+f) = f - f^2/2 + f^3 * P(f), f in [sqrt(1/2)-1, sqrt(2)-1)
SQRT2 = _c("1.41421356237309505")          # 0x3FB504F3
LOG_P = _coeffs("7.0376836292E-2", "-1.1514610310E-1", "1.1676998740E-1",
                "-1.2420140846E-1", "1.4249322787E-1", "-1.6668057665E-1",
                "2.0000714765E-1", "-2.4999993993E-1", "3.3333331174E-1")

# tanh: Cephes tanhf, tanh(x) = x + x*z*P(z) for |x| < 0.625
TANH_SMALL = _c("0.625")
TANH_CLAMP = _c("10.0")
TANH_P = _coeffs("-5.70498872745E-3", "2.06390887954E-2", "-5.37397155531E-2",
                 "1.33314422036E-1", "-3.33332819422E-1")

# gelu_apprx_tanh: x * sigmoid(x * (K1 + K2 * x^2)), K1 = 2*sqrt(2/pi), K2 = K1 * 0.044715
GELU_K1 = _c("1.59576912160573071")
GELU_K2 = _c("0.0713548162726")


def _exp_parts(a: np.ndarray, lo: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """e^(a + lo) = y * 2^n with y in [0.70, 1.42]. a finite in [-128, 89]; |lo| < 2^-10."""
    n = np.rint(a * LOG2E)
    r = a - n * LN2_HI            # exact (Sterbenz; n*LN2_HI exact)
    r = r - n * LN2_LO
    if lo is not None:
        r = r + lo
    z = r * r
    p = _horner(r, EXP_P)
    y = p * z
    y = y + r
    y = y + _ONE
    return y, n.astype(I32)


def _exp_neg_abs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """e^-min(|x|, 110) = y * 2^n (NaN -> 110). Shared by sigmoid/silu/softplus/mish/gelu_tanh."""
    a = _abs(x)
    a = np.where(a < NEG_CLAMP, a, NEG_CLAMP)
    return _exp_parts(-a)


def _log_core(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """log(m * 2^e) for m in [1, 2) (float32), e int32."""
    big = m > SQRT2
    m = np.where(big, m * _HALF, m)
    e = np.where(big, e + I32(1), e)
    f = m - _ONE                   # exact
    ef = e.astype(F32)             # exact (|e| < 2^24)
    z = f * f
    t = _horner(f, LOG_P)
    t = t * z
    y = f * t
    y = y + ef * LN2_LO
    y = y - _HALF * z
    r = f + y
    r = r + ef * LN2_HI            # ef*LN2_HI exact
    return r


def _log1p_01(u: np.ndarray) -> np.ndarray:
    """log(1 + u) for u in [0, 1] (u >= 0, finite)."""
    w = _ONE + u
    corr = u - (w - _ONE)          # exact rounding error of 1+u
    corr = corr / w
    wb = _bits(w)
    e = (wb >> U32(23)).astype(I32) - I32(127)
    m = _from_bits((wb & U32(0x007FFFFF)) | U32(0x3F800000))
    return _log_core(m, e) + corr


def _x_sigmoid(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """x * sigmoid(v) for v with the sign of x (or v = +-0)."""
    y, n = _exp_neg_abs(v)
    e = _ldexp(y, n)                # e^-|v|, may be subnormal or 0
    d = _ONE + e
    pos = x / d
    neg = x * y
    neg = neg / d
    neg = _ldexp(neg, n)
    r = np.where(_signbit(v), neg, pos)
    return np.where(v <= -NEG_CLAMP, F32(-0.0), r)


def exp(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        a = np.where(x < EXP_HI, x, EXP_HI)        # NaN -> EXP_HI (replaced at the end)
        a = np.where(a > EXP_LO, a, EXP_LO)        # (two selects a JIT lowers to one min + one max)
        y, n = _exp_parts(a)
        r = _ldexp(y, n)              # y in [0.70, 1.42], n in [-150, 128]: r in [0, inf], never NaN
        return _finish_never_nan(x, r, shape)


def log(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        u = _bits(x)
        sub = u < U32(0x00800000)                  # +0 and positive subnormals
        us = np.where(sub, _bits(u.astype(I32).astype(F32)), u)   # exact int->float
        e = (us >> U32(23)).astype(I32) - I32(127)
        e = np.where(sub, e - I32(149), e)
        m = _from_bits((us & U32(0x007FFFFF)) | U32(0x3F800000))
        r = _log_core(m, e)
        mag = u & U32(_ABS)
        r = np.where(u == U32(_INF_BITS), F32(np.inf), r)
        r = np.where(u > U32(_SIGN), F32(np.nan), r)             # x < 0 (and -NaN)
        r = np.where(mag == U32(0), F32(-np.inf), r)             # +-0
        return _finish(x, r, shape)


def tanh(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        ac = _clamped_abs(x, TANH_CLAMP)                      # NaN -> 10
        small = _odd_poly(ac, ac * ac, TANH_P)
        y, n = _exp_parts(ac + ac)
        e = _ldexp(y, n)
        d = e + _ONE
        q = _TWO / d
        return _saturating_odd(x, ac, TANH_SMALL, small, q, shape)


def sigmoid(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        y, n = _exp_neg_abs(x)
        e = _ldexp(y, n)
        d = _ONE + e
        pos = _ONE / d
        neg = _ldexp(y / d, n)
        r = np.where(_signbit(x), neg, pos)
        return _finish(x, r, shape)


def silu(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, _x_sigmoid(x, x), shape)


def silu_dx(x):
    """d/dx silu(x) = s * (1 + x * t), s = sigmoid(x), t = sigmoid(-x) = 1 - s (both from one e^-|x|, so
    t keeps its precision where s rounds to 1); x is clamped to +-110 in the product (e^-110 underflows:
    silu_dx(+inf) = 1, silu_dx(-inf) = -0)."""
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        y, n = _exp_neg_abs(x)
        e = _ldexp(y, n)
        d = _ONE + e
        pos = _ONE / d                    # sigmoid(|x|)
        neg = _ldexp(y / d, n)            # sigmoid(-|x|)
        s = np.where(_signbit(x), neg, pos)
        t = np.where(_signbit(x), pos, neg)
        xc = np.where(x > NEG_CLAMP, NEG_CLAMP, x)
        xc = np.where(xc < -NEG_CLAMP, -NEG_CLAMP, xc)
        u = xc * t
        v = _ONE + u
        return _finish(x, s * v, shape)


def gelu_apprx_tanh(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        x2 = x * x
        k = GELU_K2 * x2
        k = k + GELU_K1
        v = x * k
        return _finish(x, _x_sigmoid(x, v), shape)


def softplus(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        y, n = _exp_neg_abs(x)
        u = _ldexp(y, n)                          # e^-|x| in [0, 1]
        L = _log1p_01(u)
        r = np.where(_signbit(x), L, x + L)
        return _finish(x, r, shape)


def mish(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        y, n = _exp_neg_abs(x)
        w = _ldexp(y, n)                          # e^-|x|
        # x >= 0: tanh(softplus(x)) = (1 + 2w) / (1 + 2w + 2w^2)
        w2 = w + w
        A = _ONE + w2
        D = w2 * w
        D = A + D
        pos = A / D
        pos = x * pos
        # x < 0: tanh(softplus(x)) = w(w+2) / (w(w+2) + 2) = w / (w + 2/(w+2)),  w = y * 2^n
        b = w + _TWO
        b = _TWO / b
        d = w + b
        neg = x * y
        neg = neg / d
        neg = _ldexp(neg, n)
        r = np.where(_signbit(x), neg, pos)
        r = np.where(x <= -NEG_CLAMP, F32(-0.0), r)
        return _finish(x, r, shape)
