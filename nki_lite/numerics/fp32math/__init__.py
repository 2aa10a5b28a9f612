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

Modules by job: `base` (constants, bit views, NaN finishing, Horner, powers of two), `explog`
(exp, log, tanh, sigmoid, silu, silu_dx, gelu_apprx_tanh, softplus, mish), `erf` (erf, gelu), `trig` (sin,
cos, tan, arctan), `basic` (rsqrt, reciprocal, sqrt, square, sign, relu, abs, floor, ceil, trunc). `FUNCTIONS` maps
each op name to its function.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .basic import abs, ceil, floor, reciprocal, relu, rsqrt, sign, sqrt, square, trunc  # noqa: A004 - the op's name
from .erf import erf, gelu
from .explog import exp, gelu_apprx_tanh, log, mish, sigmoid, silu, silu_dx, softplus, tanh
from .trig import arctan, cos, sin, tan

__all__ = [
    "exp", "log", "tanh", "sigmoid", "gelu", "gelu_apprx_tanh", "silu", "silu_dx", "softplus", "mish",
    "erf", "sin", "cos", "tan", "arctan", "rsqrt", "reciprocal", "sqrt", "square", "sign",
    "relu", "abs", "floor", "ceil", "trunc", "FUNCTIONS",
]

FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": exp, "log": log, "tanh": tanh, "sigmoid": sigmoid, "gelu": gelu,
    "gelu_apprx_tanh": gelu_apprx_tanh, "silu": silu, "silu_dx": silu_dx, "softplus": softplus, "mish": mish,
    "erf": erf, "sin": sin, "cos": cos, "tan": tan, "arctan": arctan, "rsqrt": rsqrt,
    "reciprocal": reciprocal, "sqrt": sqrt, "square": square, "sign": sign, "relu": relu,
    "abs": abs, "floor": floor, "ceil": ceil, "trunc": trunc,
}
