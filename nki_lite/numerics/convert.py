"""Conversions between fp32 compute values and every NKI storage dtype.

Contract (shared/DESIGN.md "Numerics"; details and verified facts: docs/numerics_conversions.md):
- `round_to(x, name)`: x is float32 (or int64 on the integer compute path); the result has the
  storage dtype of `name`. Floats round to nearest even exactly as ml_dtypes/numpy casts do
  (ml_dtypes overflow behaviour: e4m3 >= 248 -> inf, e4m3fn overflow -> NaN, ...).
  tfloat32 keeps float32 storage with the mantissa rounded to 10 bits (RNE).
  Float -> integer truncates toward zero, saturates to the type's range, NaN -> 0.
  int64 -> integer wraps modulo 2^bits. Anything -> bool is `x != 0`.
- `widen(a, name)`: storage array -> float32 (exact for every float format; ints round RNE).
- `to_int64(a)`: storage array -> int64 compute values (exact for every integer/bool dtype).

Details that the contract leaves implicit, fixed here (and tested in tests/test_conversions.py):
- Any array layout is accepted (non-contiguous, negative strides, 0-d); the result is always a
  new C-contiguous array that does not alias `x`.
- Integer/bool input to a float dtype is first rounded to float32 (RNE; the engines compute in
  fp32), then to the target: int -> float32 -> bfloat16 is a *double* rounding by design.
- Float inputs other than float32 (float16, bfloat16, fp8 storage, Python floats, float64) are
  converted to float32 first; this is exact for every NKI float format.
- NaN -> bool is True (NaN != 0). NaN -> int is 0. +-inf -> int saturates.
- tfloat32 NaN -> sign | 0x7FC00000 (canonical quiet NaN, same rule as ml_dtypes' bfloat16).
- No floating-point warnings are emitted (overflow to inf/NaN is the defined result).
- Float paths: ml_dtypes' `astype` is the definition (numpy's for float16); `bitcodec.encode`
  is the integer-only model of the same rounding and is proven identical by the tests.
  tfloat32 has no ml_dtypes type, so its definition *is* `bitcodec.encode(x, "tfloat32")`.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from . import bitcodec

_I64_MAX_F = float(2 ** 63)     # first float64 value above int64's range


def _c(a: np.ndarray) -> np.ndarray:
    """C-contiguous (keeps 0-d arrays 0-d, unlike np.ascontiguousarray)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _as_float32(x: np.ndarray) -> np.ndarray:
    """x (any float/int/bool array) -> float32; exact for every NKI float storage dtype."""
    if x.dtype == np.float32:
        return x
    with np.errstate(all="ignore"):
        return x.astype(np.float32)


def _trunc_sat(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """float -> float64 integral values: trunc toward zero, clip to [lo, hi], NaN -> 0."""
    with np.errstate(all="ignore"):                # (signaling NaN -> float64 sets "invalid")
        t = np.trunc(x.astype(np.float64))
        t = np.clip(t, float(lo), float(hi))       # NaN passes through clip ...
    return np.where(np.isnan(t), 0.0, t)           # ... and becomes 0 here


def round_to(x: np.ndarray, name: str) -> np.ndarray:
    """Round compute values `x` to dtype `name`; returns a new array of `storage(name)`."""
    info = D.INFO[name]
    x = np.asarray(x)
    if info.kind == "b":
        return _c(x != 0)
    if x.dtype.kind in "iub":
        if info.kind in "iu":
            # two's complement wrap modulo 2**bits (numpy's int -> narrower int astype)
            return x.astype(np.int64).astype(info.storage, order="C")
        with np.errstate(all="ignore"):
            x = x.astype(np.float32)               # RNE (correctly rounded int -> float32)
    else:
        x = _as_float32(x)
    if info.kind == "f":
        if name == "float32":
            return np.array(x, dtype=np.float32, order="C", copy=True)
        if name == "tfloat32":
            return bitcodec.encode(x, "tfloat32").view(np.float32)
        with np.errstate(all="ignore"):            # overflow -> inf/NaN is the defined result
            return x.astype(info.storage, order="C")
    # float -> int: truncate toward zero, saturate, NaN -> 0
    ii = np.iinfo(info.storage)
    return _trunc_sat(x, ii.min, ii.max).astype(info.storage, order="C")


def widen(a: np.ndarray, name: str) -> np.ndarray:
    """Storage values -> float32 compute values (exact for floats; int32/uint32 round RNE)."""
    a = np.asarray(a)
    with np.errstate(all="ignore"):
        return a.astype(np.float32, order="C")


def to_int64(a: np.ndarray) -> np.ndarray:
    """Storage values -> int64 compute values.

    Exact for every integer and bool dtype.  Float input (not a normal use) follows the
    float -> integer rule with int64 as the target: trunc toward zero, saturate, NaN -> 0.
    """
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.astype(np.int64, order="C")
    x = _as_float32(a)
    with np.errstate(all="ignore"):
        t = np.where(np.isnan(x), np.float32(0), np.trunc(x)).astype(np.float64)
    hi = t >= _I64_MAX_F
    lo = t < -_I64_MAX_F
    safe = np.where(hi | lo, 0.0, t).astype(np.int64)
    return _c(np.where(hi, np.iinfo(np.int64).max, np.where(lo, np.iinfo(np.int64).min, safe)))
