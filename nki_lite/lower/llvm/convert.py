"""LLVM IR text for every dtype conversion, bit-identical to `numerics.convert` (the numpy contract).

Contract (the codegen calls exactly this API; docs/llvm_conversions.md has the techniques and the
instructions they become):

- `STORAGE_LLVM[name]`: LLVM scalar type holding one value of dtype `name` in memory
  (float32/tfloat32 -> float, bfloat16/float16 -> i16, float8_* -> i8, intN/uintN -> iN,
  bool -> i8 holding 0/1).
- `vec(ty, width)`: `ty` for width 1, `<width x ty>` otherwise.
- Every generator below returns `(fn_name, ir_text)`: one self-contained
  `define internal <ret> @fn_name(<arg> %x) alwaysinline nounwind { ... }`. The name is
  deterministic and unique per (conversion, dtype, width) — e.g. `nkl_dec_bfloat16_v16` — so a
  caller that includes each name once per module can never get two different bodies under one
  name. Intrinsics (`llvm.ctlz`, `llvm.umin`, `llvm.umax`) are called without `declare`: LLVM 22's parser declares intrinsics on first use, and an explicit
  `declare` elsewhere in the module does not conflict.
    decode(name, W)        <W x STORAGE> -> <W x float>    widen a float dtype to fp32, exactly
    encode(name, W)        <W x float>   -> <W x STORAGE>  round fp32 to a float dtype (RNE)
    int_from_f32(name, W)  <W x float>   -> <W x STORAGE>  trunc toward zero, saturate, NaN -> 0;
                                                           bool: x != 0 (NaN -> 1, -0.0 -> 0)
    int_from_i64(name, W)  <W x i64>     -> <W x STORAGE>  wrap (trunc); bool: != 0
    f32_from_int(name, W)  <W x STORAGE> -> <W x float>    sitofp/uitofp (RNE); bool: 0.0/1.0
    i64_from_int(name, W)  <W x STORAGE> -> <W x i64>      sext (signed) / zext (unsigned, bool)
- Float encode/decode use integer operations only (the sequences of `numerics/bitcodec.py`):
  no fptrunc, no `half`/`bfloat` types, no vcvtneps2bf16, no float magic-add. They are therefore
  independent of MXCSR rounding mode and FTZ/DAZ: fp32 subnormal inputs and subnormal results are
  exact. Float -> bool tests the magnitude bits (an `fcmp` would see a DAZ-flushed subnormal as
  0). Float -> int clamps with fcmp/select against integer-valued constants and then truncates
  (vcvttps2dq/udq): exact under DAZ too (a subnormal truncates to 0 either way) and independent of
  the rounding mode. Int -> float (vcvt[u]dq2ps) rounds by MXCSR: RNE is the process default and
  the contract. It never produces subnormals.
- Bool storage is read as "byte != 0" (numpy writes 0/1) and written as 0/1.
"""
from __future__ import annotations

import struct

import numpy as np

from ...core import dtypes as D

__all__ = ["STORAGE_LLVM", "vec", "decode", "encode", "int_from_f32", "int_from_i64",
           "f32_from_int", "i64_from_int", "FLOAT_NAMES", "INT_NAMES"]

STORAGE_LLVM: dict[str, str] = {
    "float32": "float", "tfloat32": "float",
    "bfloat16": "i16", "float16": "i16",
    "float8_e4m3": "i8", "float8_e4m3fn": "i8", "float8_e5m2": "i8",
    "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16", "int32": "i32", "uint32": "i32",
    "bool": "i8",
    # MX containers (raw bits; numerics/mx.py, lower/llvm/rules_mx.py)
    "float8_e4m3fn_x4": "i32", "float8_e5m2_x4": "i32", "float4_e2m1fn_x4": "i16", "float8_e8m0fnu": "i8",
}

FLOAT_NAMES = ("float32", "tfloat32", "bfloat16", "float16",
               "float8_e4m3", "float8_e4m3fn", "float8_e5m2")
INT_NAMES = ("int8", "int16", "int32", "uint8", "uint16", "uint32", "bool")

# (E, M, B, max magnitude code, overflow code, NaN magnitude code on encode, IEEE-like specials)
# — the table of numerics/bitcodec.py (docs/numerics_conversions.md §1).
_FMT = {
    "float8_e4m3": (4, 3, 7, 0x77, 0x78, 0x7C, True),
    "float8_e4m3fn": (4, 3, 7, 0x7E, 0x7F, 0x7F, False),
    "float8_e5m2": (5, 2, 15, 0x7B, 0x7C, 0x7E, True),
    "float16": (5, 10, 15, 0x7BFF, 0x7C00, 0x7C00, True),
}


_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def vec(ty: str, width: int) -> str:
    if width < 1:
        raise ValueError(f"vector width must be >= 1, got {width}")
    return ty if width == 1 else f"<{width} x {ty}>"


def _mangle(ty: str, width: int) -> str:
    """Intrinsic overload suffix: i32 / v16i32, f32 / v16f32."""
    s = {"float": "f32"}.get(ty, ty)
    return s if width == 1 else f"v{width}{s}"


class _Body:
    """Accumulates one function body; operands are SSA names (str) or int constants."""

    def __init__(self, width: int) -> None:
        self.w = width
        self.lines: list[str] = []
        self.n = 0

    def t(self, ty: str) -> str:
        return vec(ty, self.w)

    def k(self, ty: str, v) -> str:
        """Operand text: an SSA name passes through; an int becomes a (splat) constant."""
        if isinstance(v, str):
            return v
        if ty == "float":
            raise TypeError("float constants are written explicitly (hex double)")
        bits = _INT_BITS[ty]
        v = int(v) & ((1 << bits) - 1)            # print in the signed range of the type
        s = str(v - (1 << bits) if v >> (bits - 1) and bits > 1 else v)
        return s if self.w == 1 else f"splat ({ty} {s})"

    def fk(self, v: float) -> str:
        """A float constant (exactly representable in fp32), as a hex double; splat for vectors."""
        f = np.float32(v)
        if float(f) != float(v) or not np.isfinite(f):
            raise ValueError(f"float constant {v!r} is not an exact finite float32")
        h = "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(f)))[0]
        return h if self.w == 1 else f"splat (float {h})"

    def op(self, text: str) -> str:
        self.n += 1
        r = f"%v{self.n}"
        self.lines.append(f"  {r} = {text}")
        return r

    def bin(self, opc: str, ty: str, a, b) -> str:
        return self.op(f"{opc} {self.t(ty)} {self.k(ty, a)}, {self.k(ty, b)}")

    def icmp(self, pred: str, ty: str, a, b) -> str:
        return self.op(f"icmp {pred} {self.t(ty)} {self.k(ty, a)}, {self.k(ty, b)}")

    def select(self, cond: str, ty: str, a, b) -> str:
        t = self.t(ty)
        return self.op(f"select {self.t('i1')} {cond}, {t} {self.k(ty, a)}, {t} {self.k(ty, b)}")

    def cast(self, opc: str, src: str, v: str, dst: str) -> str:
        return self.op(f"{opc} {self.t(src)} {v} to {self.t(dst)}")

    def call(self, intrinsic: str, ret_ty: str, args: list[tuple[str, object]],
             extra: str = "") -> str:
        a = ", ".join(f"{self.t(ty)} {self.k(ty, v)}" for ty, v in args)
        if extra:
            a += ", " + extra
        return self.op(f"call {self.t(ret_ty)} @{intrinsic}({a})")

    def umin(self, ty: str, a, b) -> str:
        return self.call(f"llvm.umin.{_mangle(ty, self.w)}", ty, [(ty, a), (ty, b)])

    def umax(self, ty: str, a, b) -> str:
        return self.call(f"llvm.umax.{_mangle(ty, self.w)}", ty, [(ty, a), (ty, b)])

    def define(self, fn: str, ret_ty: str, arg_ty: str, result: str) -> str:
        head = (f"define internal {self.t(ret_ty)} @{fn}({self.t(arg_ty)} %x) "
                f"alwaysinline nounwind {{")
        return "\n".join([head, "entry:", *self.lines, f"  ret {self.t(ret_ty)} {result}", "}", ""])


def _check(name: str, allowed, what: str) -> None:
    if name not in allowed:
        raise ValueError(f"{what}: unsupported dtype {name!r} (supported: {', '.join(allowed)})")


def _setup(kind: str, name: str, width: int, allowed, what: str):
    """Check the dtype for generator `what`; return (function name, body builder, storage type)."""
    _check(name, allowed, what)
    return _fname(kind, name, width), _Body(width), STORAGE_LLVM[name]


def _fname(kind: str, name: str, width: int) -> str:
    vec(name, width)   # validates width
    return f"nkl_{kind}_{name}_v{width}"


# ------------------------------------------------------------------------------------ decode
def decode(name: str, width: int) -> tuple[str, str]:
    """`<W x float> @nkl_dec_<name>_v<W>(<W x STORAGE> %x)`: exact widening to fp32."""
    fn, b, st = _setup("dec", name, width, FLOAT_NAMES, "decode")
    if name in ("float32", "tfloat32"):          # container bits unchanged
        return fn, b.define(fn, "float", "float", "%x")
    if name == "bfloat16":                       # every code, NaN payloads kept: c << 16
        c = b.cast("zext", "i16", "%x", "i32")
        r = b.bin("shl", "i32", c, 16)
        return fn, b.define(fn, "float", st, b.cast("bitcast", "i32", r, "float"))
    E, M, B, _maxc, _ovf, _nanc, ieee = _FMT[name]
    W = 1 + E + M
    S = 23 - M
    c = b.cast("zext", st, "%x", "i32")
    sgn = b.bin("shl", "i32", b.bin("and", "i32", c, 1 << (W - 1)), 32 - W)
    mag = b.bin("and", "i32", c, (1 << (W - 1)) - 1)
    # normal: (ex + 127 - B) << 23 | m << S  ==  (mag << S) + ((127 - B) << 23)
    nrm = b.bin("add", "i32", b.bin("shl", "i32", mag, S), (127 - B) << 23)
    # subnormal (mag < 2^M): z = ctlz(mag), leading one at bit p = 31 - z; shifting by 23 - p = z - 8
    # puts it at bit 23, where it adds 1 to the exponent field (158 - B - M - z) << 23.
    # mag == 0 gives z = 32 (defined: is_zero_poison = false), shift 24 (defined); selected away.
    z = b.call(f"llvm.ctlz.{_mangle('i32', width)}", "i32", [("i32", mag)], "i1 false")
    sm = b.bin("shl", "i32", mag, b.bin("sub", "i32", z, 8))
    se = b.bin("shl", "i32", b.bin("sub", "i32", 158 - B - M, z), 23)
    sub = b.bin("add", "i32", sm, se)
    sub = b.select(b.icmp("eq", "i32", mag, 0), "i32", 0, sub)
    bits = b.select(b.icmp("ult", "i32", mag, 1 << M), "i32", sub, nrm)
    top = ((1 << E) - 1) << M                    # all-ones exponent, m = 0
    if name == "float16":                        # inf, or NaN with the payload shifted (not quieted)
        spec = b.bin("or", "i32", b.bin("shl", "i32", mag, 13), 0x7F800000)
        bits = b.select(b.icmp("uge", "i32", mag, top), "i32", spec, bits)
    elif ieee:                                   # fp8 e4m3 / e5m2: inf, or canonical qNaN
        spec = b.select(b.icmp("eq", "i32", mag, top), "i32", 0x7F800000, 0x7FC00000)
        bits = b.select(b.icmp("uge", "i32", mag, top), "i32", spec, bits)
    else:                                        # e4m3fn: only S.1111.111 is NaN
        bits = b.select(b.icmp("eq", "i32", mag, 0x7F), "i32", 0x7FC00000, bits)
    r = b.bin("or", "i32", bits, sgn)
    return fn, b.define(fn, "float", st, b.cast("bitcast", "i32", r, "float"))


# ------------------------------------------------------------------------------------ encode
def encode(name: str, width: int) -> tuple[str, str]:
    """`<W x STORAGE> @nkl_enc_<name>_v<W>(<W x float> %x)`: fp32 -> `name`, RNE, ml_dtypes-exact."""
    fn, b, st = _setup("enc", name, width, FLOAT_NAMES, "encode")
    if name == "float32":
        return fn, b.define(fn, "float", "float", "%x")
    u = b.cast("bitcast", "float", "%x", "i32")
    a = b.bin("and", "i32", u, 0x7FFFFFFF)
    is_nan = b.icmp("ugt", "i32", a, 0x7F800000)
    if name in ("bfloat16", "tfloat32"):
        # bias 127: one rounding add on the signed bits. Carries never reach the sign bit for
        # non-NaN inputs (a <= 0x7F800000), and a carry out of the largest finite value gives inf.
        S = 16 if name == "bfloat16" else 13
        lsb = b.bin("and", "i32", b.bin("lshr", "i32", u, S), 1)
        t = b.bin("add", "i32", b.bin("add", "i32", u, (1 << (S - 1)) - 1), lsb)
        sbit = b.bin("and", "i32", u, 0x80000000)
        if name == "bfloat16":
            r = b.bin("lshr", "i32", t, 16)
            nan = b.bin("or", "i32", b.bin("lshr", "i32", sbit, 16), 0x7FC0)
            r = b.select(is_nan, "i32", nan, r)
            return fn, b.define(fn, st, "float", b.cast("trunc", "i32", r, "i16"))
        r = b.bin("and", "i32", t, 0xFFFFE000)
        nan = b.bin("or", "i32", sbit, 0x7FC00000)
        r = b.select(is_nan, "i32", nan, r)
        return fn, b.define(fn, "float", "float", b.cast("bitcast", "i32", r, "float"))
    E, M, B, _maxc, ovf, nanc, _ieee = _FMT[name]
    W = 1 + E + M
    S = 23 - M
    e = b.bin("lshr", "i32", a, 23)
    normal = b.icmp("uge", "i32", e, 128 - B)
    # normal candidate: re-bias in place (wraps in lanes that are not selected: no poison)
    v_n = b.bin("sub", "i32", a, (127 - B) << 23)
    # subnormal/zero candidate: significand with the hidden bit, shift n = min(151-B-M-max(e,1), 25)
    hid = b.select(b.icmp("ne", "i32", e, 0), "i32", 1 << 23, 0)
    sig = b.bin("or", "i32", b.bin("and", "i32", a, 0x7FFFFF), hid)
    n_s = b.umin("i32", b.bin("sub", "i32", 151 - B - M, b.umax("i32", e, 1)), 25)
    v = b.select(normal, "i32", v_n, sig)
    n = b.select(normal, "i32", S, n_s)         # 1 <= S <= n <= 25: every shift below is defined
    half_m1 = b.bin("sub", "i32", b.bin("shl", "i32", 1, b.bin("sub", "i32", n, 1)), 1)
    lsb = b.bin("and", "i32", b.bin("lshr", "i32", v, n), 1)
    t = b.bin("add", "i32", b.bin("add", "i32", v, half_m1), lsb)
    r = b.bin("lshr", "i32", t, n)
    r = b.umin("i32", r, ovf)                    # ovf == max code + 1 for every format
    if name == "float16":                        # numpy: payload >> 13, or 1 if that is 0
        pay = b.bin("lshr", "i32", b.bin("and", "i32", a, 0x7FFFFF), 13)
        nan = b.bin("or", "i32", b.umax("i32", pay, 1), 0x7C00)
    else:
        nan = nanc
    r = b.select(is_nan, "i32", nan, r)
    sg = b.bin("and", "i32", b.bin("lshr", "i32", u, 32 - W), 1 << (W - 1))
    r = b.bin("or", "i32", r, sg)
    return fn, b.define(fn, st, "float", b.cast("trunc", "i32", r, st))


# ------------------------------------------------------------------------ integer conversions
_INT_ONLY = INT_NAMES


def int_from_f32(name: str, width: int) -> tuple[str, str]:
    """`<W x STORAGE> @nkl_f2i_<name>_v<W>(<W x float> %x)`: trunc, saturate, NaN -> 0; bool x != 0."""
    fn, b, st = _setup("f2i", name, width, _INT_ONLY, "int_from_f32")
    if name == "bool":
        # magnitude bits != 0: NaN -> 1, +-0 -> 0, subnormals -> 1 even with DAZ set.
        # Written as ((a + 0x7FFFFFFF) >> 31) rather than `icmp ne a, 0`: InstCombine rewrites
        # `icmp ne (and (bitcast x), 0x7FFFFFFF), 0` into `fcmp une x, 0.0` (it assumes IEEE
        # denormals), and vcmpps treats subnormals as 0 under DAZ. This form survives
        # optimisation even when the caller tests the result (checked by the tests).
        u = b.cast("bitcast", "float", "%x", "i32")
        a = b.bin("and", "i32", u, 0x7FFFFFFF)
        nz = b.bin("lshr", "i32", b.bin("add", "i32", a, 0x7FFFFFFF), 31)
        return fn, b.define(fn, st, "float", b.cast("trunc", "i32", nz, "i8"))
    # `llvm.fpto[su]i.sat` is exactly the contract but x86 scalarises the vector forms (16x
    # vcvttss2si + cmov), so: NaN -> 0 and clamp in float (fcmp+select -> vcmpps/vmaxps/vminps),
    # then an in-range fptosi/fptoui (vcvttps2dq / vcvttps2udq), and for 32-bit targets an
    # integer select for x >= 2^bits_max (the clamp bound there is the largest float below it).
    # Clamping and truncation commute (the bounds are integers); comparisons against normal
    # constants give the same answers when DAZ flushes a subnormal input to 0.
    info = D.INFO[name]
    lo, hi = (-(1 << (info.bits - 1)), (1 << (info.bits - 1)) - 1) if info.kind == "i" \
        else (0, (1 << info.bits) - 1)
    x = b.select(b.op(f"fcmp uno {b.t('float')} %x, {b.fk(0.0)}"), "float", b.fk(0.0), "%x")
    x = b.select(b.op(f"fcmp olt {b.t('float')} {x}, {b.fk(lo)}"), "float", b.fk(lo), x)
    if info.bits < 32:                          # both bounds exact in fp32
        x = b.select(b.op(f"fcmp ogt {b.t('float')} {x}, {b.fk(hi)}"), "float", b.fk(hi), x)
        r = b.cast("fptosi", "float", x, "i32")
        return fn, b.define(fn, st, "float", b.cast("trunc", "i32", r, st))
    top = float(hi + 1)                         # 2^31 or 2^32: exact; hi itself is not
    below = float(np.nextafter(np.float32(top), np.float32(0)))
    big = b.op(f"fcmp oge {b.t('float')} {x}, {b.fk(top)}")
    x = b.select(big, "float", b.fk(below), x)
    r = b.cast("fptosi" if info.kind == "i" else "fptoui", "float", x, "i32")
    return fn, b.define(fn, st, "float", b.select(big, "i32", hi, r))


def int_from_i64(name: str, width: int) -> tuple[str, str]:
    """`<W x STORAGE> @nkl_l2i_<name>_v<W>(<W x i64> %x)`: wrap modulo 2^bits; bool: != 0."""
    fn, b, st = _setup("l2i", name, width, _INT_ONLY, "int_from_i64")
    if name == "bool":
        nz = b.icmp("ne", "i64", "%x", 0)
        return fn, b.define(fn, st, "i64", b.cast("zext", "i1", nz, "i8"))
    return fn, b.define(fn, st, "i64", b.cast("trunc", "i64", "%x", st))


def f32_from_int(name: str, width: int) -> tuple[str, str]:
    """`<W x float> @nkl_i2f_<name>_v<W>(<W x STORAGE> %x)`: exact, or RNE for |v| > 2^24."""
    fn, b, st = _setup("i2f", name, width, _INT_ONLY, "f32_from_int")
    if name == "bool":
        r = b.select(b.icmp("ne", "i8", "%x", 0), "float", b.fk(1.0), b.fk(0.0))
        return fn, b.define(fn, "float", st, r)
    opc = "sitofp" if D.INFO[name].kind == "i" else "uitofp"
    return fn, b.define(fn, "float", st, b.cast(opc, st, "%x", "float"))


def i64_from_int(name: str, width: int) -> tuple[str, str]:
    """`<W x i64> @nkl_i2l_<name>_v<W>(<W x STORAGE> %x)`: sext / zext (bool: byte != 0)."""
    fn, b, st = _setup("i2l", name, width, _INT_ONLY, "i64_from_int")
    if name == "bool":
        nz = b.icmp("ne", "i8", "%x", 0)
        return fn, b.define(fn, "i64", st, b.cast("zext", "i1", nz, "i64"))
    opc = "sext" if D.INFO[name].kind == "i" else "zext"
    return fn, b.define(fn, "i64", st, b.cast(opc, st, "%x", "i64"))


# ---------------------------------------------------------------- running a conversion over an array

GENERATORS = {"dec": decode, "enc": encode, "f2i": int_from_f32, "l2i": int_from_i64, "i2f": f32_from_int,
              "i2l": i64_from_int}
_BYTES = {"float": 4, "i8": 1, "i16": 2, "i32": 4, "i64": 8}


def io_types(kind: str, name: str) -> tuple[str, str]:
    """(input, output) LLVM scalar types of conversion `kind` for dtype `name`."""
    st = STORAGE_LLVM[name]
    return {"dec": (st, "float"), "enc": ("float", st), "f2i": ("float", st), "l2i": ("i64", st),
            "i2f": (st, "float"), "i2l": (st, "i64")}[kind]


def array_driver(kind: str, name: str, width: int = 16, run_attrs: str = "") -> str:
    """IR of the conversion at `width` and at 1, plus `void @run(ptr in, ptr out, i64 n)` applying it to
    n elements: a `width`-wide vector body and a scalar tail, element-aligned loads and stores (used by
    the tests and benchmarks/llvm_convert.py)."""
    f16, ir16 = GENERATORS[kind](name, width)
    f1, ir1 = GENERATORS[kind](name, 1)
    ti, to = io_types(kind, name)
    ai, ao = _BYTES[ti], _BYTES[to]
    return f"""{ir16}
{ir1}
define void @run(ptr noalias %in, ptr noalias %out, i64 %n) {run_attrs} {{
entry:
  %nv = udiv i64 %n, {width}
  %nvw = mul i64 %nv, {width}
  br label %vh
vh:
  %i = phi i64 [ 0, %entry ], [ %i2, %vb ]
  %cv = icmp ult i64 %i, %nvw
  br i1 %cv, label %vb, label %th
vb:
  %pi = getelementptr {ti}, ptr %in, i64 %i
  %x = load <{width} x {ti}>, ptr %pi, align {ai}
  %y = call <{width} x {to}> @{f16}(<{width} x {ti}> %x)
  %po = getelementptr {to}, ptr %out, i64 %i
  store <{width} x {to}> %y, ptr %po, align {ao}
  %i2 = add i64 %i, {width}
  br label %vh
th:
  %j = phi i64 [ %i, %vh ], [ %j2, %tb ]
  %ct = icmp ult i64 %j, %n
  br i1 %ct, label %tb, label %done
tb:
  %qi = getelementptr {ti}, ptr %in, i64 %j
  %xs = load {ti}, ptr %qi, align {ai}
  %ys = call {to} @{f1}({ti} %xs)
  %qo = getelementptr {to}, ptr %out, i64 %j
  store {to} %ys, ptr %qo, align {ao}
  %j2 = add i64 %j, 1
  br label %th
done:
  ret void
}}
"""
