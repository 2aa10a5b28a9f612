"""NKI dtypes: the objects users pass as `dtype=`, their names, storage and promotion rules.

Contract:
- Public dtype objects are numpy dtypes (`nl.bfloat16 is np.dtype(ml_dtypes.bfloat16)`), so user
  code can write `arr.astype(nl.bfloat16)`. `nl.tfloat32` is float32 storage tagged with metadata;
  its values are always rounded to 10 mantissa bits.
- Inside nki_lite a dtype is identified by its canonical *name* (a str), via `name_of()`.
- MX formats (OCP microscaling, docs/numerics.md "MX formats"): `float8_e4m3fn_x4`, `float8_e5m2_x4`
  (four fp8 codes in a 32-bit element, element q of the group of four in byte q, little-endian) and
  `float4_e2m1fn_x4` (four fp4 codes in a 16-bit element, element q in bits 4q..4q+3) are kind 'x':
  raw containers, numpy uint32 / uint16 storage; the public objects are one-field structured dtypes named
  after the format (so they differ from each other and from uint32 / uint16).
  `float8_e8m0fnu` (the shared power-of-two scale, ml_dtypes storage) is kind 'x' too. Kind 'x'
  values are neither float nor int: only bit copies and the MX instructions take them.
- `promote(a, b)` implements NKI's documented promotion table (shared/NKI_REFERENCE.md §2.4),
  with Python scalars counting as uint8 (bool), int32 (int) or float32 (float).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DTypeInfo:
    name: str
    storage: np.dtype   # numpy dtype of the backing array
    kind: str           # 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool
    bits: int           # bits of the value format (tf32: 19; bool: 1)
    itemsize: int       # bytes per element in memory
    exp_bits: int = 0
    man_bits: int = 0

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iub"


_TF32_META = {"nki_lite": "tfloat32"}

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
tfloat32 = np.dtype(np.float32, metadata=_TF32_META)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)
# one-field structured dtypes: distinct objects (`nl.float8_e4m3fn_x4 != nl.float8_e5m2_x4 != np.uint32`, as
# kernels compare and key dicts by them), the container's size; storage (INFO) is the plain unsigned type
float8_e4m3fn_x4 = np.dtype([("float8_e4m3fn_x4", "<u4")])
float8_e5m2_x4 = np.dtype([("float8_e5m2_x4", "<u4")])
float4_e2m1fn_x4 = np.dtype([("float4_e2m1fn_x4", "<u2")])
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

INFO: dict[str, DTypeInfo] = {i.name: i for i in [
    DTypeInfo("float32", float32, "f", 32, 4, 8, 23),
    DTypeInfo("tfloat32", float32, "f", 19, 4, 8, 10),
    DTypeInfo("bfloat16", bfloat16, "f", 16, 2, 8, 7),
    DTypeInfo("float16", float16, "f", 16, 2, 5, 10),
    DTypeInfo("float8_e4m3", float8_e4m3, "f", 8, 1, 4, 3),
    DTypeInfo("float8_e4m3fn", float8_e4m3fn, "f", 8, 1, 4, 3),
    DTypeInfo("float8_e5m2", float8_e5m2, "f", 8, 1, 5, 2),
    DTypeInfo("int8", int8, "i", 8, 1), DTypeInfo("int16", int16, "i", 16, 2),
    DTypeInfo("int32", int32, "i", 32, 4),
    DTypeInfo("uint8", uint8, "u", 8, 1), DTypeInfo("uint16", uint16, "u", 16, 2),
    DTypeInfo("uint32", uint32, "u", 32, 4),
    DTypeInfo("bool", bool_, "b", 1, 1),
    # MX formats (kind 'x': raw containers; numerics/mx.py defines their values)
    DTypeInfo("float8_e4m3fn_x4", np.dtype(np.uint32), "x", 32, 4),
    DTypeInfo("float8_e5m2_x4", np.dtype(np.uint32), "x", 32, 4),
    DTypeInfo("float4_e2m1fn_x4", np.dtype(np.uint16), "x", 16, 2),
    DTypeInfo("float8_e8m0fnu", float8_e8m0fnu, "x", 8, 1, 8, 0),
]}

MX_X4 = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")

PUBLIC: dict[str, np.dtype] = {
    "float32": float32, "tfloat32": tfloat32, "bfloat16": bfloat16, "float16": float16,
    "float8_e4m3": float8_e4m3, "float8_e4m3fn": float8_e4m3fn, "float8_e5m2": float8_e5m2,
    "int8": int8, "int16": int16, "int32": int32, "uint8": uint8, "uint16": uint16,
    "uint32": uint32, "bool": bool_,
    "float8_e4m3fn_x4": float8_e4m3fn_x4, "float8_e5m2_x4": float8_e5m2_x4,
    "float4_e2m1fn_x4": float4_e2m1fn_x4, "float8_e8m0fnu": float8_e8m0fnu,
}

_ALIASES = {"fp32": "float32", "f32": "float32", "fp16": "float16", "half": "float16",
            "bf16": "bfloat16", "tf32": "tfloat32", "fp8_e4m3": "float8_e4m3",
            "fp8_e5m2": "float8_e5m2", "bool_": "bool", "float8_e4m3b11fnuz": None}

_BY_NUMPY: dict[np.dtype, str] = {dt: name for name, dt in PUBLIC.items() if name != "tfloat32"}


class UnknownDType(TypeError):
    """Raised by name_of for values that are not NKI dtypes (callers wrap it with a location)."""


def name_of(dt) -> str:
    """Canonical name of anything that denotes a dtype; raises UnknownDType otherwise."""
    if isinstance(dt, str):
        key = _ALIASES.get(dt, dt)
        if key in INFO:
            return key
        raise UnknownDType(f"unknown dtype name {dt!r}")
    if isinstance(dt, np.dtype):
        if dt.metadata and dt.metadata.get("nki_lite") == "tfloat32":
            return "tfloat32"
        name = _BY_NUMPY.get(dt)
        if name is None:
            raise UnknownDType(f"dtype {dt} is not supported by NKI (no float64/int64/complex on device)")
        return name
    if dt is bool:
        return "bool"
    if dt is float or dt is int:
        raise UnknownDType(f"Python type {dt.__name__} is not a dtype; use nl.float32 or nl.int32")
    try:
        return name_of(np.dtype(dt))
    except TypeError as e:
        raise UnknownDType(f"{dt!r} is not a dtype") from e


def to_numpy(name: str) -> np.dtype:
    """Public numpy dtype object for a canonical name (tfloat32 keeps its tag)."""
    return PUBLIC[name]


def info(name: str) -> DTypeInfo:
    return INFO[name]


def storage(name: str) -> np.dtype:
    return INFO[name].storage


def itemsize(name: str) -> int:
    return INFO[name].itemsize


def is_float(name: str) -> bool:
    return INFO[name].kind == "f"


def is_packed(name: str) -> bool:
    """An MX container dtype (kind 'x'): bit copies and the MX instructions only."""
    return INFO[name].kind == "x"


_FLOAT_RANK = {"float8_e4m3": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
               "bfloat16": 2, "float16": 2, "tfloat32": 3, "float32": 4}


def _promote_float(a: str, b: str) -> str:
    ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
    if ra != rb:
        return a if ra > rb else b
    if ra == 1:          # two different fp8 formats: no common fp8 holds both
        return "bfloat16"
    if ra == 2:          # (fp16, bf16): neither holds the other
        return "float32"
    return a


def _promote_int(a: str, b: str) -> str:
    ia, ib = INFO[a], INFO[b]
    if ia.kind == "b":
        return b
    if ib.kind == "b":
        return a
    if ia.kind == ib.kind:
        return a if ia.bits >= ib.bits else b
    s, u = (ia, ib) if ia.kind == "i" else (ib, ia)
    if s.bits > u.bits:
        return s.name
    wider = 2 * u.bits
    return f"int{wider}" if wider <= 32 else "float32"


def promote(a: str, b: str) -> str:
    """NKI type promotion of two canonical names."""
    if a == b:
        return a
    if is_packed(a) or is_packed(b):
        raise UnknownDType(f"{a if is_packed(a) else b} values take part in no arithmetic (an MX container: "
                           "nisa.quantize_mx writes it, nisa.nc_matmul_mx reads it)")
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        return _promote_float(a, b)
    if fa:
        return a
    if fb:
        return b
    return _promote_int(a, b)


def scalar_dtype(value) -> str:
    """The dtype a Python/numpy scalar counts as in promotion (NKI: bool→uint8, int→int32, float→float32)."""
    if isinstance(value, (bool, np.bool_)):
        return "uint8"
    if isinstance(value, (int, np.integer)):
        return "int32"
    if isinstance(value, np.generic):
        try:
            return name_of(value.dtype)
        except UnknownDType:
            return "float32"
    return "float32"
