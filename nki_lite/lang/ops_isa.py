"""nisa ops (legacy NKI ISA: each call returns its result tile).

Contract: each function maps one NKI ISA call to one IR instruction (plus the result tile's
allocation): nc_matmul, activation, tensor_tensor, tensor_scalar, tensor_reduce, tensor_copy,
memset. Op arguments accept numpy ufuncs, nl functions or names (lang/opnames.py).
"""
from __future__ import annotations

from enum import Enum

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core import dtypes as D
from .api import api, isa
from .masks import to_mask
from .memory import check_shape, new_buffer, resolve_dtype
from .opnames import act_name, alu_name
from .ops_math import (_operand, _out, _scalar_imm, elementwise, matmul_pending, reduce_tile,
                       require_same_partitions)
from .tile import Tile, broadcast_access
from .tracer import attrs, current


class engine(str, Enum):  # noqa: N801 - NKI's spelling
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    sync = "sync"
    dma = "dma"
    unknown = "unknown"


tensor_engine, vector_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.vector, engine.scalar, engine.gpsimd
sync_engine, unknown_engine = engine.sync, engine.unknown


class nc_version(int, Enum):  # noqa: N801
    gen2 = 2
    gen3 = 3
    gen4 = 4


_TARGET_VERSION = {"trn1": nc_version.gen2, "inf2": nc_version.gen2, "trn2": nc_version.gen3,
                   "trn3": nc_version.gen4}


@api("nisa.get_nc_version")
def get_nc_version() -> nc_version:
    """The NeuronCore generation of the kernel's target (trn1: gen2, trn2: gen3, trn3: gen4)."""
    return _TARGET_VERSION[current().target]


def _engine(e, default: str) -> str:
    if e is None or e == engine.unknown:
        return default
    return e.value if isinstance(e, engine) else str(e)


@isa("nisa.nc_matmul", ignored=("is_stationary_onezero", "is_moving_onezero", "tile_position", "tile_size"))
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=None, tile_size=None, mask=None, perf_mode=None):
    """stationary[K, M]^T @ moving[K, N] -> PSUM [M, N] fp32 (k summed in order).

    is_transpose (legacy docs: "hints to the compiler that this is a transpose operation with moving
    as an identity matrix") is a hint like is_*_onezero: the result is the same product. mask= is over
    the [M, N] output: masked-off outputs are not written (see PendingMatmul)."""
    loc = capture_loc(2)
    pm = getattr(perf_mode, "value", perf_mode)
    pending = matmul_pending(stationary, moving, loc, "nc_matmul", perf_mode=pm if pm not in (None, "none") else None)
    if mask is not None:
        from .masks import to_mask
        pending.out_mask = to_mask(mask, pending.shape, loc)
    return pending


@isa("nisa.tensor_tensor")
def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=None):
    loc = capture_loc(2)
    a = _operand(data1, "data1", "tensor_tensor", loc)
    b = _operand(data2, "data2", "tensor_tensor", loc)
    require_same_partitions("nisa.tensor_tensor", (("data1", a), ("data2", b)), loc)
    return elementwise(alu_name(op, loc), a, b, dtype, mask, loc=loc, engine=_engine(engine, "vector"))


@isa("nisa.tensor_scalar")
def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=None):
    """out = (data op0 operand0) op1 operand1; operands are scalars or [P, 1] tiles. Each op rounds to fp32."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "tensor_scalar", loc)
    names = [alu_name(op0, loc)] + ([alu_name(op1, loc)] if op1 is not None else [])
    ins: list = [t.access]
    dts = [t.dtype_name]
    for k, opnd in enumerate([operand0] + ([operand1] if op1 is not None else [])):
        if isinstance(opnd, Tile):
            o = _operand(opnd, f"operand{k}", "tensor_scalar", loc)
            if o.shape[0] != t.shape[0] or any(s != 1 for s in o.shape[1:]):
                raise errors.make("shape_mismatch", f"tensor_scalar operand{k} must be a scalar or a [P, 1] tile "
                                  f"with P={t.shape[0]}; got shape {o.shape}", loc=loc)
            ins.append(broadcast_access(o.access, t.shape, f"operand{k}"))
            dts.append(o.dtype_name)
        elif isinstance(opnd, (int, float, bool, np.number)):
            ins.append(_scalar_imm(opnd))
            dts.append(ins[-1].dtype)
        else:
            raise errors.make("argument", f"tensor_scalar operand{k} must be a scalar or a [P, 1] tile", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    from .ops_math import _check_int_only
    for name in names:
        _check_int_only(name, tuple(dts) + (dt,), loc)
    dst = _out(t.shape, dt, loc)
    at = attrs(op0=names[0], reverse0=bool(reverse0) or None,
               op1=names[1] if len(names) > 1 else None, reverse1=(bool(reverse1) or None) if len(names) > 1 else None,
               engine=_engine(engine, "vector"))
    tr.emit(ir.Instr("tensor_scalar", (dst,), tuple(ins), at, to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.tensor_reduce")
def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False):
    loc = capture_loc(2)
    return reduce_tile(alu_name(op, loc), data, axis, dtype, mask, keepdims, negate=bool(negate), loc=loc,
                       what="tensor_reduce")


@isa("nisa.tensor_copy")
def tensor_copy(src, *, mask=None, dtype=None, engine=None):
    tr = current()
    loc = capture_loc(2)
    t = _operand(src, "src", "tensor_copy", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = _out(t.shape, dt, loc)
    tr.emit(ir.Instr("tensor_copy", (dst,), (t.access,), attrs(engine=_engine(engine, "vector")),
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
    tr.emit(ir.Instr("memset", (dst,), (_scalar_imm(value),), attrs(engine=_engine(engine, "vector")),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)
