"""The one-operation functions: rsqrt, reciprocal, sqrt, square, sign, relu, abs, floor, ceil, trunc.

Each is one fp32 numpy expression between the shared `_prep` (to fp32, flattened) and `_finish`
(NaN canonicalised, the caller's shape); `_pointwise` is that frame, written once."""
from __future__ import annotations

import functools

import numpy as np

from .base import U32, _ABS, _ONE, _ZERO, _abs, _bits, _copysign_bits, _finish, _finish_never_nan, _prep


def _pointwise(expr=None, *, finish=_finish):
    """`@_pointwise def f(x): return <fp32 expression of x>` -> the full function on any input."""
    def wrap(body):
        @functools.wraps(body)
        def fn(x):
            x, shape = _prep(x)
            with np.errstate(all="ignore"):
                return finish(x, body(x), shape)
        return fn
    return wrap(expr) if expr is not None else wrap


@_pointwise
def rsqrt(x):
    return _ONE / np.sqrt(x)


@_pointwise
def reciprocal(x):
    return _ONE / x


@_pointwise
def sqrt(x):
    return np.sqrt(x)


@_pointwise
def square(x):
    return x * x


@_pointwise
def sign(x):
    mag = _bits(x) & U32(_ABS)
    one = _copysign_bits(np.full_like(x, _ONE), x)
    return np.where(mag == U32(0), x, one)


@_pointwise
def relu(x):
    return np.where(x > _ZERO, x, _ZERO)


def abs(x):  # noqa: A001 - the op's name
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        r = _abs(x)
        return _finish(r, r, shape)


# Rounding to an integral value is exact in binary32 (IEEE roundToIntegral): no rounding step, the
# sign of zero is kept (floor(-0.0) = -0.0, ceil(-0.5) = -0.0, trunc(-0.5) = -0.0), +-inf stay.
@_pointwise(finish=_finish_never_nan)
def floor(x):
    return np.floor(x)


@_pointwise(finish=_finish_never_nan)
def ceil(x):
    return -np.floor(-x)      # exact: negation and floor are both exact


@_pointwise(finish=_finish_never_nan)
def trunc(x):
    return np.trunc(x)
