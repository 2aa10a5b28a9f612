"""Shared oracle for the per-op tests: plain-numpy references of nki_lite's numerics contract,
input generators, ragged-shape strategies and small kernel factories.

The references restate the contract (shared/DESIGN.md "Numerics") independently of nki_lite's
implementation:
- arithmetic: inputs widened to float32, every ALU step rounded to float32, NaN canonicalised to
  +qNaN (0x7FC00000), the result cast ONCE to the output dtype (ml_dtypes / numpy casts;
  tfloat32 by an integer RNE on the fp32 bits; float -> int truncates toward zero, saturates,
  NaN -> 0; anything -> bool is `!= 0`);
- integer ops (every input and the output an integer dtype): int64, wrapped to the output width;
- data movement with the same dtype keeps bits; with a dtype change it converts through fp32
  (int -> int wraps).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.core import dtypes as D

F32 = np.float32
CANON_NAN = np.uint32(0x7FC00000)

# dtype families (canonical names)
FLOATS = ["float32", "float16", "bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "tfloat32"]
INTS = ["int8", "int16", "int32", "uint8", "uint16", "uint32"]
ALL = FLOATS + INTS
ALL_WITH_BOOL = ALL + ["bool"]
MATMUL_FLOATS = ["float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"]

ARITH = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmod", "mod"]
COMPARE = ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
INT_PATH_OPS = set(ARITH) - {"divide"} | set(COMPARE) | set(LOGICAL) | set(BITWISE)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def storage(name: str) -> np.dtype:
    """numpy dtype of arrays of `name` (tfloat32: float32 tagged as tfloat32, so kernels see tf32)."""
    return D.to_numpy(name) if name == "tfloat32" else D.storage(name)


def is_int(name: str) -> bool:
    return name in INTS or name == "bool"


def bits_of(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype == np.bool_:
        return x.view(np.uint8)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


# ------------------------------------------------------------------------------------ settings

_PHASES = (tuple(Phase) if os.environ.get("NKI_LITE_SHRINK") == "1"
           else (Phase.explicit, Phase.reuse, Phase.generate))


_SCALE = max(1, int(os.environ.get("NKI_LITE_HYPOTHESIS_SCALE", "1")))


def fast(n: int = 4, **kw):
    """Hypothesis settings for the per-op tests (the whole suite must stay fast): few examples
    (times NKI_LITE_HYPOTHESIS_SCALE for a deeper run), no deadline, no example database, and no
    shrinking unless NKI_LITE_SHRINK=1 (a failing case is reported as generated; shrinking a
    failure can take minutes)."""
    return settings(max_examples=n * _SCALE, deadline=None, database=None, phases=_PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture], **kw)


# ------------------------------------------------------------------------------------ shapes

@dataclass(frozen=True)
class Case:
    """An [n, F] tensor processed as ragged [P, FT] tiles (masks cover the tails)."""
    n: int
    F: int
    P: int
    FT: int
    seed: int

    @property
    def shape(self):
        return (self.n, self.F)


_P_CHOICES = st.one_of(st.sampled_from([1, 2, 3, 7, 32, 64, 100, 127, 128]), st.integers(1, 128))


@st.composite
def ragged_cases(draw, max_p: int = 128, max_f: int = 600, max_row_tiles: int = 3, max_col_tiles: int = 3):
    """P in 1..max_p, n rows in up to `max_row_tiles` tiles (last one ragged), F in 1..max_f split into
    up to `max_col_tiles` column tiles of width FT (last one ragged)."""
    P = min(draw(_P_CHOICES), max_p)
    tiles = draw(st.integers(1, max_row_tiles))
    n = (tiles - 1) * P + draw(st.integers(1, P))
    F = draw(st.one_of(st.sampled_from([1, 2, 16, 17, 512, max_f]), st.integers(1, max_f)))
    F = min(F, max_f)
    ct = draw(st.integers(1, max_col_tiles))
    FT = max(1, cdiv(F, ct))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return Case(n, F, P, FT, seed)


# ------------------------------------------------------------------------------------ conversions

def tf32_round(x) -> np.ndarray:
    """float32 -> tfloat32 (float32 container, 10 mantissa bits, RNE), by integer arithmetic on the
    bits; NaN -> sign | 0x7FC00000; overflow rounds to inf."""
    x = np.ascontiguousarray(np.asarray(x, dtype=F32))
    u = x.view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(13)) & np.uint64(1)
    r = (u + np.uint64(0xFFF) + lsb) & ~np.uint64(0x1FFF)
    nan = np.isnan(x)
    r = np.where(nan, (u & np.uint64(0x80000000)) | np.uint64(0x7FC00000), r)
    return r.astype(np.uint32).view(F32)


def f32_to(x, name: str) -> np.ndarray:
    """Cast float32 compute values to dtype `name` (the single output rounding)."""
    x = np.asarray(x, dtype=F32)
    if name == "bool":
        return x != 0
    if name == "float32":
        return x.copy()
    if name == "tfloat32":
        return tf32_round(x)
    if name in INTS:
        ii = np.iinfo(storage(name))
        with np.errstate(all="ignore"):
            t = np.trunc(x.astype(np.float64))
        t = np.where(np.isnan(t), 0.0, np.clip(t, ii.min, ii.max))
        return t.astype(storage(name))
    with np.errstate(all="ignore"):
        return x.astype(storage(name))


def i64_to(x, name: str) -> np.ndarray:
    """Cast int64 compute values to dtype `name` (ints wrap; floats via float32 RNE)."""
    x = np.asarray(x, dtype=np.int64)
    if name == "bool":
        return x != 0
    if name in INTS:
        return x.astype(storage(name))
    return f32_to(x.astype(F32), name)


def widen(a) -> np.ndarray:
    """Storage values -> float32 compute values."""
    with np.errstate(all="ignore"):
        return np.asarray(a).astype(F32)


def canon(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=F32)
    return np.where(np.isnan(x), CANON_NAN.view(F32), x).astype(F32)


def convert_ref(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Data movement with a dtype change (copy / load / transpose with dtype=)."""
    if src == dst:
        return np.array(a, dtype=storage(dst))
    if is_int(src) and is_int(dst):
        return i64_to(np.asarray(a).astype(np.int64), dst)
    return f32_to(widen(a), dst)


# ------------------------------------------------------------------------------------ ALU reference

def _ieee_max(a, b):
    r = np.where(a > b, a, np.where(b > a, b, np.where(np.signbit(a) & ~np.signbit(b), b, a)))
    return np.where(np.isnan(a) | np.isnan(b), np.float32("nan"), r)


def _ieee_min(a, b):
    r = np.where(a < b, a, np.where(b < a, b, np.where(np.signbit(b) & ~np.signbit(a), b, a)))
    return np.where(np.isnan(a) | np.isnan(b), np.float32("nan"), r)


def _f32_mod(a, b):
    """Python's float %, restated in float64: r = fmod(a, b) (exact); a non-zero r with the other
    sign becomes r + b (exact in float64, rounded once to float32); a zero r gets b's sign."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    r = np.fmod(a64, b64)
    r = np.where((r != 0) & ((r < 0) != (b64 < 0)), r + b64, r).astype(F32)
    return np.where(r == 0, np.where(np.signbit(b), F32(-0.0), F32(0.0)), r)


def alu_f32(op: str, a, b) -> np.ndarray:
    """One fp32 ALU step (a, b float32 arrays/scalars)."""
    a = np.asarray(a, dtype=F32)
    b = np.asarray(b, dtype=F32)
    with np.errstate(all="ignore"):
        r = {
            "add": lambda: a + b, "subtract": lambda: a - b, "multiply": lambda: a * b, "divide": lambda: a / b,
            "maximum": lambda: _ieee_max(a, b), "minimum": lambda: _ieee_min(a, b),
            "fmod": lambda: np.fmod(a.astype(np.float64), b.astype(np.float64)), "mod": lambda: _f32_mod(a, b),
            "equal": lambda: a == b, "not_equal": lambda: a != b, "greater": lambda: a > b,
            "greater_equal": lambda: a >= b, "less": lambda: a < b, "less_equal": lambda: a <= b,
            "logical_and": lambda: (a != 0) & (b != 0), "logical_or": lambda: (a != 0) | (b != 0),
            "logical_xor": lambda: (a != 0) ^ (b != 0),
        }[op]()
    return np.asarray(r).astype(F32)


def alu_i64(op: str, a, b, width: int) -> np.ndarray:
    """One integer ALU step in int64; `width` is the bit width of the operands' dtype (shifts are
    logical: NKI has no arithmetic right shift)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if op == "right_shift":
        return ((a & np.int64((1 << width) - 1)) >> b).astype(np.int64)
    with np.errstate(all="ignore"):
        r = {
            "add": lambda: a + b, "subtract": lambda: a - b, "multiply": lambda: a * b,
            "maximum": lambda: np.maximum(a, b), "minimum": lambda: np.minimum(a, b),
            # C's truncated and Python's floored remainder; a zero divisor gives 0 (nki_lite's definition)
            "fmod": lambda: np.where(b == 0, 0, np.sign(a) * (np.abs(a) % np.where(b == 0, 1, np.abs(b)))),
            "mod": lambda: np.where(b == 0, 0, a % np.where(b == 0, 1, b)),
            "equal": lambda: a == b, "not_equal": lambda: a != b, "greater": lambda: a > b,
            "greater_equal": lambda: a >= b, "less": lambda: a < b, "less_equal": lambda: a <= b,
            "logical_and": lambda: (a != 0) & (b != 0), "logical_or": lambda: (a != 0) | (b != 0),
            "logical_xor": lambda: (a != 0) ^ (b != 0),
            "bitwise_and": lambda: a & b, "bitwise_or": lambda: a | b, "bitwise_xor": lambda: a ^ b,
            "left_shift": lambda: a << b,
        }[op]()
    return np.asarray(r).astype(np.int64)


def width_of(name: str) -> int:
    return 1 if name == "bool" else D.INFO[name].bits


class Scalar:
    """A Python scalar operand with the dtype it counts as (NKI: bool->uint8, int->int32, float->float32)."""

    def __init__(self, value):
        self.value = value
        self.dtype = D.scalar_dtype(value)


def _dt(x, dt):
    return x.dtype if isinstance(x, Scalar) else dt


def ref_ops(ops, x, x_dt: str, operands, out_dt: str, reverses=None) -> np.ndarray:
    """Reference of `out = (...((x op0 o0) op1 o1)...)` cast once to out_dt.

    `operands` are arrays (with their dtype names as (array, name) tuples) or Scalar objects.
    The integer path is taken when every input and the output are integer dtypes and every op
    exists on the integer path; otherwise every step is an fp32 ALU step."""
    reverses = reverses or [False] * len(ops)
    dts = [x_dt] + [o.dtype if isinstance(o, Scalar) else o[1] for o in operands] + [out_dt]
    as_int = all(is_int(d) for d in dts) and all(op in INT_PATH_OPS for op in ops)

    def val(o):
        if isinstance(o, Scalar):
            return np.int64(o.value) if as_int else F32(o.value)
        return np.asarray(o[0]).astype(np.int64) if as_int else widen(o[0])

    acc = np.asarray(x).astype(np.int64) if as_int else widen(x)
    for op, o, rev in zip(ops, operands, reverses):
        v = val(o)
        a, b = (v, acc) if rev else (acc, v)
        if as_int:
            # logical right shift of the left operand's bit pattern at the output width
            acc = alu_i64(op, a, b, width_of(out_dt))
        else:
            acc = alu_f32(op, a, b)
    if as_int:
        return i64_to(acc, out_dt)
    return f32_to(canon(acc), out_dt)


# ------------------------------------------------------------------------------------ reductions

REDUCE_IDENTITY = {"add": -0.0, "maximum": -np.inf, "minimum": np.inf, "multiply": 1.0,
                   "logical_and": 1.0, "logical_or": 0.0}


def reduce_fp32_ref(op: str, x: np.ndarray) -> np.ndarray:
    """Straightforward restatement of numerics.alu.reduce_fp32's order over the last axis:
    16 interleaved lanes (lane j takes elements j, j+16, ... in order, starting from the identity),
    then a halving tree lanes[0:w] op lanes[w:2w]."""
    x = np.asarray(x, dtype=F32)
    lanes = [np.full(x.shape[:-1], REDUCE_IDENTITY[op], dtype=F32) for _ in range(16)]
    for k in range(x.shape[-1]):
        lanes[k % 16] = alu_f32(op, lanes[k % 16], x[..., k])
    w = 16
    while w > 1:
        w //= 2
        lanes = [alu_f32(op, lanes[j], lanes[j + w]) for j in range(w)]
    return lanes[0]


def reduce_int_ref(op: str, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    with np.errstate(all="ignore"):
        return {"add": lambda: x.sum(-1), "maximum": lambda: x.max(-1), "minimum": lambda: x.min(-1),
                "multiply": lambda: np.prod(x, axis=-1),
                "logical_and": lambda: np.all(x != 0, axis=-1),
                "logical_or": lambda: np.any(x != 0, axis=-1)}[op]().astype(np.int64)


def move_axes_last(x: np.ndarray, axes) -> np.ndarray:
    keep = [a for a in range(x.ndim) if a not in axes]
    t = np.transpose(x, keep + list(axes))
    return t.reshape(t.shape[:len(keep)] + (-1,))


# ------------------------------------------------------------------------------------ matmul

def matmul_ref(stationary: np.ndarray, moving: np.ndarray, fused: bool, acc: np.ndarray | None = None):
    """Per output element: acc = first product (or the PSUM value), then acc += a*b over k in order,
    each step rounded to fp32 (an exact FMA when `fused`). Returns float32 [M, N] (no NaN canon)."""
    from nki_lite.numerics.fma import fma_f32
    s = widen(stationary)
    m = widen(moving)
    with np.errstate(all="ignore"):
        start = 0
        if acc is None:
            acc = (s[0][:, None] * m[0][None, :]).astype(F32)
            start = 1
        acc = np.asarray(acc, dtype=F32)
        for k in range(start, s.shape[0]):
            if fused:
                acc = fma_f32(s[k][:, None], m[k][None, :], acc)
            else:
                acc = (acc + s[k][:, None] * m[k][None, :]).astype(F32)
    return acc


# ------------------------------------------------------------------------------------ values

def _finfo(name: str):
    return ml_dtypes.finfo(storage(name)) if name != "tfloat32" else np.finfo(F32)


def specials(name: str) -> np.ndarray:
    """float32 special values worth hitting for dtype `name`."""
    fi = _finfo(name)
    mx, tiny = float(fi.max), float(fi.tiny)
    sub = float(fi.smallest_subnormal) if name != "tfloat32" else 2.0 ** -136
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, mx, -mx, tiny, -tiny, sub, -sub, 1.0, -1.0, 0.5],
                    dtype=F32)


def random_codes(rng, shape, name: str) -> np.ndarray:
    """Uniformly random bit patterns of a float format (all codes, incl. NaN payloads)."""
    if name == "tfloat32":
        u = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32) & np.uint32(0xFFFFE000)
        return u.view(F32)
    it = storage(name).itemsize
    u = rng.integers(0, 1 << (8 * it), size=shape, dtype=np.uint64)
    return u.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[it]).view(storage(name))


def from_f64(x: np.ndarray, name: str) -> np.ndarray:
    """float64 values -> storage of `name` (via float32)."""
    with np.errstate(all="ignore"):
        x32 = np.asarray(x, dtype=np.float64).astype(F32)
    if name == "tfloat32":
        return tf32_round(x32).astype(storage(name))
    return f32_to(x32, name)


def values(rng, shape, name: str, kind: str = "mixed", lo=None, hi=None) -> np.ndarray:
    """Test inputs of dtype `name` and `shape`.

    kind="mixed": mostly normal values over a wide range, plus small integers, special values
    (±0, ±inf, NaN, max, min normal, subnormal) and random bit patterns (floats), or the whole
    range with extremes (ints). kind="nice": finite values of moderate magnitude (no specials).
    kind="uniform": uniform in [lo, hi]; kind="loguniform": ±2**U(lo, hi) (positive if lo/hi given
    with sign="+": pass kind="logpos")."""
    shape = tuple(shape)
    if name == "bool":
        return rng.random(shape) < 0.5
    if name in INTS:
        ii = np.iinfo(storage(name))
        if kind == "nice":
            lo_, hi_ = max(ii.min, -100), min(ii.max, 100)
            return rng.integers(lo_, hi_ + 1, size=shape).astype(storage(name))
        v = rng.integers(ii.min, ii.max, size=shape, endpoint=True, dtype=np.int64)
        pick = rng.random(shape)
        ext = np.array([ii.min, ii.max, 0, 1, ii.max - 1, ii.min + 1, -1 if ii.min < 0 else 2, 7], dtype=np.int64)
        v = np.where(pick < 0.15, ext[rng.integers(0, len(ext), size=shape)], v)
        v = np.where((pick >= 0.15) & (pick < 0.35), rng.integers(max(ii.min, -8), 9, size=shape), v)
        return v.astype(storage(name))
    if kind == "uniform":
        return from_f64(rng.uniform(lo, hi, size=shape), name)
    if kind in ("loguniform", "logpos"):
        mag = np.exp2(rng.uniform(lo, hi, size=shape))
        sgn = 1.0 if kind == "logpos" else np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return from_f64(sgn * mag, name)
    base = rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, size=shape))
    if kind == "nice":
        return from_f64(base, name)
    pick = rng.random(shape)
    base = np.where(pick < 0.1, rng.integers(-4, 5, size=shape).astype(np.float64), base)
    sp = specials(name).astype(np.float64)
    base = np.where((pick >= 0.1) & (pick < 0.17), sp[rng.integers(0, len(sp), size=shape)], base)
    out = from_f64(base, name)
    raw = random_codes(rng, shape, name)
    return np.where(pick >= 0.9, raw, out).astype(storage(name))


def related(rng, a: np.ndarray, name: str, kind: str = "mixed") -> np.ndarray:
    """A second operand: fresh values, with ~25% of positions equal to `a` (ties for compare/max/min)
    and ~5% equal to -a (exact cancellation)."""
    b = values(rng, a.shape, name, kind)
    pick = rng.random(a.shape)
    b = np.where(pick < 0.25, a, b)
    if name not in INTS and name != "bool":
        neg = (-widen(a))
        b = np.where((pick >= 0.25) & (pick < 0.3), f32_to(neg, name) if name != "tfloat32" else tf32_round(neg), b)
    return b.astype(storage(name))


# ------------------------------------------------------------------------------------ assertions

def assert_bits(actual, expected, what: str = "") -> None:
    """Bitwise equality (dtype and every bit), with a readable report."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    ab, eb = bits_of(actual), bits_of(expected)
    bad = np.argwhere(ab != eb)
    if len(bad):
        lines = [f"{what}: {len(bad)} of {actual.size} elements differ bitwise"]
        for ix in bad[:6]:
            ix = tuple(int(i) for i in ix)
            lines.append(f"  {ix}: got {actual[ix]!r} (0x{int(ab[ix]):x}) want {expected[ix]!r} (0x{int(eb[ix]):x})")
        raise AssertionError("\n".join(lines))


# ------------------------------------------------------------------------------------ kernels

def check_dtype(tile, want: str, what: str = "result") -> None:
    """Trace-time check of a traced tile's dtype."""
    assert tile.dtype_name == want, f"{what} has dtype {tile.dtype_name}, expected {want}"


def ragged_map(out, arrays, P: int, FT: int, body, load_dtype=None, out_dt=None) -> None:
    """Inside a kernel: walk `out` ([n, F]) in ragged [P, FT] tiles masked `(i*P + ip < n) &
    (j*FT + jf < F)`; per tile load each of `arrays` (same shape; `dtype=load_dtype` when given),
    compute body(*tiles, mask) (its dtype checked against out_dt when given) and store it."""
    n, F = out.shape
    ip = nl.arange(P)[:, None]
    jf = nl.arange(FT)[None, :]
    for i in nl.affine_range(cdiv(n, P)):
        for j in nl.affine_range(cdiv(F, FT)):
            m = (i * P + ip < n) & (j * FT + jf < F)
            extra = {} if load_dtype is None else {"dtype": load_dtype}
            tiles = [nl.load(a[i * P + ip, j * FT + jf], mask=m, **extra) for a in arrays]
            r = body(*tiles, m)
            if out_dt is not None:
                check_dtype(r, out_dt)
            nl.store(out[i * P + ip, j * FT + jf], value=r, mask=m)


def map2_kernel(body):
    """kernel(a, b, P, FT, out_dt): a and b are [n, F]; each ragged [P, FT] tile of the output is
    body(x_tile, y_tile, mask) (checked to have dtype out_dt at trace time)."""
    @nki.jit
    def kernel(a, b, P, FT, out_dt):
        out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
        ragged_map(out, (a, b), P, FT, body, out_dt=out_dt)
        return out
    return kernel


def map1_kernel(body):
    """kernel(a, P, FT, out_dt): like map2_kernel with one input."""
    @nki.jit
    def kernel(a, P, FT, out_dt):
        out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
        ragged_map(out, (a,), P, FT, body, out_dt=out_dt)
        return out
    return kernel


def fp32math_fn(name: str):
    """The definition of an activation function: nki_lite.numerics.fp32math.<name> (or its
    FUNCTIONS table entry)."""
    from nki_lite.numerics import fp32math
    fn = getattr(fp32math, name, None)
    if not callable(fn):
        fn = fp32math.FUNCTIONS[name]
    return fn


def ulp_tol(name: str) -> float:
    """Half an ulp of the output format at 1.0 (relative)."""
    return {"float32": 2.0 ** -24, "tfloat32": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11,
            "float8_e4m3": 2.0 ** -4, "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3}[name]

