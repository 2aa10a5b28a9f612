"""nki_lite.lower.llvm.convert: the JIT's dtype conversions, bit for bit against the numpy contract.

Each conversion is compiled into a tiny module whose driver `void @run(ptr %in, ptr %out, i64 %n)`
runs a 16-wide vector body and a width-1 scalar tail (element-aligned loads/stores), and is called
on numpy buffers. References: ml_dtypes / numpy `astype` (decode), `numerics.convert.round_to`
(encode, float -> int, int64 -> int), `convert.widen` (int -> float32), `convert.to_int64`.

Exhaustive: every fp8 code (3 formats), every bf16 and fp16 code, every tf32 code (decode); every
rounding midpoint +-1 fp32 ulp of every format (encode); every 8/16-bit integer (int -> f32/i64).
Random: ~2 M fp32 bit patterns per format; lengths 1, 15, 16, 17, 1000003 and odd offsets for the
vector body / scalar tail split. A second driver runs the same functions with MXCSR FTZ+DAZ set.
"""
from __future__ import annotations

import ctypes
import os
import functools

import ml_dtypes
import numpy as np
import pytest

from nki_lite.core import dtypes as D
from nki_lite.lower.llvm import convert as LC
from nki_lite.lower.llvm import target
from nki_lite.numerics import convert

from .test_conversions import all_codes, bits, midpoint_inputs, random_inputs

pytestmark = pytest.mark.skipif(not target.jit_supported(), reason="no LLVM JIT on this host")

FLOATS = ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "tfloat32"]
INTS = ["int8", "int16", "int32", "uint8", "uint16", "uint32", "bool"]
VW = 16
_NP_BITS = {"float": np.uint32, "i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}
_SIZE = {"float": 4, "i8": 1, "i16": 2, "i32": 4, "i64": 8}
_RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_RUN_FTZ = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)

GEN = LC.GENERATORS
_types = LC.io_types


def driver_ir(kind: str, name: str, run_attrs: str = "", vw: int = VW) -> str:
    """Functions for widths `vw` (16) and 1 plus `@run(in, out, n)`: vector body, scalar tail."""
    return LC.array_driver(kind, name, vw, run_attrs)


# MXCSR bit 15 = FTZ, bit 6 = DAZ. @probe (noinline) computes 2^-100 * 2^-40 (a subnormal result:
# 0 under FTZ) and 2^-149 * 2^100 (a subnormal input: 0 under DAZ) so the test can see the mode
# really was active while @run ran; the MXCSR value read back is stored too.
FTZ_DRIVER = """
define void @probe(ptr %p) noinline {
  %a = load float, ptr %p, align 4
  %pb = getelementptr float, ptr %p, i64 1
  %b = load float, ptr %pb, align 4
  %m = fmul float %a, %b
  %pc = getelementptr float, ptr %p, i64 2
  store float %m, ptr %pc, align 4
  %pd = getelementptr float, ptr %p, i64 3
  %d = load float, ptr %pd, align 4
  %pe = getelementptr float, ptr %p, i64 4
  %e = load float, ptr %pe, align 4
  %de = fmul float %d, %e
  %pf = getelementptr float, ptr %p, i64 5
  store float %de, ptr %pf, align 4
  ret void
}

define void @run_ftz(ptr %in, ptr %out, i64 %n, ptr %p) {
entry:
  %old = alloca i32, align 4
  %new = alloca i32, align 4
  %seen = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %old)
  %o = load i32, ptr %old, align 4
  %nw = or i32 %o, 32832
  store i32 %nw, ptr %new, align 4
  call void @llvm.x86.sse.ldmxcsr(ptr %new)
  call void @run(ptr %in, ptr %out, i64 %n)
  call void @probe(ptr %p)
  call void @llvm.x86.sse.stmxcsr(ptr %seen)
  call void @llvm.x86.sse.ldmxcsr(ptr %old)
  %s = load i32, ptr %seen, align 4
  %pm = getelementptr i32, ptr %p, i64 6
  store i32 %s, ptr %pm, align 4
  ret void
}

declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
"""


class Conv:
    """One compiled conversion: `conv(x)` runs @run over x (any length, contiguous)."""

    def __init__(self, kind: str, name: str, ftz: bool = False, vw: int = VW):
        self.kind, self.name = kind, name
        self.ti, self.to = _types(kind, name)
        ir = driver_ir(kind, name, "noinline" if ftz else "", vw)
        if ftz:
            ir += FTZ_DRIVER
        self.mod = target.compile_module(ir, f"conv_{kind}_{name}")
        self.run = _RUN(self.mod.address("run"))
        self.run_ftz = _RUN_FTZ(self.mod.address("run_ftz")) if ftz else None

    def in_bits(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        want = np.dtype(_NP_BITS[self.ti])
        assert x.dtype.itemsize == want.itemsize, (self.kind, self.name, x.dtype)
        return x.view(want)

    def __call__(self, x: np.ndarray, ftz: bool = False) -> np.ndarray:
        xb = self.in_bits(x)
        out = np.full(len(xb), 0xA5, np.uint8).view(np.uint8).repeat(_SIZE[self.to]).view(_NP_BITS[self.to])
        if ftz:
            probe = np.zeros(8, np.float32)
            probe[:5] = [2.0**-100, 2.0**-40, 0, 2.0**-149, 2.0**100]
            self.run_ftz(xb.ctypes.data, out.ctypes.data, len(xb), probe.ctypes.data)
            mx = int(probe[6:7].view(np.uint32)[0])
            assert mx & 0x8040 == 0x8040, hex(mx)              # FTZ and DAZ were set ...
            assert probe[2] == 0.0 and probe[5] == 0.0, probe  # ... and in effect
        else:
            self.run(xb.ctypes.data, out.ctypes.data, len(xb))
        return out


@functools.lru_cache(maxsize=None)
def conv(kind: str, name: str, ftz: bool = False, vw: int = VW) -> Conv:
    return Conv(kind, name, ftz, vw)


def assert_same(got, want, x, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[:8]
        xs = [hex(int(v)) for v in np.asarray(x).view(_NP_BITS[{1: "i8", 2: "i16", 4: "i32", 8: "i64"}
                                                                [np.asarray(x).dtype.itemsize]])[i]]
        pytest.fail(f"{what}: {len(bad)} mismatches of {len(got)}, e.g. inputs {xs}: "
                    f"got {[hex(int(v)) for v in got[i]]} want {[hex(int(v)) for v in want[i]]}")


def out_bits(a: np.ndarray) -> np.ndarray:
    return bits(np.ascontiguousarray(a))


def ref_encode_bits(x: np.ndarray, name: str) -> np.ndarray:
    return out_bits(convert.round_to(x, name))


def uniform_f32(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)


# ----------------------------------------------------------------------------------------- API
def test_api_types_and_names():
    assert set(LC.STORAGE_LLVM) == set(D.INFO)
    for name, ty in LC.STORAGE_LLVM.items():
        want = "float" if D.storage(name) == np.float32 else f"i{8 * D.itemsize(name)}"
        assert ty == want, name
    assert LC.vec("float", 1) == "float" and LC.vec("float", 16) == "<16 x float>"
    assert LC.vec("i8", 4) == "<4 x i8>"
    names = set()
    for kind, gen in GEN.items():
        for name in (FLOATS + ["float32"] if kind in ("dec", "enc") else INTS):
            for w in (1, 4, 16, 32):
                fn, ir = gen(name, w)
                assert ir.startswith(f"define internal ") and f"@{fn}(" in ir and "alwaysinline" in ir
                assert (fn, ir) == gen(name, w)                       # deterministic
                assert fn not in names
                names.add(fn)
    assert LC.decode("bfloat16", 16)[0] == "nkl_dec_bfloat16_v16"
    with pytest.raises(ValueError):
        LC.encode("int8", 16)
    with pytest.raises(ValueError):
        LC.int_from_f32("bfloat16", 16)
    with pytest.raises(ValueError):
        LC.decode("bfloat16", 0)


def test_all_functions_in_one_module_parse_with_explicit_declares():
    """Every generator at several widths in one module (as the codegen will include them), plus
    explicit intrinsic declarations that a caller might also emit: valid IR, compiles."""
    parts = ["declare <16 x i32> @llvm.umin.v16i32(<16 x i32>, <16 x i32>)",
             "declare i32 @llvm.ctlz.i32(i32, i1)"]
    for kind, gen in GEN.items():
        for name in (FLOATS + ["float32"] if kind in ("dec", "enc") else INTS):
            for w in (1, 8, 16, 64):
                parts.append(gen(name, w)[1])
    m = target.compile_module("\n".join(parts), "all_convs")
    assert m.timings["opt_ms"] >= 0


# -------------------------------------------------------------------------------------- decode
@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16"])
def test_decode_every_code(name):
    codes = all_codes(name)                                  # 256 or 65536, NaN codes included
    with np.errstate(invalid="ignore"):
        want = bits(codes.view(D.storage(name)).astype(np.float32))
    c = conv("dec", name)
    assert_same(c(codes), want, codes, f"decode {name}")
    for lo, hi in [(1, len(codes)), (3, 3 + 17), (5, 5 + 15), (7, 8), (0, 16)]:   # tails, offsets
        assert_same(c(codes[lo:hi]), want[lo:hi], codes[lo:hi], f"decode {name} [{lo}:{hi}]")
    # shuffled, so every vector lane sees every code class
    perm = np.random.default_rng(0).permutation(np.tile(np.arange(len(codes)), 4))
    assert_same(c(codes[perm]), want[perm], codes[perm], f"decode {name} shuffled")


def test_decode_tfloat32_and_float32_are_identity():
    codes = (np.arange(1 << 19, dtype=np.uint32) << np.uint32(13))
    u = np.concatenate([codes, uniform_f32(100_003, 1).view(np.uint32)])   # any container bits
    for name in ("tfloat32", "float32"):
        assert_same(conv("dec", name)(u), u, u, f"decode {name}")
        assert_same(bits(convert.widen(u.view(np.float32), name)), u, u, f"widen {name}")


# -------------------------------------------------------------------------------------- encode
@pytest.mark.parametrize("name", FLOATS)
def test_encode_every_midpoint(name):
    x, want_rne = midpoint_inputs(name)
    ref = ref_encode_bits(x, name)
    assert_same(ref, want_rne.view(ref.dtype) if name == "tfloat32" else want_rne, x, "reference")
    c = conv("enc", name)
    assert_same(c(x), ref, x, f"encode midpoints {name}")
    perm = np.random.default_rng(2).permutation(len(x))
    assert_same(c(x[perm]), ref[perm], x[perm], f"encode midpoints shuffled {name}")


@pytest.mark.parametrize("name", FLOATS)
def test_encode_random_bit_patterns_and_lengths(name):
    x = np.concatenate([uniform_f32(1_000_003, 11), random_inputs(name, n=500_000, seed=5)])
    ref = ref_encode_bits(x, name)
    c = conv("enc", name)
    assert_same(c(x), ref, x, f"encode random {name}")
    for off, n in [(0, 1), (1, 15), (2, 16), (3, 17), (5, 1_000_003), (1_000_003, 33)]:
        xs = x[off:off + n]
        assert_same(c(xs), ref[off:off + n], xs, f"encode {name} [{off}:+{n}]")


@pytest.mark.parametrize("vw", [4, 8, 32, 64])
def test_other_vector_widths(vw):
    x = np.concatenate([uniform_f32(50_000, 13), midpoint_inputs("float8_e4m3")[0]])
    for name in ["float8_e4m3", "float16", "bfloat16"]:
        assert_same(conv("enc", name, vw=vw)(x), ref_encode_bits(x, name), x, f"encode {name} w{vw}")
        codes = all_codes(name)
        with np.errstate(invalid="ignore"):
            want = bits(codes.view(D.storage(name)).astype(np.float32))
        assert_same(conv("dec", name, vw=vw)(codes), want, codes, f"decode {name} w{vw}")
    for name in ["int8", "uint32", "bool"]:
        assert_same(conv("f2i", name, vw=vw)(x), out_bits(convert.round_to(x, name)), x, f"f2i {name} w{vw}")


def test_encode_float32_is_identity():
    x = uniform_f32(100_017, 3)
    assert_same(conv("enc", "float32")(x), bits(x), x, "encode float32")


def test_encode_decode_roundtrip_every_code():
    for name in ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "bfloat16", "float16"]:
        codes = all_codes(name)
        vals = conv("dec", name)(codes).view(np.float32)
        assert_same(conv("enc", name)(vals), ref_encode_bits(vals, name), vals, f"roundtrip {name}")


# ------------------------------------------------------------------------------ int conversions
def f32_edge_values() -> np.ndarray:
    v = [0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 1.5, -1.5, 2.5, -2.5, 126.9, 127.0,
         127.5, 128.0, -128.0, -128.5, -129.0, 255.0, 255.5, 256.0, -1.0, 32767.5, 32768.0, -32768.9,
         -32769.0, 65535.0, 65535.9, 65536.0, 2.0**24, 2.0**24 + 2, -(2.0**24), 2.0**31, -(2.0**31),
         2.0**32, -(2.0**32), 1e30, -1e30, np.inf, -np.inf, 1e-45, -1e-45, 1e-40, -1e-40,
         1.17549435e-38, 3.4028235e38, -3.4028235e38]
    x = np.array(v, np.float32)
    below = [np.nextafter(np.float32(t), np.float32(0)) for t in (2.0**31, -(2.0**31), 2.0**32, 2.0**8,
                                                                  2.0**16, 2.0**15, -(2.0**15), -(2.0**7))]
    above = [np.nextafter(np.float32(t), np.float32(np.inf)) for t in (2.0**31, -(2.0**31), 2.0**32)]
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF],
                    np.uint32).view(np.float32)
    return np.concatenate([x, np.array(below + above, np.float32), nans])


def f32_int_inputs() -> np.ndarray:
    rng = np.random.default_rng(21)
    near = rng.uniform(-70_000, 70_000, 200_000).astype(np.float32)
    big = (rng.uniform(-1, 1, 200_000) * 2.0**rng.integers(0, 34, 200_000)).astype(np.float32)
    return np.concatenate([f32_edge_values(), uniform_f32(300_001, 22), near, big])


@pytest.mark.parametrize("name", INTS)
def test_int_from_f32(name):
    x = f32_int_inputs()
    ref = out_bits(convert.round_to(x, name))
    got = conv("f2i", name)(x)
    assert_same(got, ref, x, f"f32 -> {name}")
    e = f32_edge_values()
    assert_same(conv("f2i", name)(e), out_bits(convert.round_to(e, name)), e, f"f32 -> {name} (edges)")
    if name == "bool":
        assert got.max() == 1
        nan = np.array([np.nan, -0.0, 1e-45], np.float32)
        assert conv("f2i", name)(nan).tolist() == [1, 0, 1] == convert.round_to(nan, "bool").astype(int).tolist()


@pytest.mark.parametrize("name", INTS)
def test_int_from_i64_wraps(name):
    rng = np.random.default_rng(31)
    v = np.concatenate([
        np.array([0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535, 65536, 2**31 - 1, 2**31,
                  2**32 - 1, 2**32, -(2**31), -(2**31) - 1, -(2**63), 2**63 - 1, 2**40], np.int64),
        rng.integers(-(1 << 63), (1 << 63) - 1, size=100_003, dtype=np.int64),
        rng.integers(-70_000, 70_000, size=100_000, dtype=np.int64)])
    assert_same(conv("l2i", name)(v), out_bits(convert.round_to(v, name)), v, f"i64 -> {name}")


def int_storage_values(name: str) -> np.ndarray:
    st = D.storage(name)
    if name == "bool":
        return np.array([0, 1] * 20 + [1, 0, 0, 1, 1], np.uint8).view(np.bool_)
    ii = np.iinfo(st)
    if ii.bits <= 16:
        return np.arange(ii.min, ii.max + 1).astype(st)
    rng = np.random.default_rng(41)
    edges = [ii.min, ii.min + 1, -1, 0, 1, 2**24, 2**24 + 1, 2**24 + 3, 2**31 - 1, 2**31 - 64,
             2**31 - 65, 2**32 - 1, 2**32 - 129, 2**32 - 128, 2**32 - 127, 16777217 * 3, -16777217,
             ii.max - 1, ii.max]
    edges = [t for t in edges if ii.min <= t <= ii.max]
    return np.concatenate([np.array(edges, np.int64),
                           rng.integers(ii.min, int(ii.max) + 1, 500_003, dtype=np.int64)]).astype(st)


@pytest.mark.parametrize("name", INTS)
def test_f32_and_i64_from_int(name):
    v = int_storage_values(name)
    assert_same(conv("i2f", name)(v), bits(convert.widen(v, name)), v, f"{name} -> f32")
    ref64 = np.array([float(t) for t in v[:50_000].astype(np.int64)], np.float64).astype(np.float32)
    assert_same(conv("i2f", name)(v[:50_000]), bits(ref64), v[:50_000], f"{name} -> f32 (exact ref)")
    assert_same(conv("i2l", name)(v), bits(convert.to_int64(v)), v, f"{name} -> i64")


def test_bool_storage_reads_any_nonzero_byte_as_true():
    b = np.array([0, 1, 2, 255, 0, 128] * 3, np.uint8)
    assert conv("i2f", "bool")(b).view(np.float32).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 1.0] * 3
    assert conv("i2l", "bool")(b).view(np.int64).tolist() == [0, 1, 1, 1, 0, 1] * 3


# ------------------------------------------------------------------- FTZ / DAZ independence
def subnormal_heavy_f32() -> np.ndarray:
    rng = np.random.default_rng(51)
    sub = rng.integers(0, 1 << 23, 40_000, dtype=np.uint64).astype(np.uint32)     # fp32 subnormals
    small = ((rng.integers(80, 128, 40_000, dtype=np.uint64).astype(np.uint32) << np.uint32(23))
             | rng.integers(0, 1 << 23, 40_000, dtype=np.uint64).astype(np.uint32))  # fmt subnormals
    u = np.concatenate([sub, small, np.array([1, 0x7FFFFF, 0x800000, 0, 0x80000000], np.uint32)])
    u = np.concatenate([u, u | np.uint32(0x80000000)])
    return u.view(np.float32)


@pytest.mark.parametrize("name", FLOATS)
def test_codecs_identical_with_ftz_and_daz_set(name):
    c = conv("dec", name, ftz=True)
    codes = all_codes(name) if name != "tfloat32" else subnormal_heavy_f32().view(np.uint32)
    plain = c(codes)
    assert_same(c(codes, ftz=True), plain, codes, f"decode {name} under FTZ/DAZ")
    if name != "tfloat32":
        with np.errstate(invalid="ignore"):
            assert_same(plain, bits(codes.view(D.storage(name)).astype(np.float32)), codes, f"decode {name}")
    x = subnormal_heavy_f32()
    e = conv("enc", name, ftz=True)
    assert_same(e(x, ftz=True), ref_encode_bits(x, name), x, f"encode {name} under FTZ/DAZ")


@pytest.mark.parametrize("name", ["bool", "int8", "uint32", "int32"])
def test_float_to_int_identical_with_ftz_and_daz_set(name):
    x = np.concatenate([subnormal_heavy_f32(), f32_edge_values()])
    c = conv("f2i", name, ftz=True)
    assert_same(c(x, ftz=True), out_bits(convert.round_to(x, name)), x, f"f32 -> {name} under FTZ/DAZ")


# ------------------------------------------------------------------------------------ assembly
def test_bf16_encoder_asm_is_integer_only():
    asm = conv("enc", "bfloat16").mod.asm().lower()
    assert "vcvtneps2bf16" not in asm
    asm16 = conv("enc", "float16").mod.asm().lower()
    assert "vcvtps2ph" not in asm16


def test_float_to_bool_survives_a_caller_that_tests_it_under_daz():
    """InstCombine turns `(bits & 0x7FFFFFFF) != 0` into `fcmp une x, 0.0` (wrong under DAZ).
    The generated form must stay integer even when the caller branches/selects on the result."""
    f16, ir16 = LC.int_from_f32("bool", VW)
    ir = ir16 + f"""
define void @run(ptr noalias %in, ptr noalias %out, i64 %n) noinline {{
entry:
  br label %h
h:
  %i = phi i64 [ 0, %entry ], [ %i2, %b ]
  %c = icmp ult i64 %i, %n
  br i1 %c, label %b, label %done
b:
  %pi = getelementptr float, ptr %in, i64 %i
  %x = load <{VW} x float>, ptr %pi, align 4
  %y = call <{VW} x i8> @{f16}(<{VW} x float> %x)
  %yc = icmp ne <{VW} x i8> %y, zeroinitializer
  %z = select <{VW} x i1> %yc, <{VW} x float> splat (float 0x4000000000000000), <{VW} x float> %x
  %po = getelementptr float, ptr %out, i64 %i
  store <{VW} x float> %z, ptr %po, align 4
  %i2 = add i64 %i, {VW}
  br label %h
done:
  ret void
}}
""" + FTZ_DRIVER
    m = target.compile_module(ir, "bool_pred")
    assert "fcmp" not in m.llvm_ir          # (the module's only float op is @probe's fmul)
    x = np.concatenate([subnormal_heavy_f32(), f32_edge_values()])
    x = x[: len(x) // VW * VW]
    out = np.zeros(len(x), np.float32)
    probe = np.zeros(8, np.float32)
    probe[:5] = [2.0**-100, 2.0**-40, 0, 2.0**-149, 2.0**100]
    _RUN_FTZ(m.address("run_ftz"))(x.ctypes.data, out.ctypes.data, len(x), probe.ctypes.data)
    assert probe[2] == 0.0 and probe[5] == 0.0
    want = np.where(convert.round_to(x, "bool"), np.float32(2.0), x)
    assert_same(bits(out), bits(want), x, "bool predicate under DAZ")


# ------------------------------------------------------------------- exhaustive (slow, 2**32)
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NKI_LITE_SLOW_TESTS") != "1",
                    reason="slow exhaustive profile: set NKI_LITE_SLOW_TESTS=1")
@pytest.mark.parametrize("kind,name", [("enc", n) for n in FLOATS] + [("f2i", n) for n in INTS])
def test_every_fp32_bit_pattern(kind, name):
    c = conv(kind, name)
    chunk = 1 << 24
    for start in range(0, 1 << 32, chunk):
        u = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)
        x = u.view(np.float32)
        assert_same(c(x), out_bits(convert.round_to(x, name)), x, f"{kind} {name} all fp32")
