"""nki_lite's fp32 transcendental functions: each function here *is* the definition of the op.

Contract (docs/numerics_transcendentals.md has the algorithms, accuracy and op sequences):

- Every function takes a float32 ndarray (any shape, any strides; other dtypes raise TypeError)
  and returns a new C-contiguous float32 ndarray of the same shape.
- Every arithmetic step is one IEEE binary32 operation with round-to-nearest-even: + - * /,
  sqrt, rint (round half to even), floor, comparisons and selects, integer ops on the bit
  pattern, exact int<->float conversions, and multiplication by exact powers of two built from
  bits. No float64, no libm call, no fused multiply-add (a JIT must not contract a*b+c).
  The LLVM JIT re-implements exactly the same sequence and must produce identical bits (it does
  so by tracing these functions with symbolic values, lower/llvm/mathlib.py: keep to the numpy
  surface that tracer supports - operators, np.where/rint/floor/trunc/sqrt/full_like, astype,
  view).
- Every path is computed for every element and the result is chosen with selects (no
  data-dependent branching). Lanes that a select will discard are kept finite where that is
  cheap (inputs are clamped/sanitised first), and every float->int conversion sees an in-range
  integral value.
- NaN: a NaN input gives the canonical quiet NaN with the input's sign (0x7FC00000 | sign);
  a NaN produced from a non-NaN input (log(-1), sqrt(-1), sin(inf), ...) is +0x7FC00000.
  `abs` is the one exception: abs(NaN) is +0x7FC00000 (the sign is cleared like every other
  abs result).
- Overflow gives +-inf; results that are subnormal are produced by gradual underflow with a
  single final rounding. The definition assumes FTZ/DAZ off; a flush could only change results
  that are subnormal or that come from a subnormal input used directly (1/x, tanh(1e-40)), never
  a normal result through an intermediate subnormal (the doc lists where subnormals appear).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = [
    "exp", "log", "tanh", "sigmoid", "gelu", "gelu_apprx_tanh", "silu", "softplus", "mish",
    "erf", "sin", "cos", "tan", "arctan", "rsqrt", "reciprocal", "sqrt", "square", "sign",
    "relu", "abs", "FUNCTIONS",
]

F32 = np.float32
U32 = np.uint32
I32 = np.int32


def _c(dec: str) -> np.float32:
    """A constant: the float32 nearest to the decimal string (correctly rounded parse)."""
    return F32(dec)


def _coeffs(*decs: str) -> tuple:
    return tuple(F32(d) for d in decs)


_ZERO, _HALF, _ONE, _TWO = F32(0.0), F32(0.5), F32(1.0), F32(2.0)
_SIGN = 0x80000000
_ABS = 0x7FFFFFFF
_QNAN = 0x7FC00000
_INF_BITS = 0x7F800000

# ---------------------------------------------------------------------------------------------
# Constants (hex bit patterns are listed in docs/numerics_transcendentals.md)
# ---------------------------------------------------------------------------------------------
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

# gelu_apprx_tanh: x * sigmoid(x * (K1 + K2 * x^2)), K1 = 2*sqrt(2/pi), K2 = K1 * 0.044715
GELU_K1 = _c("1.59576912160573071")
GELU_K2 = _c("0.0713548162726")

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


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def _prep(x) -> tuple[np.ndarray, tuple]:
    if getattr(x, "_nkl_symbolic", False):      # lower/llvm/mathlib.py traces these functions into IR
        return x, x.shape
    a = np.asarray(x)
    if a.dtype != np.float32:
        raise TypeError(f"fp32math functions take float32 arrays, got {a.dtype}")
    return np.ascontiguousarray(a).reshape(-1), a.shape


def _bits(x: np.ndarray) -> np.ndarray:
    assert x.dtype == F32, x.dtype          # an upcast anywhere upstream would stop here
    return x.view(U32)


def _from_bits(u: np.ndarray) -> np.ndarray:
    assert u.dtype == U32, u.dtype
    return u.view(F32)


def _nan_of(x: np.ndarray) -> np.ndarray:
    """Bits of the NaN a NaN input gives: sign | 0x7FC00000. A JIT caller that turns every NaN into
    +0x7FC00000 anyway asks its tracer for that directly (lower/llvm/mathlib.py, canonical=True)."""
    if getattr(x, "nkl_canonical_nan", False):
        return U32(_QNAN)
    return (_bits(x) & U32(_SIGN)) | U32(_QNAN)


def _finish(x: np.ndarray, r: np.ndarray, shape: tuple) -> np.ndarray:
    """NaN canonicalisation: NaN input -> sign|0x7FC00000, other NaN -> 0x7FC00000."""
    rb = _bits(r)
    out = np.where(x != x, _nan_of(x), np.where((rb & U32(_ABS)) > U32(_INF_BITS), U32(_QNAN), rb))
    return _from_bits(out).reshape(shape)


def _finish_never_nan(x: np.ndarray, r: np.ndarray, shape: tuple) -> np.ndarray:
    """`_finish` for a result r that cannot be NaN when x is not (so its second select is the
    identity and is left out): NaN input -> sign|0x7FC00000, else r."""
    out = np.where(x != x, _nan_of(x), _bits(r))
    return _from_bits(out).reshape(shape)


def _abs(x: np.ndarray) -> np.ndarray:
    return _from_bits(_bits(x) & U32(_ABS))


def _signbit(x: np.ndarray) -> np.ndarray:
    """True where the sign bit is set (bit test: independent of DAZ, true for -0 and -NaN)."""
    return (_bits(x) >> U32(31)) != U32(0)


def _copysign_bits(mag: np.ndarray, x: np.ndarray) -> np.ndarray:
    """mag (sign bit clear) with the sign bit of x."""
    return _from_bits(_bits(mag) | (_bits(x) & U32(_SIGN)))


def _horner(t: np.ndarray, coeffs) -> np.ndarray:
    """((c0*t + c1)*t + c2)*t + ... , coefficients highest degree first."""
    acc = coeffs[0] * t
    acc = acc + coeffs[1]
    for c in coeffs[2:]:
        acc = acc * t
        acc = acc + c
    return acc


def _pow2(k: np.ndarray) -> np.ndarray:
    """2^k as float32 built from bits, k int32 in [-126, 127]."""
    return _from_bits((k + I32(127)).astype(U32) << U32(23))


def _ldexp(v: np.ndarray, n: np.ndarray) -> np.ndarray:
    """v * 2^n as (v * 2^(n>>1)) * 2^(n - (n>>1)): exact until the last multiply, which rounds
    once (gradual underflow / overflow). n int32 in [-252, 254]; v*2^(n>>1) must be normal."""
    one_step = getattr(v, "nkl_ldexp", None)     # a JIT tracer's single-instruction form of exactly
    if one_step is not None:                      # this (lower/llvm/mathlib.py); None = not available
        r = one_step(n)
        if r is not None:
            return r
    n1 = n >> I32(1)
    n2 = n - n1
    return (v * _pow2(n1)) * _pow2(n2)


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


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
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
        a = _abs(x)
        ac = np.where(a < TANH_CLAMP, a, TANH_CLAMP)          # NaN -> 10
        z = ac * ac
        p = _horner(z, TANH_P)
        p = p * z
        p = p * ac
        small = p + ac
        y, n = _exp_parts(ac + ac)
        e = _ldexp(y, n)
        d = e + _ONE
        q = _TWO / d
        large = _ONE - q
        t = np.where(ac < TANH_SMALL, small, large)
        return _finish(x, _copysign_bits(t, x), shape)


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


def erf(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        a = _abs(x)
        ac = np.where(a < ERF_CLAMP, a, ERF_CLAMP)            # NaN -> 4
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
        large = _ONE - c
        r = np.where(ac < ERF_ONE, small, large)
        return _finish(x, _copysign_bits(r, x), shape)


def gelu(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        u = _abs(x)
        u = np.where(u < GELU_CLAMP, u, GELU_CLAMP)           # NaN -> 16
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


def _sin_poly(r, z):
    s = _horner(z, SIN_P)
    s = s * z
    s = s * r
    return s + r


def _cos_poly(z):
    c = _horner(z, COS_P)
    c = c * z
    c = c * z
    c = c - _HALF * z
    return c + _ONE


def sin(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r, q, finite = _sincos_reduce(x)
        z = r * r
        s, c = _sin_poly(r, z), _cos_poly(z)
        res = np.where(q == _ZERO, s, np.where(q == _ONE, c, np.where(q == _TWO, -s, -c)))
        res = _from_bits(_bits(res) ^ (_bits(x) & U32(_SIGN)))
        res = np.where(finite, res, F32(np.nan))
        return _finish(x, res, shape)


def cos(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r, q, finite = _sincos_reduce(x)
        z = r * r
        s, c = _sin_poly(r, z), _cos_poly(z)
        res = np.where(q == _ZERO, c, np.where(q == _ONE, -s, np.where(q == _TWO, -c, s)))
        res = np.where(finite, res, F32(np.nan))
        return _finish(x, res, shape)


def tan(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r, q, finite = _sincos_reduce(x)
        z = r * r
        t = _horner(z, TAN_P)
        t = t * z
        t = t * r
        t = t + r
        odd = (q == _ONE) | (q == F32(3.0))
        res = np.where(odd, F32(-1.0) / t, t)
        res = _from_bits(_bits(res) ^ (_bits(x) & U32(_SIGN)))
        res = np.where(finite, res, F32(np.nan))
        return _finish(x, res, shape)


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
        p = _horner(z, ATAN_P)
        p = p * z
        p = p * u
        p = p + u
        r = lo + p
        r = hi + r
        return _finish(x, _copysign_bits(r, x), shape)


def rsqrt(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, _ONE / np.sqrt(x), shape)


def reciprocal(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, _ONE / x, shape)


def sqrt(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, np.sqrt(x), shape)


def square(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, x * x, shape)


def sign(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        mag = _bits(x) & U32(_ABS)
        one = _copysign_bits(np.full_like(x, _ONE), x)
        return _finish(x, np.where(mag == U32(0), x, one), shape)


def relu(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish(x, np.where(x > _ZERO, x, _ZERO), shape)


def abs(x):  # noqa: A001 - the op's name
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r = _abs(x)
        return _finish(r, r, shape)


FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": exp, "log": log, "tanh": tanh, "sigmoid": sigmoid, "gelu": gelu,
    "gelu_apprx_tanh": gelu_apprx_tanh, "silu": silu, "softplus": softplus, "mish": mish,
    "erf": erf, "sin": sin, "cos": cos, "tan": tan, "arctan": arctan, "rsqrt": rsqrt,
    "reciprocal": reciprocal, "sqrt": sqrt, "square": square, "sign": sign, "relu": relu,
    "abs": abs,
}
