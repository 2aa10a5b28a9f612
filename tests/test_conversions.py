"""Conversions: nki_lite.numerics.bitcodec (integer-only codecs) and nki_lite.numerics.convert.

References:
- fp8 / bfloat16: ``x.astype(ml_dtypes.X)`` bits; float16: ``x.astype(np.float16)`` bits (ml_dtypes
  has no float16 of its own; numpy's conversion is the definition).
- tfloat32 (no ml_dtypes type): ``_tf32_reference``, an independent float64 computation
  (frexp -> scale by the ulp -> np.rint (ties to even) -> scale back; NaN -> sign|0x7FC00000).
- RNE ties are additionally checked against "the even neighbour" derived from the code order.

Default run: every code of every fp8/bf16/fp16 format (and all 2**19 tf32 codes) exhaustively,
every rounding midpoint (and +-1 fp32 ulp around it) of every format, ~2 M random fp32 patterns
per format.  NKI_LITE_SLOW_TESTS=1 adds all 2**32 fp32 inputs per format (minutes).
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

from nki_lite.core import dtypes as D
from nki_lite.numerics import bitcodec, convert

# dtypes that hold values (the MX containers hold packed codes: tests/test_mx.py)
VALUE_DTYPES = [n for n in D.INFO if not D.is_packed(n)]

SLOW = os.environ.get("NKI_LITE_SLOW_TESTS") == "1"

ML_FORMATS = ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16"]
ALL_FORMATS = ML_FORMATS + ["tfloat32"]
INT_NAMES = ["int8", "int16", "int32", "uint8", "uint16", "uint32"]


# ----------------------------------------------------------------------------------- helpers
def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def f32(u) -> np.ndarray:
    return np.asarray(u, dtype=np.uint64).astype(np.uint32).view(np.float32)


def ml_encode(x: np.ndarray, name: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return bits(x.astype(D.storage(name)))


def _tf32_reference(x: np.ndarray) -> np.ndarray:
    """Independent tf32 rounding via float64 arithmetic; returns fp32 container bits."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):              # signaling NaN -> float64
        x64 = x.astype(np.float64)
    fin = np.isfinite(x64)
    xs = np.where(fin, x64, 0.0)
    _, e = np.frexp(xs)                              # |x| in [2**(e-1), 2**e)
    q = np.maximum(e - 1, -126) - 10                 # exponent of tf32's ulp at x
    r = np.rint(np.ldexp(xs, -q))                    # exact scaling, ties to even
    with np.errstate(over="ignore"):
        out = np.ldexp(r, q).astype(np.float32)      # exact, or 2**128 -> inf
    out = np.where(fin, out, x)                      # +-inf unchanged
    ub = bits(out)
    nan = np.isnan(x)
    return np.where(nan, (bits(x) & np.uint32(0x80000000)) | np.uint32(0x7FC00000), ub)


def reference_encode(x: np.ndarray, name: str) -> np.ndarray:
    return _tf32_reference(x) if name == "tfloat32" else ml_encode(x, name)


def round_to_bits(x: np.ndarray, name: str) -> np.ndarray:
    return bits(convert.round_to(x, name))


def all_codes(name: str) -> np.ndarray:
    if name == "tfloat32":
        return (np.arange(1 << 19, dtype=np.uint32) << np.uint32(13))
    cd = bitcodec.code_dtype(name)
    return np.arange(1 << (8 * cd.itemsize), dtype=np.uint32).astype(cd)


def code_values(name: str) -> np.ndarray:
    """float32 value of every code, via the reference decoder (ml_dtypes / container)."""
    c = all_codes(name)
    if name == "tfloat32":
        return c.view(np.float32)
    return c.view(D.storage(name)).astype(np.float32)


def assert_same_bits(got, want, x, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[:8]
        xs = [hex(int(v)) for v in bits(np.asarray(x, dtype=np.float32))[i]] if x is not None else i
        pytest.fail(f"{what}: {len(bad)} mismatches, e.g. input bits {xs}: "
                    f"got {[hex(int(v)) for v in got[i]]} want {[hex(int(v)) for v in want[i]]}")


# ------------------------------------------------------------------- verified ml_dtypes facts
# (magnitude codes; every value here is asserted against ml_dtypes / numpy below and quoted in
#  docs/numerics_conversions.md)
FACTS = {
    #                max finite  max code  min normal  min subnormal  overflow >= (f32)   ovf code  NaN out
    "float8_e4m3":   (240.0,     0x77,     2.0**-6,    2.0**-9,       248.0,              0x78,     0x7C),
    "float8_e4m3fn": (448.0,     0x7E,     2.0**-6,    2.0**-9,       float(np.nextafter(np.float32(464), np.float32(1e9))), 0x7F, 0x7F),
    "float8_e5m2":   (57344.0,   0x7B,     2.0**-14,   2.0**-16,      61440.0,            0x7C,     0x7E),
    "float16":       (65504.0,   0x7BFF,   2.0**-14,   2.0**-24,      65520.0,            0x7C00,   None),
    "bfloat16":      ((2 - 2.0**-7) * 2.0**127, 0x7F7F, 2.0**-126, 2.0**-133, (2 - 2.0**-8) * 2.0**127, 0x7F80, 0x7FC0),
}


@pytest.mark.parametrize("name", ML_FORMATS)
def test_documented_facts(name):
    mx, mxc, mn, sub, ovf, ovfc, nanc = FACTS[name]
    t = D.storage(name)
    fi = ml_dtypes.finfo(t)
    assert float(fi.max) == mx and float(fi.tiny) == mn and float(fi.smallest_subnormal) == sub
    sgn = 0x80 if bitcodec.code_dtype(name).itemsize == 1 else 0x8000
    enc = lambda v: int(ml_encode(np.array([v], np.float32), name)[0])  # noqa: E731
    assert enc(mx) == mxc and enc(-mx) == sgn | mxc
    below = float(np.nextafter(np.float32(ovf), np.float32(0)))
    assert enc(below) == mxc and enc(ovf) == ovfc and enc(-ovf) == sgn | ovfc
    assert enc(np.inf) == ovfc and enc(-np.inf) == sgn | ovfc
    assert enc(sub / 2) == 0 and enc(-sub / 2) == sgn           # tie -> even (zero), sign kept
    assert enc(float(np.nextafter(np.float32(sub / 2), np.float32(1)))) == 1
    if nanc is not None:
        for nb in (0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF):
            assert enc(f32(nb)[()]) == nanc and enc(f32(nb | 0x80000000)[()]) == sgn | nanc
    # all fp8 NaN codes decode to the canonical qNaN with the code's sign; bf16/fp16 keep payloads
    vals = code_values(name)
    nan_codes = all_codes(name)[np.isnan(vals)]
    want_n = {"float8_e4m3": 14, "float8_e4m3fn": 2, "float8_e5m2": 6,
              "float16": 2046, "bfloat16": 254}[name]
    assert len(nan_codes) == want_n
    if name.startswith("float8"):
        nb = set(bits(vals[np.isnan(vals)]).tolist())
        assert nb == {0x7FC00000, 0xFFC00000}


def test_float16_nan_rule_is_numpys_software_rule():
    # numpy keeps the top 10 payload bits, does not set the quiet bit, and uses payload 1 if
    # they are all zero; decoding shifts the payload back (again without quieting).
    x = f32([0x7F800001, 0x7FA00000, 0xFF810000, 0x7FC00000, 0x7F802000])
    assert ml_encode(x, "float16").tolist() == [0x7C01, 0x7D00, 0xFC08, 0x7E00, 0x7C01]
    c = np.array([0x7C01, 0xFE00], np.uint16)
    assert bits(c.view(np.float16).astype(np.float32)).tolist() == [0x7F802000, 0xFFC00000]


# ------------------------------------------------------------------------- decode, exhaustive
@pytest.mark.parametrize("name", ML_FORMATS)
def test_decode_all_codes_equals_ml_dtypes(name):
    codes = all_codes(name)
    want = code_values(name)
    got = bitcodec.decode(codes, name)
    assert got.dtype == np.float32
    assert_same_bits(bits(got), bits(want), None, f"decode {name}")
    # and widen() (the interpreter's path) is the same, bit for bit
    assert_same_bits(bits(convert.widen(codes.view(D.storage(name)), name)), bits(want), None,
                     f"widen {name}")


def test_decode_tfloat32_is_identity_on_codes():
    codes = all_codes("tfloat32")
    assert_same_bits(bits(bitcodec.decode(codes, "tfloat32")), codes, None, "decode tf32")
    assert_same_bits(bits(convert.widen(codes.view(np.float32), "tfloat32")), codes, None, "widen tf32")


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_encode_roundtrips_every_code(name):
    codes = all_codes(name)
    vals = bitcodec.decode(codes, name)
    nan = np.isnan(vals)
    enc = bitcodec.encode(vals, name)
    assert_same_bits(enc[~nan], codes[~nan], vals[~nan], f"roundtrip {name}")
    # NaN codes: whatever the reference does with the decoded NaN (canonical, or fp16 payload)
    assert_same_bits(enc[nan], reference_encode(vals[nan], name), vals[nan], f"NaN roundtrip {name}")
    if name == "float16":
        assert_same_bits(enc[nan], codes[nan], vals[nan], "fp16 NaN payload roundtrip")
    assert_same_bits(round_to_bits(vals, name), reference_encode(vals, name), vals, f"round_to {name}")


# ------------------------------------------------------------------------ encode, midpoints
def midpoint_inputs(name: str):
    """fp32 inputs at every midpoint between adjacent non-negative finite values of `name`
    (incl. the virtual value above the max, i.e. the overflow threshold), +-1 fp32 ulp around
    each, both signs; plus the RNE answer derived from the code order."""
    with np.errstate(invalid="ignore"):              # signaling NaN codes -> float64
        vals = code_values(name).astype(np.float64)
    codes = all_codes(name).astype(np.int64)
    if name == "tfloat32":
        codes = codes >> 13
    keep = (codes < (1 << (bitcodec.FORMATS[name].width - 1 if name != "tfloat32" else 18))) \
        & np.isfinite(vals)
    v, k = vals[keep], codes[keep]
    order = np.argsort(v, kind="stable")
    v, k = v[order], k[order]
    assert np.all(np.diff(v) > 0) and np.all(np.diff(k) == 1)   # consecutive codes, increasing
    top_ulp = v[-1] - v[-2]
    nxt = np.append(v[1:], v[-1] + top_ulp)
    mid = ((v + nxt) / 2).astype(np.float32)
    assert np.all(mid.astype(np.float64) == (v + nxt) / 2)          # midpoints exact in fp32
    lo_code, hi_code = k, k + 1
    even = np.where(lo_code % 2 == 0, lo_code, hi_code)
    up = np.nextafter(mid, np.float32(np.inf))
    dn = np.nextafter(mid, np.float32(0))
    xs = np.concatenate([mid, up, dn])
    want = np.concatenate([even, hi_code, lo_code])
    f = bitcodec.FORMATS[name]
    max_code = f.max_code
    want = np.where(want > max_code, f.ovf_code, want)
    x = np.concatenate([xs, -xs])
    sign = (1 << 31) if name == "tfloat32" else 1 << (f.width - 1)
    if name == "tfloat32":
        want = want << 13
    want = np.concatenate([want, want | sign]).astype(f.code_dtype)
    return x, want


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_encode_all_midpoints(name):
    x, want_rne = midpoint_inputs(name)
    ref = reference_encode(x, name)
    assert_same_bits(ref, want_rne, x, f"reference RNE at midpoints {name}")
    assert_same_bits(bitcodec.encode(x, name), ref, x, f"bitcodec midpoints {name}")
    assert_same_bits(round_to_bits(x, name), ref, x, f"round_to midpoints {name}")


# --------------------------------------------------------------------------- encode, random
def random_inputs(name: str, n: int = 1_000_000, seed: int = 1) -> np.ndarray:
    """n uniform fp32 bit patterns (~0.4% NaN with random payloads) + n patterns whose
    exponent is concentrated around `name`'s subnormal..overflow range + specials."""
    rng = np.random.default_rng(seed + sum(map(ord, name)))
    uni = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    f = bitcodec.FORMATS[name]
    lo_e = max(127 - f.bias - f.man_bits - 3, 0)
    hi_e = min(127 + f.bias + 2, 255)
    e = rng.integers(lo_e, hi_e + 1, size=n, dtype=np.uint64).astype(np.uint32)
    m = rng.integers(0, 1 << 23, size=n, dtype=np.uint64).astype(np.uint32)
    # mantissas near the rounding point: low S bits 0x..., 100..0 +- small
    s = f.shift
    near = (m & ~np.uint32((1 << s) - 1)) | np.uint32(1 << (s - 1))
    delta = rng.integers(-2, 3, size=n).astype(np.int64)
    m = np.where(rng.random(n) < 0.5, m, ((near.astype(np.int64) + delta) & 0x7FFFFF).astype(np.uint32))
    sg = rng.integers(0, 2, size=n, dtype=np.uint64).astype(np.uint32) << np.uint32(31)
    tgt = sg | (e << np.uint32(23)) | m
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                         0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x00000001, 0x80000001,
                         0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    return np.concatenate([uni, tgt, specials]).view(np.float32)


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_encode_random_bit_patterns(name):
    x = random_inputs(name)
    ref = reference_encode(x, name)
    assert_same_bits(bitcodec.encode(x, name), ref, x, f"bitcodec random {name}")
    assert_same_bits(round_to_bits(x, name), ref, x, f"round_to random {name}")
    assert_same_bits(bitcodec.encode(bits(x), name), ref, x, "encode accepts uint32 bits")


def test_tf32_reference_agrees_with_ml_dtypes_style_rne_for_bf16():
    """Sanity check of the float64 reference technique itself: the same frexp/rint rounding
    with 7 mantissa bits reproduces ml_dtypes' bfloat16 on random finite inputs."""
    x = random_inputs("bfloat16", n=200_000)
    x = x[np.isfinite(x)]
    x64 = x.astype(np.float64)
    _, e = np.frexp(x64)
    q = np.maximum(e - 1, -126) - 7
    with np.errstate(over="ignore"):
        r = np.ldexp(np.rint(np.ldexp(x64, -q)), q).astype(np.float32)
    assert_same_bits(bits(r.astype(ml_dtypes.bfloat16)), ml_encode(x, "bfloat16"), x, "ref check")


# ------------------------------------------------------------------- exhaustive (slow, 2**32)
@pytest.mark.parametrize("name", ALL_FORMATS)
@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="slow exhaustive profile: set NKI_LITE_SLOW_TESTS=1")
def test_encode_every_fp32_bit_pattern(name):
    chunk = 1 << 24
    for start in range(0, 1 << 32, chunk):
        u = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)
        x = u.view(np.float32)
        ref = reference_encode(x, name)
        assert_same_bits(bitcodec.encode(u, name), ref, x, f"bitcodec all-fp32 {name}")


# ------------------------------------------------------------------------ round_to: other rules
@pytest.mark.parametrize("name", INT_NAMES)
def test_float_to_int_trunc_saturate_nan(name):
    ii = np.iinfo(D.storage(name))
    lo, hi = int(ii.min), int(ii.max)
    below_hi = float(np.nextafter(np.float32(hi + 1), np.float32(0)))   # largest f32 < 2**bits
    cases = [0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 2.5, -2.5, 2.7, -2.7,
             100.9, -100.9, hi, hi + 1.0, 2.0 * hi + 7, lo, lo - 1.0, lo * 4.0 - 1, below_hi,
             1e30, -1e30, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45]
    x = np.array(cases, dtype=np.float32)
    got = convert.round_to(x, name)
    assert got.dtype == D.storage(name)

    def ref(v):
        if np.isnan(v):
            return 0
        if np.isinf(v):
            return hi if v > 0 else lo
        t = int(v)                       # Python int() truncates toward zero, exact
        return min(max(t, lo), hi)
    assert got.tolist() == [ref(float(v)) for v in x]
    # random: every float32 pattern class, against the same exact rule
    y = random_inputs("bfloat16", n=20_000, seed=7)
    assert convert.round_to(y, name).tolist() == [ref(float(v)) for v in y]
    # float formats other than float32 (storage arrays) take the same path exactly
    z = np.array([2.75, -2.75, 300.0, -300.0, np.nan], np.float32).astype(ml_dtypes.bfloat16)
    assert convert.round_to(z, name).tolist() == [ref(float(v)) for v in z.astype(np.float32)]


@pytest.mark.parametrize("name", INT_NAMES)
def test_int64_to_int_wraps(name):
    bitsn = D.info(name).bits
    lo = int(np.iinfo(D.storage(name)).min)
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.integers(-(1 << 63), (1 << 63) - 1, size=5000, dtype=np.int64),
                        np.array([0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535,
                                  65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, -(2**31), -(2**31) - 1,
                                  -(2**63), 2**63 - 1], dtype=np.int64)])
    got = convert.round_to(v, name)
    assert got.dtype == D.storage(name)
    want = [((int(t) - lo) % (1 << bitsn)) + lo for t in v]
    assert got.tolist() == want


def test_to_bool_and_from_bool():
    x = np.array([0.0, -0.0, 1e-45, -1.0, np.inf, np.nan, 2.0], np.float32)
    assert convert.round_to(x, "bool").tolist() == [False, False, True, True, True, True, True]
    assert convert.round_to(x, "bool").dtype == np.bool_
    i = np.array([0, 1, -1, 256, 2**40], np.int64)
    assert convert.round_to(i, "bool").tolist() == [False, True, True, True, True]
    b = np.array([True, False])
    for name in VALUE_DTYPES:
        got = convert.round_to(b, name)
        assert got.dtype == D.storage(name)
        assert got.astype(np.float32).tolist() == [1.0, 0.0], name
    assert convert.widen(b, "bool").tolist() == [1.0, 0.0]
    assert convert.to_int64(b).tolist() == [1, 0]


def test_int_to_float32_rounds_to_nearest_even():
    v = np.array([2**24, 2**24 + 1, 2**24 + 2, 2**24 + 3, 2**31 - 1, -(2**31), -(2**31) + 1,
                  2**32 - 1, 2**32 - 129, 2**32 - 128, 2**32 - 127, 16777217 * 3, -16777217],
                 dtype=np.int64)
    rng = np.random.default_rng(5)
    v = np.concatenate([v, rng.integers(-(2**31), 2**32, size=20_000, dtype=np.int64)])
    # reference: int -> float64 is exact for |v| < 2**53, float64 -> float32 is one RNE rounding
    want = np.array([float(t) for t in v], np.float64).astype(np.float32)
    assert_same_bits(bits(convert.round_to(v, "float32")), bits(want), None, "int64->f32")
    assert float(convert.round_to(np.array([2**24 + 1]), "float32")[0]) == 2**24        # tie->even
    assert float(convert.round_to(np.array([2**24 + 3]), "float32")[0]) == 2**24 + 4
    for st in ("int32", "uint32"):
        w = v[(v >= np.iinfo(st).min) & (v <= np.iinfo(st).max)].astype(st)
        assert_same_bits(bits(convert.widen(w, st)), bits(np.array([float(t) for t in w]).astype(np.float32)),
                         None, f"widen {st}")
    for st in ("int8", "int16", "uint8", "uint16"):
        ii = np.iinfo(st)
        w = np.arange(ii.min, ii.max + 1).astype(st)
        assert np.array_equal(convert.widen(w, st), w.astype(np.float64)), st   # exact


def test_int_to_narrow_float_goes_through_float32():
    # documented double rounding: int -> float32 (RNE) -> bfloat16 (RNE)
    v = np.array([2**24 + 2**16 + 1], np.int64)       # f32: tie -> 2**24+2**16, bf16: tie -> 2**24
    assert float(convert.round_to(v, "bfloat16").astype(np.float32)[0]) == 2.0**24
    rng = np.random.default_rng(11)
    w = rng.integers(-(2**31), 2**32, size=10_000, dtype=np.int64)
    for name in ALL_FORMATS:
        want = reference_encode(w.astype(np.float32), name)
        assert_same_bits(round_to_bits(w, name), want, None, f"int->{name}")


def test_to_int64_exact_for_int_storage():
    for name in INT_NAMES:
        ii = np.iinfo(D.storage(name))
        v = np.array([ii.min, ii.min + 1, -1 if ii.min < 0 else 0, 0, 1, ii.max - 1, ii.max],
                     dtype=D.storage(name))
        got = convert.to_int64(v)
        assert got.dtype == np.int64 and got.tolist() == [int(t) for t in v]
    x = np.array([2.7, -2.7, np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0], np.float32)
    assert convert.to_int64(x).tolist() == [2, -2, 0, 2**63 - 1, -(2**63), 2**63 - 1, -(2**63), 0]


def test_widen_exact_for_all_float_formats():
    for name in ML_FORMATS:
        vals = code_values(name)
        with np.errstate(invalid="ignore"):
            back = convert.widen(vals.astype(D.storage(name)), name)
        fin = np.isfinite(vals)
        assert np.array_equal(back[fin].astype(np.float64), vals[fin].astype(np.float64))
        assert np.array_equal(np.isnan(back), np.isnan(vals))


# ---------------------------------------------------------------- every dtype, any array layout
LAYOUT_SRC = np.array([[1.5, -2.25, 300.0, -7e4], [np.nan, np.inf, -0.0, 1e-40],
                       [250.0, 65519.0, 3.999, -1e30]], dtype=np.float32)


def _layouts(a: np.ndarray):
    big = np.repeat(np.repeat(a, 2, axis=0), 3, axis=1)
    return {"transposed": a.T, "strided": big[::2, ::3], "negative": a[::-1, ::-2],
            "zero_d": np.array(a[0, 2]), "broadcast": np.broadcast_to(a[0], (3, 4)),
            "fortran": np.asfortranarray(a)}


@pytest.mark.parametrize("name", VALUE_DTYPES)
def test_round_to_any_layout_and_storage_dtype(name):
    srcs = [LAYOUT_SRC, np.array([[1, -1, 300, -70000], [2**31, 2**40, -5, 0]], np.int64)]
    for src in srcs:
        for label, view in _layouts(src).items():
            got = convert.round_to(view, name)
            want = convert.round_to(np.array(view, order="C", copy=True), name)
            assert got.dtype == D.storage(name), (label, got.dtype)
            assert got.shape == view.shape, label
            assert got.flags.c_contiguous, label
            assert np.array_equal(bits(got), bits(want)), (name, label)
            assert not np.shares_memory(got, src), label


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_bitcodec_any_layout(name):
    for label, view in _layouts(LAYOUT_SRC).items():
        got = bitcodec.encode(view, name)
        assert got.shape == view.shape
        assert np.array_equal(got, bitcodec.encode(view.copy(order="C"), name)), label
        dec = bitcodec.decode(got, name)
        assert dec.shape == view.shape
        assert np.array_equal(bits(dec), bits(bitcodec.decode(np.array(got, order="C"), name)))
        if got.ndim:
            assert np.array_equal(bits(bitcodec.decode(got.T, name)), bits(dec.T))


def test_bitcodec_rejects_wrong_dtypes():
    with pytest.raises(TypeError):
        bitcodec.encode(np.zeros(3, np.float64), "bfloat16")
    with pytest.raises(TypeError):
        bitcodec.decode(np.zeros(3, np.uint8), "bfloat16")
    with pytest.raises(ValueError):
        bitcodec.encode(np.zeros(3, np.float32), "int8")


def test_round_to_emits_no_warnings():
    import warnings
    x = np.array([np.nan, np.inf, 1e30, -1e30, 1e-45], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in VALUE_DTYPES:
            convert.round_to(x, name)
            convert.widen(convert.round_to(x, name), name)
