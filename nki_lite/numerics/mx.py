"""MX (OCP microscaling) numerics: the definition of the x4 packed dtypes, nisa.quantize_mx and
nisa.nc_matmul_mx, in numpy (the interpreter's rules call these; the JIT's rules_mx.py repeats them
step for step). docs/numerics.md "MX formats" states the choices.

Contract:
- x4 containers: `float8_e4m3fn_x4` / `float8_e5m2_x4` hold four fp8 codes in a uint32, element q of
  the group of four in byte q (little-endian: what `fp8_array.view(np.uint32)` gives);
  `float4_e2m1fn_x4` holds four fp4 codes in a uint16, element q in bits 4q..4q+3. `unpack` /
  `pack` convert between containers and codes `[..., 4]`; `decode` gives exact float64 values.
- A scaling group is 8 partitions x one x4 column (32 values). The scale of data partitions
  8g..8g+7 lives in scale partition `scale_row(g)` = 32*(g//4) + g%4 of the scale tile (each SBUF
  quadrant holds the scales of its own 32 data partitions in its first 4 partitions), in the same
  free position as the x4 column. E8M0 code b is 2^(b-127); 255 is NaN.
- `quantize(x, dtype)`: NKI's quantize_mx scale (ISA docs): b = floor(log2(amax)) - (Emax - 1) + 127
  with Emax 8 (e4m3fn) / 15 (e5m2), i.e. twice the OCP sample scale, clamped below at 0 (2^-127;
  all-zero groups, and fp32-subnormal amax); a group holding an Inf or NaN gets b = 255 and NaN
  codes (0x7F). Data: fp32 x * 2^(127-b) (one fp32 multiply), rounded to the fp8 format RNE; with
  this scale no finite value saturates.
- `matmul(...)`: every product a*sa*b*sb is exact in float64 (fp8 x fp8 significands and the scale
  exponents fit), summed in float64 in the order k (partition) outer, q (element of the x4) inner,
  starting at +0.0; the sum is rounded once to fp32. Accumulation into PSUM (the caller) is one fp32 add.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

# x4 dtype -> (element name, bits per code, Emax of quantize_mx or None)
X4 = {
    "float8_e4m3fn_x4": ("float8_e4m3fn", 8, 8),
    "float8_e5m2_x4": ("float8_e5m2", 8, 15),
    "float4_e2m1fn_x4": ("float4_e2m1fn", 4, None),
}
QUANTIZE_OUT = ("float8_e4m3fn_x4", "float8_e5m2_x4")   # quantize_mx writes fp8 only (ISA docs)
GROUP_P, GROUP_F = 8, 4                                  # a scaling group: 8 partitions x 4 elements
SCALE_NAN = 255
CODE_NAN = 0x7F                                          # S.1111.111 (e4m3fn) / S.11111.11 (e5m2): NaN


def _table(element: str, bits: int) -> np.ndarray:
    codes = np.arange(1 << bits, dtype=np.uint8)
    return codes.view(getattr(ml_dtypes, element)).astype(np.float64)


TABLES = {name: _table(el, bits) for name, (el, bits, _) in X4.items()}   # code -> exact value
SCALES = np.ldexp(1.0, np.arange(256) - 127)                              # E8M0 code -> 2^(b-127)
SCALES[SCALE_NAN] = np.nan


def scale_row(g):
    """Scale partition of scaling group g (data partitions 8g..8g+7)."""
    return 32 * (g // 4) + g % 4


def scale_rows(partitions: int) -> np.ndarray:
    return scale_row(np.arange(partitions // GROUP_P))


def scale_partitions(partitions: int) -> int:
    """Partitions a scale tile needs for a data tile of `partitions` partitions."""
    return int(scale_row(partitions // GROUP_P - 1)) + 1


def unpack(raw: np.ndarray, name: str) -> np.ndarray:
    """Container values -> uint8 codes [..., 4] (element q last)."""
    bits = X4[name][1]
    raw = np.asarray(raw).astype(np.uint32)
    shifts = np.arange(4, dtype=np.uint32) * bits
    return ((raw[..., None] >> shifts) & ((1 << bits) - 1)).astype(np.uint8)


def pack(codes: np.ndarray, name: str) -> np.ndarray:
    """uint8 codes [..., 4] -> container values (the dtype's storage)."""
    bits = X4[name][1]
    c = np.asarray(codes).astype(np.uint32) & ((1 << bits) - 1)
    out = c[..., 0] | (c[..., 1] << bits) | (c[..., 2] << 2 * bits) | (c[..., 3] << 3 * bits)
    return out.astype(np.uint32 if bits == 8 else np.uint16)


def decode(raw: np.ndarray, name: str) -> np.ndarray:
    """Container values -> exact float64 values [..., 4]."""
    return TABLES[name][unpack(raw, name)]


def quantize(x: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """x: float32 [P, F] (P % 8 == 0, F % 4 == 0) -> (containers [P, F//4], E8M0 codes [P//8, F//4])."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    P, F = x.shape
    emax = X4[name][2]
    mag = x.view(np.uint32) & np.uint32(0x7FFFFFFF)
    amax = mag.reshape(P // GROUP_P, GROUP_P, F // GROUP_F, GROUP_F).max(axis=(1, 3))
    efield = (amax >> np.uint32(23)).astype(np.int64)
    b = np.where(efield == 255, SCALE_NAN, np.maximum(efield - (emax - 1), 0))
    factor = ((254 - np.minimum(b, 254)).astype(np.uint32) << np.uint32(23)).view(np.float32)
    full = lambda a: np.repeat(np.repeat(a, GROUP_P, axis=0), GROUP_F, axis=1)
    with np.errstate(all="ignore"):
        y = x * full(factor)
    codes = y.astype(getattr(ml_dtypes, X4[name][0])).view(np.uint8)
    codes = np.where(full(b) == SCALE_NAN, np.uint8(CODE_NAN), codes)
    return pack(codes.reshape(P, F // GROUP_F, GROUP_F), name), b.astype(np.uint8)


def dequantize(raw: np.ndarray, name: str, scales: np.ndarray) -> np.ndarray:
    """Containers [P, F4] and compact E8M0 codes [P//8, F4] -> float64 values [P, F4, 4]."""
    s = np.repeat(SCALES[np.asarray(scales, dtype=np.uint8)], GROUP_P, axis=0)
    return decode(raw, name) * s[..., None]


def matmul(st: np.ndarray, st_name: str, mv: np.ndarray, mv_name: str, st_scale: np.ndarray,
           mv_scale: np.ndarray) -> np.ndarray:
    """stationary [K, M] and moving [K, N] containers with compact scales [K//8, M] / [K//8, N]
    -> float32 [M, N] (products exact, float64 sum in (k, q) order, one rounding)."""
    a = dequantize(st, st_name, st_scale)          # [K, M, 4]
    b = dequantize(mv, mv_name, mv_scale)          # [K, N, 4]
    acc = np.zeros((a.shape[1], b.shape[1]), dtype=np.float64)
    with np.errstate(all="ignore"):
        for k in range(a.shape[0]):
            for q in range(4):
                acc += a[k, :, q][:, None] * b[k, :, q][None, :]
        return acc.astype(np.float32)
