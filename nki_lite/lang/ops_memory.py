"""Data movement: nl.load / nl.store, assignment into views, in-place updates, reshape, constants,
nl.device_print.

Contract: `assign(view, value)` is what `tile[key] = value` means: a DMA when either side is in
HBM, an on-chip `tensor_copy` otherwise, a `memset` for a Python number, and for a pending matmul
the matmul itself targets the view. `update_in_place(tile, other, op)` is `tile op= other`; for a
PSUM tile and a matmul result it becomes the matmul's accumulation into the tile. Both, `reshape`
and `view`, are what Tile's `t[k] = v`, `t += v`, `t.reshape(...)` and `t.view(dtype)` call (tile.TILE_OPS).
"""
from __future__ import annotations

import os

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core import dtypes as D
from ..core.affine import Affine, axis_var
from . import ops_indirect
from .api import api
from .masks import to_mask
from .memory import ON_CHIP, new_buffer, resolve_dtype
from .ops_math import LoopReduce, elementwise
from .tile import PendingMatmul, Tile, broadcast_access, provide_tile_ops
from .tracer import attrs, current


def _require_tile(x, what: str, op: str, loc) -> Tile:
    if not isinstance(x, Tile):
        raise errors.make("argument", f"operand '{what}' of '{op}' must be a tensor or tile, got {type(x).__name__}",
                          loc=loc)
    return x


def _require_space(t: Tile, spaces: tuple[ir.Space, ...], what: str, op: str, loc) -> None:
    if t.space not in spaces:
        want = "|".join(s.value for s in spaces)
        raise errors.make("memory_space", f"Expected operand '{what}' of '{op}' to be in address space '{want}', "
                          f"but got a tile in '{t.space.value}' instead", loc=loc)


# NKI's mode=oob_mode.skip/error only matters for indirect (data-dependent) DMA, which is not built
_OOB_MODE = {"mode": "mode= (oob_mode, for indirect DMA) is not built yet: nki_lite has no indirect indexing"}


@api("nl.load", unsupported=_OOB_MODE)
def load(src, *, mask=None, dtype=None) -> Tile:
    """nl.load: HBM tensor (view) -> new SBUF tile."""
    tr = current()
    loc = capture_loc(2)
    src = _require_tile(src, "src", "load", loc)
    _require_space(src, (ir.Space.HBM,), "src", "load", loc)
    if ops_indirect.is_indirect(src):
        return ops_indirect.load_indirect(src, mask, dtype, loc)
    dt = src.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    sacc = src.access
    # on-chip tiles are at least 2-D: a vector lands one element per partition ([n] -> [n, 1]) and a
    # single element (`seed[0]`, nki-samples' `sinks[batch_id, head]`) is a [1, 1] tile; the added
    # size-1 axes index nothing
    sacc = ir.Access(sacc.buffer, sacc.index, sacc.shape + (1,) * max(0, 2 - len(src.shape)))
    buf = new_buffer(tr, sacc.shape, dt, ir.Space.SBUF, src.name + "_sb", loc)
    out = ir.Access.full(buf)
    tr.emit(ir.Instr("dma_copy", (out,), (sacc,), attrs(engine="dma"), to_mask(mask, out.shape, loc), loc))
    return Tile(tr, out, dt)


@api("nl.store", unsupported=_OOB_MODE)
def store(dst, value, *, mask=None) -> None:
    """nl.store: on-chip tile -> HBM tensor (view)."""
    tr = current()
    loc = capture_loc(2)
    dst = _require_tile(dst, "dst", "store", loc)
    _require_space(dst, (ir.Space.HBM,), "dst", "store", loc)
    if isinstance(value, (int, float, np.number)):
        raise errors.make("argument", "nl.store needs a tile value, not a Python number", loc=loc,
                          hint="create a tile with nl.full(...) and store it")
    value = _require_tile(value, "value", "store", loc)
    _require_space(value, ON_CHIP, "value", "store", loc)
    if ops_indirect.is_indirect(dst, value):
        ops_indirect.emit("dma_indirect", dst, value, mask, loc)
        return
    src = broadcast_access(value.access, dst.shape, "value")
    tr.emit(ir.Instr("dma_copy", (dst.access,), (src,), attrs(engine="dma"), to_mask(mask, dst.shape, loc), loc))


def copy_into(dst: Tile, value: Tile, loc, mask=None, engine: str | None = None) -> None:
    tr = current()
    if ops_indirect.is_indirect(dst, value):      # `hbm[idx_tile, j] = tile`: an indirect DMA
        if dst.space != ir.Space.HBM and value.space != ir.Space.HBM:
            ops_indirect.emit("copy_dynamic", dst, value, mask, loc, engine=engine or "vector")
        else:
            ops_indirect.emit("dma_indirect", dst, value, mask, loc)
        return
    src = broadcast_access(value.access, dst.shape, "value")
    if dst.space == ir.Space.HBM or value.space == ir.Space.HBM:
        tr.emit(ir.Instr("dma_copy", (dst.access,), (src,), attrs(engine="dma"), mask, loc))
    else:
        tr.emit(ir.Instr("tensor_copy", (dst.access,), (src,), attrs(engine=engine or "vector"), mask, loc))


def _producer_mask(view: Tile, value: Tile):
    """`t[...] = op(..., mask=m)`: the copy of op's fresh result inherits m, so masked-off elements
    of t keep their values whether or not fold_copies later merges the copy into op."""
    body = current().stack[-1].nodes
    last = body[-1] if body else None
    if (isinstance(last, ir.Instr) and last.mask is not None and last.outs and last.outs[0] == value.access
            and value.shape == view.shape):
        return last.mask
    return None


def assign(view: Tile, value) -> None:
    tr = current()
    loc = capture_loc(3)
    if isinstance(value, PendingMatmul) and value.is_pending:
        if view.space == ir.Space.PSUM and view.shape == value.shape:
            value.consume_into(view.access, accumulate=False)
            return
    if isinstance(value, LoopReduce):          # dst[...] = nl.loop_reduce(x, ...): dst = op(x, dst)
        value.apply_into(view)
        return
    if isinstance(value, Tile) and ops_indirect.is_indirect(view, value):
        copy_into(view, value, loc)                # `hbm[idx, j] = t`, `sb[...] = sb2[ix, off + iy]`
        return
    if isinstance(value, Tile):
        if not (isinstance(value, PendingMatmul) and value.consumed) and value.access == view.access:
            return  # `t[k] += v` already updated the view in place
        copy_into(view, value, loc, mask=_producer_mask(view, value))
        return
    if isinstance(value, (bool, int, float, np.number)):
        if view.space == ir.Space.HBM:
            raise errors.make("memory_space", "cannot memset an HBM tensor directly", loc=loc,
                              hint="fill an SBUF tile and nl.store it")
        tr.emit(ir.Instr("memset", (view.access,), (ir.Imm(value.item() if isinstance(value, np.generic) else value,
                                                          D.scalar_dtype(value)),),
                         attrs(engine="vector"), None, loc))
        return
    raise errors.make("argument", f"cannot assign a {type(value).__name__} to a tile", loc=loc,
                      hint="assign a tile, a matmul result or a Python number")


def update_in_place(tile: Tile, other, opname: str) -> Tile:
    """`tile op= other`: PSUM accumulation for matmul results, else an elementwise op into `tile`."""
    loc = capture_loc(3)
    if isinstance(other, PendingMatmul) and other.is_pending and opname == "add":
        if tile.space != ir.Space.PSUM:
            raise errors.make("memory_space", f"matmul results accumulate only into PSUM; '{tile.name}' is in "
                              f"{tile.space.value}", loc=loc, hint="declare the accumulator with buffer=nl.psum")
        if tile.shape != other.shape:
            raise errors.make("matmul_shape", f"accumulating a matmul result of shape {other.shape} into a PSUM "
                              f"tile of shape {tile.shape}", loc=loc)
        other.consume_into(tile.access, accumulate=True)
        return tile
    elementwise(opname, tile, other, dtype=None, mask=None, out=tile, loc=loc)
    return tile


def reshape(t: Tile, shape: tuple[int, ...]) -> Tile:
    tr = current()
    loc = capture_loc(3)
    if t.space != ir.Space.HBM:
        raise errors.make("reshape", "only HBM tensors can be reshaped", loc=loc,
                          hint="reshape the HBM tensor before loading it")
    buf = t.buf
    if t.access != ir.Access.full(buf):
        raise errors.make("reshape", "reshape applies to a whole HBM tensor, not to a view of it", loc=loc)
    shape = tuple(int(s) for s in shape)
    if int(np.prod(shape)) != buf.size:
        raise errors.make("reshape", f"cannot reshape {buf.shape} ({buf.size} elements) into {shape}", loc=loc)
    root = buf.base or buf.name
    alias = tr.add_buffer(ir.Buffer(tr.fresh(root + "_r"), ir.Space.HBM, shape, buf.dtype, "view", 0, root,
                                    loc=loc, hbm_kind=buf.hbm_kind))
    return Tile(tr, ir.Access.full(alias), t.dtype_name)


def view(t: Tile, dtype) -> Tile:
    """`tensor.view(dtype)`: the same HBM storage reinterpreted as another dtype, no copy (NKI's tensor
    API). Built for a whole HBM tensor and a dtype of the same element size whose values use every bit
    (so any stored pattern is a valid value): the view has the tensor's shape and shares its root, so
    flat offsets, bounds and dependences are those of the root. Other cases are NL-E904."""
    tr = current()
    loc = capture_loc(3)
    dt = resolve_dtype(dtype, loc)
    src, dst = D.INFO[t.dtype_name], D.INFO[dt]
    if t.space != ir.Space.HBM or t.access != ir.Access.full(t.buf):
        raise errors.make("unsupported", f"view({dt}) of an on-chip tile or of a part of a tensor is not built yet",
                          loc=loc, hint="view the whole HBM tensor before loading it")
    if any(i.bits != 8 * i.itemsize for i in (src, dst)) or src.itemsize != dst.itemsize:
        raise errors.make("unsupported", f"view from {t.dtype_name} to {dt}: only views between dtypes of the "
                          "same element size whose values use every bit (no bool/tfloat32) are built yet", loc=loc)
    buf = t.buf
    root = buf.base or buf.name
    alias = tr.add_buffer(ir.Buffer(tr.fresh(root + "_v"), ir.Space.HBM, buf.shape, dt, "view", 0, root,
                                    loc=loc, hbm_kind=buf.hbm_kind))
    return Tile(tr, ir.Access.full(alias), dt)


@api("nl.load_transpose2d")
def load_transpose2d(src, *, mask=None, dtype=None) -> Tile:
    """nl.load_transpose2d: HBM [R, C] -> SBUF tile [C, R] (the DMA transposes)."""
    tr = current()
    loc = capture_loc(2)
    src = _require_tile(src, "src", "load_transpose2d", loc)
    _require_space(src, (ir.Space.HBM,), "src", "load_transpose2d", loc)
    if len(src.shape) != 2:
        raise errors.make("rank", f"load_transpose2d takes a 2-D view, got shape {src.shape}", loc=loc)
    swap = {axis_var(0): Affine.var(axis_var(1)), axis_var(1): Affine.var(axis_var(0))}
    tsrc = ir.Access(src.access.buffer, tuple(e.subst(swap) for e in src.access.index),
                     (src.shape[1], src.shape[0]))
    dt = src.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    buf = new_buffer(tr, tsrc.shape, dt, ir.Space.SBUF, src.name + "_T", loc)
    out = ir.Access.full(buf)
    tr.emit(ir.Instr("dma_copy", (out,), (tsrc,), attrs(engine="dma", transpose=True),
                     to_mask(mask, out.shape, loc), loc))
    return Tile(tr, out, dt)


@api("nl.shared_constant")
def shared_constant(constant, dtype=None) -> Tile:
    """nl.shared_constant: a read-only HBM tensor holding host data known at trace time."""
    tr = current()
    loc = capture_loc(2)
    if isinstance(constant, Tile):
        raise errors.make("argument", "nl.shared_constant takes host data (a numpy array), not a tile", loc=loc)
    if isinstance(constant, (str, os.PathLike)):
        # the reference: "the constant data. Can be a numpy array or a file path to a .npy file"
        try:
            constant = np.load(os.fspath(constant), allow_pickle=False)
        except (OSError, ValueError) as e:
            raise errors.make("argument", f"nl.shared_constant: cannot read the .npy file {os.fspath(constant)!r}: "
                              f"{e}", loc=loc, hint="pass a numpy array, or the path of a file np.save wrote") from None
    arr = np.asarray(constant)
    dt = resolve_dtype(dtype if dtype is not None else arr.dtype, loc)
    data = np.ascontiguousarray(arr.astype(D.storage(dt)))
    if data.ndim == 0:
        data = data.reshape(1)
    buf = tr.add_buffer(ir.Buffer(tr.fresh("const"), ir.Space.HBM, data.shape, dt, "const", loc=loc))
    tr.consts[buf.name] = ir.ConstData(data)
    return Tile(tr, ir.Access.full(buf), dt)


@api("nl.shared_identity_matrix")
def shared_identity_matrix(n, dtype=np.uint8) -> Tile:
    """nl.shared_identity_matrix: an n x n identity as a shared constant."""
    return shared_constant(np.identity(int(n)), dtype=dtype)


@api("nl.static_cast")
def static_cast(input_data, dtype):
    """nl.static_cast: host-side cast of a scalar or array (no tracing)."""
    name = resolve_dtype(dtype, capture_loc(2))
    out = np.asarray(input_data).astype(D.to_numpy(name))
    return out[()] if out.ndim == 0 else out       # scalars stay scalars (usable as operands)


@api("nl.device_print")
def device_print(prefix, x, *, mask=None):
    """nl.device_print: print a tile's values when the kernel runs (interpreter: stdout)."""
    tr = current()
    loc = capture_loc(2)
    if not isinstance(x, Tile):
        raise errors.make("argument", f"nl.device_print prints tiles, got {type(x).__name__}", loc=loc)
    tr.emit(ir.Instr("device_print", (), (x.access,), attrs(prefix=str(prefix)), to_mask(mask, x.shape, loc), loc))


provide_tile_ops({"assign": assign, "update_in_place": update_in_place, "reshape": reshape, "view": view})
