"""Bit patterns every backend must agree on, defined once.

- `CANON_NAN`: the fp32 quiet NaN every arithmetic result's NaN becomes (docs/numerics.md), so the
  JIT and the interpreter agree bit for bit whatever instruction produced the NaN.
- `UNINIT_SENTINEL`: what an uninitialised integer tile holds under the debug fill (floats get NaN,
  booleans True): a value unlikely to be right by accident, the same in both backends.
"""
from __future__ import annotations

CANON_NAN = 0x7FC00000

UNINIT_SENTINEL = {"int8": -0x5B, "int16": -0x5A5B, "int32": -0x5A5A5A5B, "uint8": 0xA5,
                   "uint16": 0xA5A5, "uint32": 0xA5A5A5A5,
                   # MX containers: NaN codes where the format has one (fp4 has none), the E8M0 NaN
                   "float8_e4m3fn_x4": 0x7F7F7F7F, "float8_e5m2_x4": 0x7F7F7F7F, "float4_e2m1fn_x4": 0xA5A5,
                   "float8_e8m0fnu": float("nan")}
