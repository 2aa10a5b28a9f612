"""nisa reductions and statistics (legacy form: each call returns its result tile): tensor_reduce,
the instructions with a reduce_res output (activation_reduce, tensor_scalar_reduce), the scan
tensor_tensor_scan, batch-norm statistics (bn_stats, bn_aggr) and top-8 (max8, nc_find_index8).

Contract: as lang/isa_compute.py: each call checks its operands and emits one IR instruction (plus
its result tile's allocation); reductions run along the free axes only. Size limits come from
core/targets.py.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core import dtypes as D
from .api import isa
from .isa_common import attach_reduce, per_partition
from .isa_compute import tensor_scalar
from .masks import to_mask
from .memory import resolve_dtype
from .opnames import act_name, alu_name
from .ops_math import activation_tile, reduce_tile, result_access, tile_operand
from .tile import Tile
from .tracer import attrs, current


@isa("nisa.tensor_reduce")
def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False):
    loc = capture_loc(2)
    return reduce_tile(alu_name(op, loc), data, axis, dtype, mask, keepdims, negate=bool(negate), loc=loc,
                       what="tensor_reduce")


@isa("nisa.activation_reduce")
def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    """nisa.activation_reduce: activation plus a reduction of its (fp32) results into reduce_res."""
    loc = capture_loc(2)
    out = activation_tile(act_name(op, loc), data, dtype, mask, bias=bias, scale=scale, loc=loc,
                          opname="activation_reduce")
    attach_reduce(out, data, reduce_op, reduce_res, "activation_reduce", loc)
    return out


@isa("nisa.tensor_scalar_reduce")
def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None):
    """nisa.tensor_scalar_reduce: out = data op0 operand0, reduce_res = reduce_op(out) over the free axes."""
    loc = capture_loc(2)
    out = tensor_scalar(data, op0, operand0, reverse0, dtype=dtype, mask=mask)
    attach_reduce(out, data, reduce_op, reduce_res, "tensor_scalar_reduce", loc)
    return out


@isa("nisa.tensor_tensor_scan")
def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None):
    """nisa.tensor_tensor_scan: out[:, j] = op1(op0(data0[:, j], out[:, j-1]), data1[:, j]), out[:, -1] = initial."""
    tr = current()
    loc = capture_loc(2)
    a = tile_operand(data0, "data0", "tensor_tensor_scan", loc)
    b = tile_operand(data1, "data1", "tensor_tensor_scan", loc)
    if a.shape != b.shape or len(a.shape) != 2:
        raise errors.make("shape_mismatch", f"tensor_tensor_scan data0 {a.shape} and data1 {b.shape} must be equal "
                          "2-D tiles", loc=loc)
    init, _ = per_partition(initial, a, "initial", "tensor_tensor_scan", loc)
    if isinstance(init, ir.Access):
        init = ir.Access(init.buffer, init.index, (a.shape[0], 1))
    dt = resolve_dtype(dtype, loc) if dtype is not None else D.promote(a.dtype_name, b.dtype_name)
    dst = result_access(a.shape, dt, loc)
    tr.emit(ir.Instr("tensor_tensor_scan", (dst,), (a.access, b.access, init),
                     attrs(op0=alu_name(op0, loc), reverse0=bool(reverse0) or None, op1=alu_name(op1, loc),
                           reverse1=bool(reverse1) or None, engine="vector"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.bn_stats")
def bn_stats(data, *, mask=None, dtype=None):
    """nisa.bn_stats: [P, 6] = (count, mean, var*count) of the even and of the odd free elements."""
    loc = capture_loc(2)
    t = tile_operand(data, "data", "bn_stats", loc)
    return _per_partition_result("bn_stats", t, (t.access,), 6, _dtype_or(dtype, t.dtype_name, loc), mask, loc)


@isa("nisa.bn_aggr")
def bn_aggr(data, *, mask=None, dtype=None):
    """nisa.bn_aggr: combine (count, mean, var*count) triples per partition into [P, 2] = (mean, var)."""
    loc = capture_loc(2)
    t = tile_operand(data, "data", "bn_aggr", loc)
    n = int(np.prod(t.shape[1:]))
    if n % 3:
        raise errors.make("shape_mismatch", f"bn_aggr input has {n} elements per partition; it must be a multiple "
                          "of 3 (bn_stats outputs)", loc=loc)
    return _per_partition_result("bn_aggr", t, (t.access,), 2, _dtype_or(dtype, t.dtype_name, loc), mask, loc)


@isa("nisa.max8")
def max8(*, src, mask=None, dtype=None):
    """nisa.max8: the 8 largest values per partition in descending order, [P, 8]."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(src, "src", "max8", loc)
    n = int(np.prod(t.shape[1:]))
    lo, hi = tr.hw.max8_fmin, tr.hw.max8_fmax
    if not lo <= n <= hi:
        raise errors.make("free_size_limit", f"max8 reads {lo}..{hi} elements per partition; got {n}", loc=loc)
    return _per_partition_result("max8", t, (t.access,), 8, _dtype_or(dtype, t.dtype_name, loc), mask, loc)


@isa("nisa.nc_find_index8")
def nc_find_index8(*, data, vals, mask=None, dtype=None):
    """nisa.nc_find_index8: per partition, the index of the first occurrence of each of 8 values (uint32)."""
    loc = capture_loc(2)
    t = tile_operand(data, "data", "nc_find_index8", loc)
    v = tile_operand(vals, "vals", "nc_find_index8", loc)
    if int(np.prod(v.shape[1:])) != 8 or v.shape[0] != t.shape[0]:
        raise errors.make("shape_mismatch", f"nc_find_index8 vals must have 8 elements per partition and P="
                          f"{t.shape[0]}; got {v.shape}", loc=loc)
    dt = _dtype_or(dtype, "uint32", loc)
    if dt not in ("uint16", "uint32"):
        raise errors.make("dtype", f"nc_find_index8 dtype must be uint16 or uint32, got {dt}", loc=loc)
    return _per_partition_result("find_index8", t, (t.access, v.access), 8, dt, mask, loc)


def _dtype_or(dtype, default: str, loc) -> str:
    return resolve_dtype(dtype, loc) if dtype is not None else default


def _per_partition_result(op: str, t: Tile, ins: tuple, width: int, dt: str, mask, loc) -> Tile:
    """One Vector Engine instruction writing a fresh [P, width] tile from `t` (mask= over t's shape)."""
    tr = current()
    dst = result_access((t.shape[0], width), dt, loc)
    tr.emit(ir.Instr(op, (dst,), ins, attrs(engine="vector"), to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)
