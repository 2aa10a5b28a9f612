"""fp32math's shared pieces: float32 constants from decimal strings, bit views, NaN finishing,
Horner evaluation and exact powers of two (the package docstring states the contract)."""
from __future__ import annotations

import numpy as np

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


def _saturating_odd(x: np.ndarray, a: np.ndarray, bound, small: np.ndarray, tail: np.ndarray,
                    shape: tuple) -> np.ndarray:
    """The result of an odd function that saturates to +-1 (erf, tanh) at a = |x|: `small` where
    a < bound, else 1 - tail; with x's sign, NaN-canonicalised."""
    large = _ONE - tail
    r = np.where(a < bound, small, large)
    return _finish(x, _copysign_bits(r, x), shape)


def _horner(t: np.ndarray, coeffs) -> np.ndarray:
    """((c0*t + c1)*t + c2)*t + ... , coefficients highest degree first."""
    acc = coeffs[0] * t
    acc = acc + coeffs[1]
    for c in coeffs[2:]:
        acc = acc * t
        acc = acc + c
    return acc


def _odd_poly(r: np.ndarray, z: np.ndarray, coeffs) -> np.ndarray:
    """r + (P(z) * z) * r with z = r*r, in that order: the odd series of sin, tan, tanh, arctan."""
    p = _horner(z, coeffs)
    p = p * z
    p = p * r
    return p + r


def _clamped_abs(x: np.ndarray, clamp) -> np.ndarray:
    """min(|x|, clamp), NaN -> clamp (the argument of a function that saturates beyond clamp)."""
    a = _abs(x)
    return np.where(a < clamp, a, clamp)


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
