"""Reference fp32 <-> low-precision encoders/decoders written with integer bit operations only.

This module is the numpy model of the code the LLVM JIT emits for dtype conversions.  Nothing
here uses a floating-point operation on the values being converted: the float32 input is
reinterpreted as ``uint32`` and every step is an integer add / shift / mask / compare / select.
The result is therefore independent of the process' rounding mode and of the FTZ/DAZ bits of
MXCSR (subnormals on either side are rounded and produced exactly).

The behaviour is bit-for-bit identical to ``x.astype(ml_dtypes.X)`` (fp8, bf16),
``x.astype(np.float16)`` (fp16) and ``y.astype(np.float32)`` for decoding; the tests in
``tests/test_conversions.py`` prove this exhaustively for every code, for every rounding
midpoint of every format, and for millions of random fp32 bit patterns (``NKI_LITE_SLOW_TESTS=1``
runs all 2**32 fp32 inputs).  tfloat32 has no ml_dtypes counterpart; its reference is an
independent float64 rounding, see the tests.

Public API
----------
``encode(x_f32, name)`` -> codes: ``uint8`` (fp8), ``uint16`` (bfloat16, float16) or ``uint32``
(tfloat32: the float32 *container* bits, i.e. the low 13 bits are always zero).
``decode(codes, name)`` -> ``float32`` array.
``FORMATS`` maps each supported name to its :class:`Format` parameters.

Format parameters (E exponent bits, M mantissa bits, B = bias, W = E + M, S = 23 - M)
-------------------------------------------------------------------------------------
=============  ==  ==  ===  ===========  =========  ===========  =======================
name            E   M    B  max finite    MAXC       OVF code     NaN code (encode)
=============  ==  ==  ===  ===========  =========  ===========  =======================
float8_e4m3     4   3    7  240          0x77       0x78 (inf)   sign | 0x7C
float8_e4m3fn   4   3    7  448          0x7E       0x7F (NaN)   sign | 0x7F
float8_e5m2     5   2   15  57344        0x7B       0x7C (inf)   sign | 0x7E
float16         5  10   15  65504        0x7BFF     0x7C00 (inf) sign | 0x7C00 | P (*)
bfloat16        8   7  127  3.3895e38    0x7F7F     0x7F80 (inf) sign | 0x7FC0
tfloat32        8  10  127  3.4028e38    0x7F7FE000 0x7F800000   sign | 0x7FC00000
=============  ==  ==  ===  ===========  =========  ===========  =======================
(codes without the sign bit; tfloat32 codes are fp32 container bits; sign = 1 << (W - 1)
for packed formats, 1 << 31 for tfloat32).  (*) float16 NaN follows numpy's conversion:
P = (f32 mantissa >> 13), and P = 1 if that is 0 (so the result stays a NaN; the quiet bit is
*not* forced).  All the other formats return the canonical quiet NaN with the input's sign.

Encode: the exact integer sequence (all arithmetic on uint32, no overflow possible)
-----------------------------------------------------------------------------------
::

    u    = bits(x)                          # uint32
    sgn  = u >> 31
    a    = u & 0x7FFFFFFF                   # magnitude bits
    e    = a >> 23                          # fp32 biased exponent, 0..255
    # --- normal result: e - 127 + B >= 1  <=>  e >= 128 - B
    #     re-bias the exponent in place; the mantissa carry then rolls into the exponent.
    vN   = a - ((127 - B) << 23)            # (only used when normal; B=127 -> vN = a)
    nN   = S
    # --- subnormal result (or zero): value = sig * 2**(e' - 150), e' = max(e, 1)
    #     code = RNE(sig >> n) with n = 151 - B - M - e', clamped to 25 (anything >= 25 -> 0)
    sig  = (a & 0x7FFFFF) | (e != 0) << 23
    nS   = min(151 - B - M - max(e, 1), 25) # >= S + 1 here   (signed arithmetic, then clamp)
    v, n = (vN, nN) if e >= 128 - B else (sig, nS)
    # --- round to nearest, ties to even, at bit n (n >= 1 always):
    r    = (v + ((1 << (n - 1)) - 1) + ((v >> n) & 1)) >> n
    # --- overflow (r > MAXC; includes fp32 +-inf since a = 0x7F800000 rounds beyond MAXC):
    r    = OVF if r > MAXC else r
    # --- NaN input (a > 0x7F800000):
    r    = NaN code (table above) if a > 0x7F800000 else r
    code = (sgn << (W - 1)) | r             # tfloat32: (sgn << 31) | (r << 13)

For bfloat16 and tfloat32 (B = 127) the normal branch is taken for every e >= 1 and the
subnormal branch for e == 0 reduces to the same shift (nS = S, sig = a), so the JIT may emit
just ``r = (a + (1 << (S-1)) - 1 + ((a >> S) & 1)) >> S`` plus the NaN select (the rounding
carry of the largest finite values naturally produces the infinity code).  For fp16/fp8 the JIT
computes both (v, n) candidates and selects; all shifts are by 1..31 (well defined in LLVM).

Decode: the exact integer sequence
----------------------------------
::

    sgn = c >> (W - 1);  ex = (c >> M) & ((1 << E) - 1);  m = c & ((1 << M) - 1)
    normal  (0 < ex < 2**E - 1, and for e4m3fn also ex == 15 with m != 7):
            bits = (ex + 127 - B) << 23 | m << S
    zero / subnormal (ex == 0):
            m == 0 -> bits = 0
            else p = 31 - ctlz32(m)     # index of the leading one, 0..M-1
                 bits = (p + 1 - B - M + 127) << 23 | ((m ^ (1 << p)) << (23 - p))
            (for fp8/fp16 that exponent is always >= 103, i.e. a *normal* float32)
    ex == 2**E - 1 (IEEE-like formats: e4m3, e5m2, fp16):
            m == 0 -> bits = 0x7F800000                          (inf)
            m != 0 -> bits = 0x7FC00000 (fp8) | 0x7F800000 | m << 13 (fp16; payload kept,
                                                                  quiet bit not forced)
    e4m3fn: ex == 15 and m == 7 -> bits = 0x7FC00000 (its only NaN)
    result  = (sgn << 31) | bits
    bfloat16: bits = c << 16 (every code, NaN payloads kept: that is what ml_dtypes does).
    tfloat32: the container bits are returned unchanged.

numpy has no count-leading-zeros ufunc, so ``_leading_one`` below computes p with M compares;
the JIT uses ``llvm.ctlz.i32``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Format", "FORMATS", "encode", "decode", "code_dtype"]


@dataclass(frozen=True)
class Format:
    name: str
    exp_bits: int        # E
    man_bits: int        # M
    bias: int            # B
    max_code: int        # largest finite magnitude code (no sign)
    ovf_code: int        # magnitude code produced on overflow / from +-inf
    nan_code: int        # magnitude code produced from NaN (fp16: base, payload added)
    ieee_specials: bool  # all-ones exponent means inf (m == 0) / NaN (m != 0)
    code_dtype: type     # numpy dtype of the codes

    @property
    def width(self) -> int:   # W: bits of a packed code (tfloat32: 32, container bits)
        return 32 if self.name == "tfloat32" else 1 + self.exp_bits + self.man_bits

    @property
    def shift(self) -> int:   # S
        return 23 - self.man_bits


FORMATS: dict[str, Format] = {f.name: f for f in [
    Format("float8_e4m3", 4, 3, 7, 0x77, 0x78, 0x7C, True, np.uint8),
    Format("float8_e4m3fn", 4, 3, 7, 0x7E, 0x7F, 0x7F, False, np.uint8),
    Format("float8_e5m2", 5, 2, 15, 0x7B, 0x7C, 0x7E, True, np.uint8),
    Format("float16", 5, 10, 15, 0x7BFF, 0x7C00, 0x7C00, True, np.uint16),
    Format("bfloat16", 8, 7, 127, 0x7F7F, 0x7F80, 0x7FC0, True, np.uint16),
    # tfloat32 codes are handled as 19-bit magnitudes internally, then shifted back into the
    # float32 container (low 13 bits zero).
    Format("tfloat32", 8, 10, 127, 0x3FBFF, 0x3FC00, 0x3FE00, True, np.uint32),
]}


def code_dtype(name: str) -> np.dtype:
    return np.dtype(FORMATS[name].code_dtype)


def _fmt(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"bitcodec: no bit codec for dtype {name!r} "
                         f"(supported: {', '.join(FORMATS)})") from None


def _c(a: np.ndarray) -> np.ndarray:
    """C-contiguous copy if needed (keeps 0-d arrays 0-d, unlike np.ascontiguousarray)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _f32_bits(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x
    if x.dtype != np.float32:
        raise TypeError(f"bitcodec.encode expects float32 input (or its uint32 bits), got {x.dtype}")
    return _c(x).view(np.uint32)


def encode(x_f32, name: str) -> np.ndarray:
    """float32 values (or their uint32 bit patterns) -> codes of format `name` (RNE)."""
    f = _fmt(name)
    u = _f32_bits(x_f32)
    U = np.uint32
    a = u & U(0x7FFFFFFF)
    sgn = u >> U(31)
    e = a >> U(23)
    B, M, S = f.bias, f.man_bits, f.shift

    normal = e >= U(128 - B)
    # normal candidate: re-bias in place (wraps for subnormal lanes, which are not selected)
    v_norm = a - U((127 - B) << 23) if B != 127 else a
    # subnormal candidate
    sig = (a & U(0x7FFFFF)) | ((e != 0).astype(U) << U(23))
    e_eff = np.maximum(e, U(1)).astype(np.int32)
    n_sub = np.minimum(151 - B - M - e_eff, 25).astype(U)
    v = np.where(normal, v_norm, sig)
    n = np.where(normal, U(S), n_sub)
    # round to nearest, ties to even, at bit n
    one = U(1)
    r = (v + ((one << (n - one)) - one) + ((v >> n) & one)) >> n
    r = np.where(r > U(f.max_code), U(f.ovf_code), r)
    is_nan = a > U(0x7F800000)
    if name == "float16":
        payload = (a & U(0x7FFFFF)) >> U(13)
        nan_r = U(0x7C00) | np.maximum(payload, one)
    else:
        nan_r = U(f.nan_code)
    r = np.where(is_nan, nan_r, r)
    if name == "tfloat32":
        return (sgn << U(31)) | (r << U(13))
    return ((sgn << U(f.width - 1)) | r).astype(f.code_dtype)


def _leading_one(m: np.ndarray, man_bits: int) -> np.ndarray:
    """Index of the most significant set bit of m (0 < m < 2**man_bits); 0 where m == 0."""
    p = np.zeros(m.shape, dtype=np.uint32)
    for k in range(1, man_bits):
        p += (m >= np.uint32(1 << k)).astype(np.uint32)
    return p


def decode(codes, name: str) -> np.ndarray:
    """codes of format `name` -> float32 values (exact; NaNs as ml_dtypes/numpy produce them)."""
    f = _fmt(name)
    c = np.asarray(codes)
    if c.dtype != f.code_dtype:
        raise TypeError(f"bitcodec.decode({name}) expects {np.dtype(f.code_dtype)} codes, got {c.dtype}")
    U = np.uint32
    c = c.astype(U, order="C")
    if name == "tfloat32":
        return c.view(np.float32)
    if name == "bfloat16":
        return (c << U(16)).view(np.float32)
    E, M, B, S, W = f.exp_bits, f.man_bits, f.bias, f.shift, f.width
    sgn = (c >> U(W - 1)) << U(31)
    ex = (c >> U(M)) & U((1 << E) - 1)
    m = c & U((1 << M) - 1)
    bits = ((ex + U(127 - B)) << U(23)) | (m << U(S))          # normal
    # subnormal: normalise with the leading-one index p
    p = _leading_one(m, M)
    sub_exp = (p + U(127 + 1 - B - M)) << U(23)
    sub_man = (m ^ (U(1) << p)) << (U(23) - p)                # drop the leading one
    sub = np.where(m == 0, U(0), sub_exp | sub_man)
    bits = np.where(ex == 0, sub, bits)
    emax = U((1 << E) - 1)
    if f.ieee_specials:
        if name == "float16":
            nan_bits = U(0x7F800000) | (m << U(13))
        else:
            nan_bits = U(0x7FC00000)
        spec = np.where(m == 0, U(0x7F800000), nan_bits)
        bits = np.where(ex == emax, spec, bits)
    else:  # float8_e4m3fn: S.1111.111 is the only NaN, no infinities
        bits = np.where((ex == emax) & (m == U(7)), U(0x7FC00000), bits)
    return (sgn | bits).view(np.float32)
