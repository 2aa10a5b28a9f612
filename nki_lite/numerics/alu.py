"""ALU operations of the Vector/Scalar/GpSimd engines: the definition of each binary op.

Contract:
- `FP32[name](a, b)` computes on float32 arrays with one fp32 rounding per op (IEEE, RNE).
  maximum/minimum are IEEE 754-2019 maximum/minimum: NaN if either input is NaN, and
  -0 < +0, so the result never depends on operand order. Comparisons and logical ops return
  1.0 / 0.0.
- `INT[name](a, b)` computes on int64 arrays (exact; the caller wraps to the output width). It
  is used when every input and the output are integer dtypes; ops missing from INT always use
  the fp32 path (divide). fmod/mod: C's truncated and numpy's floored remainder; on integers a zero
  divisor gives 0, in fp32 NaN.
- Bitwise ops exist only on the integer path.
- `REDUCE_IDENTITY[name]` is the identity element used for masked-off/padding lanes.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
_NAN = np.float32("nan")


def _max(a, b):
    with np.errstate(invalid="ignore"):
        r = np.where(a > b, a, np.where(b > a, b, np.where(np.signbit(a), b, a)))
        return np.where(np.isnan(a) | np.isnan(b), _NAN, r).astype(F32)


def _min(a, b):
    with np.errstate(invalid="ignore"):
        r = np.where(a < b, a, np.where(b < a, b, np.where(np.signbit(a), a, b)))
        return np.where(np.isnan(a) | np.isnan(b), _NAN, r).astype(F32)


def _fmod(a, b):
    """C fmod: a - b*trunc(a/b), exact (the result is representable); NaN for b = 0 or infinite a."""
    return np.fmod(a, b).astype(F32)


def _mod(a, b):
    """numpy/Python float remainder: the sign of the divisor. r = fmod(a, b); a non-zero r whose
    sign differs from b's becomes r + b (one fp32 rounding); a zero r becomes a zero with b's sign."""
    r = np.fmod(a, b).astype(F32)
    adjust = (r != 0) & ((b < 0) != (r < 0))
    r = np.where(adjust, (r + b).astype(F32), r)
    return np.where(r == 0, np.copysign(F32(0), b), r).astype(F32)


def _int_rem(fn):
    """Integer remainder with a zero divisor giving 0 (no trap; nki_lite's definition)."""
    def rem(a, b):
        zero = b == 0
        return np.where(zero, 0, fn(a, np.where(zero, 1, b))).astype(np.int64)
    return rem


def _b(x):
    return np.asarray(x).astype(F32)


FP32 = {
    "add": lambda a, b: (a + b).astype(F32),
    "subtract": lambda a, b: (a - b).astype(F32),
    "multiply": lambda a, b: (a * b).astype(F32),
    "divide": lambda a, b: (a / b).astype(F32),
    "fmod": _fmod,
    "mod": _mod,
    "maximum": _max,
    "minimum": _min,
    "equal": lambda a, b: _b(a == b),
    "not_equal": lambda a, b: _b(a != b),
    "greater": lambda a, b: _b(a > b),
    "greater_equal": lambda a, b: _b(a >= b),
    "less": lambda a, b: _b(a < b),
    "less_equal": lambda a, b: _b(a <= b),
    "logical_and": lambda a, b: _b((a != 0) & (b != 0)),
    "logical_or": lambda a, b: _b((a != 0) | (b != 0)),
    "logical_xor": lambda a, b: _b((a != 0) ^ (b != 0)),
}

INT = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "fmod": _int_rem(np.fmod),          # truncated: the sign of the dividend
    "mod": _int_rem(np.mod),            # floored: the sign of the divisor
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": lambda a, b: (a == b).astype(np.int64),
    "not_equal": lambda a, b: (a != b).astype(np.int64),
    "greater": lambda a, b: (a > b).astype(np.int64),
    "greater_equal": lambda a, b: (a >= b).astype(np.int64),
    "less": lambda a, b: (a < b).astype(np.int64),
    "less_equal": lambda a, b: (a <= b).astype(np.int64),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.int64),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.int64),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.int64),
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": lambda a, b: np.left_shift(a, np.clip(b, 0, 63)),
    # logical shift: the caller passes `a` zero-extended at the output width (interpret_common)
    "right_shift": lambda a, b: np.right_shift(a, np.clip(b, 0, 63)),
}

INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}
ALL_OPS = tuple(sorted(set(FP32) | set(INT)))
COMPARISONS = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
               "logical_and", "logical_or", "logical_xor"}
COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "equal", "not_equal", "logical_and", "logical_or",
               "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"}

REDUCE_OPS = ("add", "maximum", "minimum", "multiply", "logical_and", "logical_or")
REDUCE_IDENTITY = {"add": -0.0, "maximum": -np.inf, "minimum": np.inf, "multiply": 1.0,
                   "logical_and": 1.0, "logical_or": 0.0}
REDUCE_LANES = 16


def reduce_fp32(op: str, x: np.ndarray) -> np.ndarray:
    """Reduce float32 `x` along its last axis with nki_lite's fixed order.

    Order (the contract the JIT reproduces): 16 interleaved lanes, lane j accumulating elements
    j, j+16, j+32, ... in increasing order starting from the identity; then lanes combine by a
    halving tree (lanes[0:8] op lanes[8:16], then [0:4] op [4:8], ...). Max/min are
    order-independent anyway; add and multiply are not, which is why the order is fixed.

    Max/min are computed with one numpy reduction (`_extremum`, the same bits as the loop
    `_reduce_lanes`; pinned by tests/test_alu_reduce.py); the others run the loop.
    """
    x = np.asarray(x)
    if op in ("maximum", "minimum") and x.dtype == F32 and x.shape[-1] > 0:
        return _extremum(op, x)
    return _reduce_lanes(op, x)


def _tree(fn, acc: np.ndarray) -> np.ndarray:
    w = acc.shape[-1]
    while w > 1:
        w //= 2
        acc = fn(acc[..., :w], acc[..., w:2 * w])
    return acc[..., 0]


def _extremum(op: str, x: np.ndarray) -> np.ndarray:
    """IEEE maximum / minimum over the last axis (n >= 1): canonical NaN if any element is NaN,
    +0 above -0; what `_max` / `_min` folded in any order give."""
    with np.errstate(invalid="ignore"):
        r = (np.max if op == "maximum" else np.min)(x, axis=-1)      # NaN-propagating
        zero = r == 0
        if zero.any():        # numpy picks either zero: the result is +0 (max) / -0 (min) iff one is there
            want = np.uint32(0) if op == "maximum" else np.uint32(0x80000000)
            hit = np.any(x.view(np.uint32) == want, axis=-1)
            r = np.where(zero, np.where(hit, want, want ^ np.uint32(0x80000000)).view(F32), r)
        return np.where(np.isnan(r), _NAN, r).astype(F32)


def _reduce_lanes(op: str, x: np.ndarray) -> np.ndarray:
    """reduce_fp32's order as the plain loop over 16-element chunks (any op, any length)."""
    fn = FP32[op]
    lanes = REDUCE_LANES
    pad = (-x.shape[-1]) % lanes
    if pad:
        ident = np.full(x.shape[:-1] + (pad,), REDUCE_IDENTITY[op], dtype=F32)
        x = np.concatenate([x, ident], axis=-1)
    acc = np.full(x.shape[:-1] + (lanes,), REDUCE_IDENTITY[op], dtype=F32)
    with np.errstate(all="ignore"):
        for k in range(0, x.shape[-1], lanes):
            acc = fn(acc, x[..., k:k + lanes])
        return _tree(fn, acc)


def reduce_int(op: str, x: np.ndarray) -> np.ndarray:
    fn = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod,
          "logical_and": lambda v, axis: np.all(v != 0, axis=axis).astype(np.int64),
          "logical_or": lambda v, axis: np.any(v != 0, axis=axis).astype(np.int64)}[op]
    return np.asarray(fn(x, axis=-1)).astype(np.int64)
