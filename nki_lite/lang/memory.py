"""Memory spaces and tile creation: nl.sbuf/psum/hbm/shared_hbm, nl.par_dim, nl.ndarray & friends.

Contract: every creation op allocates a new `ir.Buffer` (unique name) and, for on-chip buffers,
emits an `alloc` instruction at the point of creation, so a tile created inside a loop is a fresh
(uninitialised) tile in every iteration. On-chip shapes are checked at creation: rank >= 2 and the
partition dimension within the target's limit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import errors
from ..loc import Loc, capture_loc
from ..core import ir
from ..core import dtypes as D
from .api import api
from .tracer import Tracer, attrs, current

PMAX = 128


@dataclass(frozen=True)
class MemorySpace:
    """The objects users pass as buffer= (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, ...)."""
    name: str
    space: ir.Space

    def __repr__(self) -> str:
        return f"nl.{self.name}"


sbuf = MemorySpace("sbuf", ir.Space.SBUF)
psum = MemorySpace("psum", ir.Space.PSUM)
shared_hbm = MemorySpace("shared_hbm", ir.Space.HBM)
private_hbm = MemorySpace("private_hbm", ir.Space.HBM)
hbm = MemorySpace("hbm", ir.Space.HBM)

SPACE_OBJECTS = {ir.Space.SBUF: sbuf, ir.Space.PSUM: psum, ir.Space.HBM: shared_hbm}


@api("nl.par_dim")
class par_dim(int):
    """nl.par_dim(n): marks the partition dimension of an on-chip tensor shape."""

    def __new__(cls, n: int):
        return super().__new__(cls, n)

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


def as_space(buffer, loc: Loc) -> MemorySpace:
    if buffer is None:
        return sbuf
    if isinstance(buffer, MemorySpace):
        return buffer
    from ..compat_alloc import allocator_space
    sp = allocator_space(buffer)
    if sp is not None:
        return sp
    raise errors.make("memory_space", f"buffer={buffer!r} is not a memory (nl.sbuf, nl.psum, nl.shared_hbm, nl.hbm)",
                      loc=loc)


def resolve_dtype(dtype, loc: Loc, what: str = "dtype") -> str:
    try:
        return D.name_of(dtype)
    except D.UnknownDType as e:
        raise errors.make("unknown_dtype", f"{what}: {e}", loc=loc) from None


def check_shape(shape, loc: Loc) -> tuple[tuple[int, ...], int]:
    """Plain int shape and the partition axis (position of nl.par_dim, else 0)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise errors.make("rank", f"shape must be a tuple of ints, got {shape!r}", loc=loc) from None
    par_axes = [k for k, s in enumerate(dims) if isinstance(s, par_dim)]
    for s in dims:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise errors.make("rank", f"shape entries must be Python ints known at trace time, got {s!r} in {shape}",
                              loc=loc, hint="shapes cannot depend on loop variables or program ids")
        if s < 0:                      # 0 is legal: empty tensors flow through (empty in, empty out)
            raise errors.make("shape_mismatch", f"shape {tuple(int(x) for x in dims)} has a negative dimension",
                              loc=loc)
    if len(par_axes) > 1:
        raise errors.make("rank", "at most one nl.par_dim per shape", loc=loc)
    return tuple(int(s) for s in dims), (par_axes[0] if par_axes else 0)


def check_user_partitions(dims: tuple, par_axis: int, space: ir.Space, loc: Loc) -> None:
    """A tile the user creates (nl.ndarray/zeros/full...) taller than the partitions is an error at its
    own line at once; only result tiles of instructions defer the error to the instruction."""
    if space != ir.Space.HBM and len(dims) >= 2 and dims[par_axis] > PMAX:
        raise errors.make("partition_limit", f"partition dimension {dims[par_axis]} of a {space.value} tile of "
                          f"shape {dims} exceeds the limit of {PMAX} partitions", loc=loc)


def new_buffer(tracer: Tracer, shape: tuple[int, ...], dtype: str, space: ir.Space, base: str, loc: Loc,
               *, raw: bool = False, par_axis: int = 0, kind: str = "local", hbm_kind: str = "",
               direct: bool = False) -> ir.Buffer:
    if space != ir.Space.HBM:
        if len(shape) < 2:
            from .source import control_flow_test
            test = control_flow_test(loc)
            if test is not None:     # `if t[0, 0] > 0:` computes a 1-element tile for Python to branch on
                raise errors.make("control_flow_on_tile", f"Python control flow (`{test[0]}`) depends on the value "
                                  f"of a tile: `{test[1]}` is computed on the device when the kernel runs, so "
                                  "Python cannot branch on it while tracing", loc=loc)
            raise errors.make("rank", f"on-chip tile of shape {shape} has insufficient rank: SBUF/PSUM tiles are at "
                              "least 2-D (partition, free...)", loc=loc, hint=f"use shape ({shape[0]}, 1)")
    oversize = space != ir.Space.HBM and shape[par_axis] > PMAX
    from ..loc import assigned_name
    from .. import hostmem
    if space == ir.Space.HBM:                 # on-chip tiles are bounded by the SBUF/PSUM rules instead
        n = 1
        for s in shape:
            n *= s
        hostmem.check(n * D.itemsize(dtype), f"HBM tensor of shape {shape} ({dtype})", loc)
    base = assigned_name(loc) or base
    buf = tracer.add_buffer(ir.Buffer(tracer.fresh(base), space, shape, dtype, kind, par_axis, loc=loc,
                                      hbm_kind=hbm_kind))
    if oversize:
        # reported when the instruction that writes it is emitted (lang/tracer.py), so a result tile
        # that is too tall (nl.transpose of a [128, 256] tile) is blamed on its operand, not on itself
        tracer.defer_partition_error(buf.name, errors.make(
            "partition_limit", f"partition dimension {shape[par_axis]} of a {space.value} tile of shape {shape} "
            f"exceeds the limit of {PMAX} partitions", loc=loc))
    if space != ir.Space.HBM:
        # direct=True: placed by an nki.compiler allocator (the capacity rule then raises, not warns)
        instr = ir.Instr("alloc", (ir.Access.full(buf),), (), (("direct", True),) if direct else (), None, loc)
        (tracer.emit_raw if raw else tracer.emit)(instr)
    return buf


def new_tile(shape, dtype: str, space: ir.Space = ir.Space.SBUF, base: str = "t", loc: Loc | None = None):
    from .tile import Tile
    tr = current()
    loc = loc or capture_loc(2)
    buf = new_buffer(tr, tuple(shape), dtype, space, base, loc)
    return Tile(tr, ir.Access.full(buf), dtype)


@api("nl.ndarray", ignored=("lazy_initialization", "address"))
def ndarray(shape, dtype, *, buffer=None, name: str = ""):
    """nl.ndarray: a new, uninitialised tensor in `buffer` (default nl.sbuf)."""
    from .tile import Tile
    tr = current()
    loc = capture_loc(2)
    dims, par_axis = check_shape(shape, loc)
    dt = resolve_dtype(dtype, loc)
    sp = as_space(buffer, loc)
    if sp.space == ir.Space.HBM and tr.depth > 0 and sp is shared_hbm:
        raise errors.make("memory_space", "shared_hbm tensors can only be created at the kernel's top level, "
                          "not inside a loop", loc=loc, hint="create the output before the loop")
    check_user_partitions(dims, par_axis, sp.space, loc)
    buf = new_buffer(tr, dims, dt, sp.space, name or ("hbm" if sp.space == ir.Space.HBM else sp.name[0] + "t"),
                     loc, par_axis=par_axis, hbm_kind=sp.name if sp.space == ir.Space.HBM else "",
                     direct=bool(getattr(buffer, "direct", False)))
    return Tile(tr, ir.Access.full(buf), dt)


def _filled(shape, value, dtype, buffer, name, what: str):
    loc = capture_loc(3)
    sp = as_space(buffer, loc)
    if sp.space == ir.Space.HBM:
        raise errors.make("memory_space", f"nl.{what} cannot create an HBM tensor with an initial value",
                          loc=loc, hint="create it in SBUF, or nl.ndarray(..., buffer=nl.shared_hbm) and store into it")
    from .tile import Tile
    tr = current()
    dims, par_axis = check_shape(shape, loc)
    dt = resolve_dtype(dtype, loc)
    check_user_partitions(dims, par_axis, sp.space, loc)
    buf = new_buffer(tr, dims, dt, sp.space, name or sp.name[0] + "t", loc, par_axis=par_axis,
                     direct=bool(getattr(buffer, "direct", False)))
    acc = ir.Access.full(buf)
    tr.emit(ir.Instr("memset", (acc,), (ir.Imm(value, D.scalar_dtype(value)),), attrs(engine="vector"), None, loc))
    return Tile(tr, acc, dt)


@api("nl.zeros", ignored=("lazy_initialization",))
def zeros(shape, dtype, *, buffer=None, name: str = ""):
    """nl.zeros. lazy_initialization=True (legacy) lets the compiler fold the zeroing into the first
    matmul accumulation; the tile's value is zeros either way, so it is initialised here."""
    return _filled(shape, 0, dtype, buffer, name, "zeros")


@api("nl.ones", ignored=("lazy_initialization",))
def ones(shape, dtype, *, buffer=None, name: str = ""):
    return _filled(shape, 1, dtype, buffer, name, "ones")


@api("nl.full", ignored=("lazy_initialization",))
def full(shape, fill_value, dtype, *, buffer=None, name: str = ""):
    if not isinstance(fill_value, (int, float, bool, np.number)):
        raise errors.make("argument", f"nl.full fill_value must be a Python number, got {fill_value!r}",
                          loc=capture_loc(2))
    return _filled(shape, fill_value, dtype, buffer, name, "full")


def _like(a, dtype, buffer, name, fill):
    dt = a.dtype if dtype is None else dtype
    buf = buffer if buffer is not None else SPACE_OBJECTS.get(a.space, sbuf)
    if fill is None:
        return ndarray(a.shape, dt, buffer=buf, name=name)
    return _filled(a.shape, fill, dt, buf, name, "zeros_like")


@api("nl.zeros_like", ignored=("lazy_initialization",))
def zeros_like(a, dtype=None, *, buffer=None, name: str = ""):
    return _like(a, dtype, buffer, name, 0)


@api("nl.ones_like", ignored=("lazy_initialization",))
def ones_like(a, dtype=None, *, buffer=None, name: str = ""):
    return _like(a, dtype, buffer, name, 1)


@api("nl.empty_like", ignored=("lazy_initialization",))
def empty_like(a, dtype=None, *, buffer=None, name: str = ""):
    return _like(a, dtype, buffer, name, None)


@api("nl.finfo")
def finfo(dtype):
    """nl.finfo(dtype): machine limits of a float dtype (min, max, eps, tiny, bits, ...) at trace time,
    as numpy's / ml_dtypes' finfo of its storage type (tfloat32: float32's, whose storage it is)."""
    import ml_dtypes
    name = resolve_dtype(dtype, capture_loc(2))
    if D.INFO[name].kind != "f":
        raise errors.make("dtype", f"nl.finfo takes a floating-point dtype, got {name}", loc=capture_loc(2),
                          hint="use numpy's iinfo for integer limits")
    fi = ml_dtypes.finfo(D.storage(name))
    return _FInfo(name, float(fi.min), float(fi.max), float(fi.eps), float(fi.tiny), int(fi.bits))


class _FInfo:
    """nl.finfo's result: the limits as Python numbers (usable as fill values and scalar operands)."""

    def __init__(self, dtype: str, min: float, max: float, eps: float, tiny: float, bits: int):  # noqa: A002
        self.dtype, self.min, self.max, self.eps, self.tiny, self.bits = dtype, min, max, eps, tiny, bits
        self.smallest_normal = tiny

    def __repr__(self) -> str:
        return f"finfo(dtype={self.dtype}, min={self.min}, max={self.max}, eps={self.eps})"
