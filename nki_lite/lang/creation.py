"""Tile creation: nl.ndarray, nl.zeros / ones / full, the *_like variants, and nl.finfo.

Contract: every creation op allocates a fresh buffer through memory.new_buffer (an `alloc` at the
point of creation for on-chip tiles) and returns a Tile viewing all of it; zeros/ones/full then
memset it. A user-created on-chip tile taller than the target's partitions is an error at its own
line. HBM tensors cannot be created with an initial value, and shared_hbm only at top level.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core import dtypes as D
from .api import api
from .memory import SPACE_OBJECTS, as_space, check_shape, check_user_partitions, new_buffer, resolve_dtype, sbuf, \
    shared_hbm
from .tile import Tile
from .tracer import attrs, current


@api("nl.ndarray", ignored=("lazy_initialization", "address"))
def ndarray(shape, dtype, *, buffer=None, name: str = ""):
    """nl.ndarray: a new, uninitialised tensor in `buffer` (default nl.sbuf)."""
    tr = current()
    loc = capture_loc(2)
    dims, par_axis = check_shape(shape, loc)
    dt = resolve_dtype(dtype, loc)
    sp = as_space(buffer, loc)
    if sp.space == ir.Space.HBM and tr.depth > 0 and sp is shared_hbm:
        raise errors.make("memory_space", "shared_hbm tensors can only be created at the kernel's top level, "
                          "not inside a loop", loc=loc, hint="create the output before the loop")
    check_user_partitions(tr, dims, par_axis, sp.space, loc)
    buf = new_buffer(tr, dims, dt, sp.space, name or ("hbm" if sp.space == ir.Space.HBM else sp.name[0] + "t"),
                     loc, par_axis=par_axis, hbm_kind=sp.name if sp.space == ir.Space.HBM else "",
                     direct=bool(getattr(buffer, "direct", False)))
    _place(buffer, buf.name, dims, par_axis, dt, tr, loc)
    return Tile(tr, ir.Access.full(buf), dt)


def _place(buffer, name, dims, par_axis, dt, tr, loc) -> None:
    """nki.compiler allocators place the tensor's blocks themselves (nki_lite/compiler.py, NL-E909/E506);
    the placement is kept with the kernel for the overlap rule (lower/verify_alloc.py, NL-E505)."""
    place = getattr(buffer, "place", None)
    if place is not None:
        tiles = place(dims, par_axis, D.itemsize(dt), tr.hw, loc)
        if tiles:
            tr.placements[name] = tuple(tiles.values())


def _filled(shape, value, dtype, buffer, name, what: str):
    loc = capture_loc(3)
    sp = as_space(buffer, loc)
    if sp.space == ir.Space.HBM:
        raise errors.make("memory_space", f"nl.{what} cannot create an HBM tensor with an initial value",
                          loc=loc, hint="create it in SBUF, or nl.ndarray(..., buffer=nl.shared_hbm) and store into it")
    tr = current()
    dims, par_axis = check_shape(shape, loc)
    dt = resolve_dtype(dtype, loc)
    check_user_partitions(tr, dims, par_axis, sp.space, loc)
    buf = new_buffer(tr, dims, dt, sp.space, name or sp.name[0] + "t", loc, par_axis=par_axis,
                     direct=bool(getattr(buffer, "direct", False)))
    _place(buffer, buf.name, dims, par_axis, dt, tr, loc)
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
