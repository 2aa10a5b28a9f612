"""nisa data movement (legacy form): tensor_copy, memset, nc_transpose, dma_copy, and the DMA mode
enums (oob_mode, dge_mode).

Contract: each call checks its operands and emits one IR instruction (plus the result tile's
allocation where it has one). nisa.dma_copy (legacy: "both src and dst can be in HBM or SBUF") is one
DMA of src into dst (the IR's dma_copy, as nl.load/nl.store), shapes equal, masked-off elements
unwritten. A tile-indexed (indirect) src or dst, or dst_rmw_op=np.add, makes it the IR's
dma_indirect (lang/ops_indirect.py): oob_mode says what a run-time index out of range does (error:
NL-E503; skip: the element is not moved); an affine out-of-bounds access stays a verification error
whatever the mode. dge_mode is a descriptor-generation hint. nc_transpose's size limits
come from core/targets.py.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from . import ops_indirect
from .api import isa
from .isa_common import engine_auto, engine_name
from .masks import to_mask
from .memory import check_shape, new_buffer, resolve_dtype
from .ops_math import result_access, scalar_imm, tile_operand
from .tile import Tile, broadcast_access
from .tracer import attrs, current


@isa("nisa.tensor_copy")
def tensor_copy(src, *, mask=None, dtype=None, engine=None):
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(src, "src", "tensor_copy", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    tr.emit(ir.Instr("tensor_copy", (dst,), (t.access,),
                     attrs(engine=engine_name(engine, "vector"), engine_auto=engine_auto(engine)),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.memset")
def memset(shape, value, dtype, *, mask=None, engine=None):
    tr = current()
    loc = capture_loc(2)
    dims, par_axis = check_shape(shape, loc)
    dt = resolve_dtype(dtype, loc)
    buf = new_buffer(tr, dims, dt, ir.Space.SBUF, "ms", loc, par_axis=par_axis)
    dst = ir.Access.full(buf)
    tr.emit(ir.Instr("memset", (dst,), (scalar_imm(value),), attrs(engine=engine_name(engine, "vector")),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.nc_transpose")
def nc_transpose(data, *, mask=None, dtype=None, engine=None):
    """nisa.nc_transpose: PF transpose on the Tensor Engine (<=128x128, SBUF -> PSUM) or the Vector
    Engine (<=32x32). Free axes are collapsed first. Exact data movement."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(data, "data", "nc_transpose", loc)
    P, F = t.shape[0], int(np.prod(t.shape[1:]))
    vmax = tr.hw.transpose_vector_max
    eng = engine_name(engine, "vector" if P <= vmax and F <= vmax else "tensor")
    limit = tr.hw.transpose_tensor_max if eng == "tensor" else vmax
    if P > limit or F > limit:
        raise errors.make("free_size_limit", f"nc_transpose on the {eng} engine handles up to {limit}x{limit}; got "
                          f"{P}x{F}", loc=loc, hint="split the tile into blocks" if eng == "vector" else
                          f"transpose {limit}x{limit} blocks")
    if len(t.shape) > 2:
        raise errors.make("unsupported", "nc_transpose of a tile with several free axes is not built yet", loc=loc,
                          hint="index the tile down to 2-D first")
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    space = ir.Space.PSUM if eng == "tensor" else ir.Space.SBUF
    buf = new_buffer(tr, (F, P), dt, space, "tp", loc)
    dst = ir.Access.full(buf)
    tr.emit(ir.Instr("transpose", (dst,), (t.access,), attrs(engine=eng), to_mask(mask, dst.shape, loc), loc))
    if eng == "tensor":
        tr.compiler_placed.add(buf.name)      # a matmul operand: copied to SBUF (ops_math.sbuf_operand)
    return Tile(tr, dst, dt)


class oob_mode:  # noqa: N801 - NKI's spelling
    """nisa.oob_mode: what an indirect DMA does with an out-of-bounds index."""
    error = "error"
    skip = "skip"


class dge_mode:  # noqa: N801
    """nisa.dge_mode: descriptor generation (a performance hint here)."""
    unknown, none, swdge, hwdge = "unknown", "none", "swdge", "hwdge"


@isa("nisa.dma_copy")
def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None) -> None:
    loc = capture_loc(2)
    for what, t in (("dst", dst), ("src", src)):
        if not isinstance(t, Tile):
            raise errors.make("argument", f"nisa.dma_copy {what}= must be a tensor or tile, got {type(t).__name__}",
                              loc=loc)
    if tuple(dst.shape) != tuple(src.shape):
        raise errors.make("shape_mismatch", f"nisa.dma_copy: dst shape {tuple(dst.shape)} differs from src shape "
                          f"{tuple(src.shape)}", loc=loc)
    oob = ops_indirect.oob_name(oob_mode, loc)
    if dst_rmw_op is not None or ops_indirect.is_indirect(dst, src):
        rmw = ops_indirect.rmw_name(dst_rmw_op, loc) if dst_rmw_op is not None else ""
        if rmw and oob == "skip":       # NKI: "if dst_rmw_op is specified, only oob_mode.error is allowed"
            raise errors.make("argument", "nisa.dma_copy: dst_rmw_op allows only oob_mode=nisa.oob_mode.error",
                              loc=loc)
        ops_indirect.emit("dma_indirect", dst, src, mask, loc, oob=oob, rmw=rmw)
        return
    acc = broadcast_access(src.access, dst.shape, "src")
    current().emit(ir.Instr("dma_copy", (dst.access,), (acc,), attrs(engine="dma"), to_mask(mask, dst.shape, loc),
                            loc))
