"""The one-operation functions: rsqrt, reciprocal, sqrt, square, sign, relu, abs, floor, ceil, trunc."""
from __future__ import annotations

import numpy as np

from .base import U32, _ABS, _ONE, _ZERO, _abs, _bits, _copysign_bits, _finish, _finish_never_nan, _prep


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


# Rounding to an integral value is exact in binary32 (IEEE roundToIntegral): no rounding step, the
# sign of zero is kept (floor(-0.0) = -0.0, ceil(-0.5) = -0.0, trunc(-0.5) = -0.0), +-inf stay.
def floor(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish_never_nan(x, np.floor(x), shape)


def ceil(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish_never_nan(x, -np.floor(-x), shape)   # exact: negation and floor are both exact


def trunc(x):
    x, shape = _prep(x)
    with np.errstate(all="ignore"):
        return _finish_never_nan(x, np.trunc(x), shape)
