"""Memory spaces and buffer allocation: nl.sbuf/psum/hbm/shared_hbm, nl.par_dim, `new_buffer`.

Contract: `new_buffer` allocates a new `ir.Buffer` (unique name) and, for on-chip buffers, emits an
`alloc` instruction at the point of creation, so a tile created inside a loop is a fresh
(uninitialised) tile in every iteration. On-chip shapes are checked: rank >= 2 and the partition
dimension within the target's limit (core/targets.py). `as_space` resolves buffer= arguments,
including the nki.compiler allocators, which register through ALLOCATOR_RESOLVERS (the public
nki_lite.compiler fills it, so this module needs nothing above lang). No Tile here: the tile
creation ops (nl.ndarray & friends) are lang/creation.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import errors
from ..core import ir
from ..core import dtypes as D
from .. import hostmem
from ..loc import Loc, assigned_name
from .api import api
from .source import control_flow_test
from .tracer import Tracer


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
ON_CHIP = (ir.Space.SBUF, ir.Space.PSUM)

# buffer= objects that are not MemorySpaces (nki.compiler's sbuf.mod_alloc(...) & co): each resolver
# returns the MemorySpace it stands for, or None (filled by nki_lite.compiler when imported)
ALLOCATOR_RESOLVERS: list = []


def allocator_space(obj) -> "MemorySpace | None":
    for fn in ALLOCATOR_RESOLVERS:
        sp = fn(obj)
        if sp is not None:
            return sp
    return None


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


def check_user_partitions(tracer: Tracer, dims: tuple, par_axis: int, space: ir.Space, loc: Loc) -> None:
    """A tile the user creates (nl.ndarray/zeros/full...) taller than the partitions is an error at its
    own line at once; only result tiles of instructions defer the error to the instruction."""
    pmax = tracer.hw.partitions
    if space != ir.Space.HBM and len(dims) >= 2 and dims[par_axis] > pmax:
        raise errors.make("partition_limit", f"partition dimension {dims[par_axis]} of a {space.value} tile of "
                          f"shape {dims} exceeds the limit of {pmax} partitions", loc=loc)


def new_buffer(tracer: Tracer, shape: tuple[int, ...], dtype: str, space: ir.Space, base: str, loc: Loc,
               *, raw: bool = False, par_axis: int = 0, kind: str = "local", hbm_kind: str = "",
               direct: bool = False) -> ir.Buffer:
    if space != ir.Space.HBM:
        if len(shape) < 2:
            test = control_flow_test(loc)
            if test is not None:     # `if t[0, 0] > 0:` computes a 1-element tile for Python to branch on
                raise errors.make("control_flow_on_tile", f"Python control flow (`{test[0]}`) depends on the value "
                                  f"of a tile: `{test[1]}` is computed on the device when the kernel runs, so "
                                  "Python cannot branch on it while tracing", loc=loc)
            raise errors.make("rank", f"on-chip tile of shape {shape} has insufficient rank: SBUF/PSUM tiles are at "
                              "least 2-D (partition, free...)", loc=loc, hint=f"use shape ({shape[0]}, 1)")
    pmax = tracer.hw.partitions
    oversize = space != ir.Space.HBM and shape[par_axis] > pmax
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
            f"exceeds the limit of {pmax} partitions", loc=loc))
    if space != ir.Space.HBM:
        # direct=True: placed by an nki.compiler allocator (the capacity rule then raises, not warns)
        instr = ir.Instr("alloc", (ir.Access.full(buf),), (), (("direct", True),) if direct else (), None, loc)
        (tracer.emit_raw if raw else tracer.emit)(instr)
    return buf
