"""nisa compute instructions (legacy form: each call returns its result tile): nc_matmul, the
elementwise ALU instructions (tensor_tensor, tensor_scalar, scalar_tensor_tensor), activation and
reciprocal, and the index-driven ones (iota, affine_select, tensor_copy_predicated).

Contract: each function checks its operands and emits one IR instruction (plus its result tile's
allocation); op arguments accept numpy ufuncs, nl functions or names (lang/opnames.py). The numerics
of each op are defined by its interpreter rule and documented in docs/numerics.md.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core.affine import Affine
from .api import isa
from .index import Index, Predicate
from .isa_common import attach_reduce, check_reduce_cmd, engine_auto, engine_name, per_partition
from .masks import to_mask
from .memory import resolve_dtype
from .opnames import act_name, alu_name
from .ops_math import (activation_tile, check_int_only, elementwise, matmul_pending, require_same_partitions,
                       result_access, scalar_imm, tile_operand)
from .tile import Tile, broadcast_access
from .tracer import attrs, current


@isa("nisa.nc_matmul", ignored=("is_stationary_onezero", "is_moving_onezero", "tile_position", "tile_size"))
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=None, tile_size=None, mask=None, perf_mode=None):
    """stationary[K, M]^T @ moving[K, N] -> PSUM [M, N] fp32 (k summed in order).

    is_transpose (legacy docs: "hints to the compiler that this is a transpose operation with moving
    as an identity matrix") is a hint like is_*_onezero: the result is the same product. mask= is over
    the [M, N] output: masked-off outputs are not written (see PendingMatmul)."""
    loc = capture_loc(2)
    pm = getattr(perf_mode, "value", perf_mode)
    extra = {"is_transpose": True} if is_transpose else {}      # verify_matmul: a transpose's PSUM dtype
    pending = matmul_pending(stationary, moving, loc, "nc_matmul", perf_mode=pm if pm not in (None, "none") else None,
                             **extra)
    if mask is not None:
        pending.out_mask = to_mask(mask, pending.shape, loc)
    return pending


@isa("nisa.tensor_tensor")
def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=None):
    loc = capture_loc(2)
    a = tile_operand(data1, "data1", "tensor_tensor", loc)
    b = tile_operand(data2, "data2", "tensor_tensor", loc)
    require_same_partitions("nisa.tensor_tensor", (("data1", a), ("data2", b)), loc)
    return elementwise(alu_name(op, loc), a, b, dtype, mask, loc=loc, engine=engine_name(engine, "vector"))


@isa("nisa.tensor_scalar")
def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=None):
    """out = (data op0 operand0) op1 operand1; operands are scalars or [P, 1] tiles. Each op rounds to fp32."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(data, "data", "tensor_scalar", loc)
    names = [alu_name(op0, loc)] + ([alu_name(op1, loc)] if op1 is not None else [])
    ins: list = [t.access]
    dts = [t.dtype_name]
    for k, opnd in enumerate([operand0] + ([operand1] if op1 is not None else [])):
        if isinstance(opnd, Tile):
            o = tile_operand(opnd, f"operand{k}", "tensor_scalar", loc)
            if o.shape[0] != t.shape[0] or any(s != 1 for s in o.shape[1:]):
                raise errors.make("shape_mismatch", f"tensor_scalar operand{k} must be a scalar or a [P, 1] tile "
                                  f"with P={t.shape[0]}; got shape {o.shape}", loc=loc)
            ins.append(broadcast_access(o.access, t.shape, f"operand{k}"))
            dts.append(o.dtype_name)
        elif isinstance(opnd, (int, float, bool, np.number)):
            ins.append(scalar_imm(opnd))
            dts.append(ins[-1].dtype)
        else:
            raise errors.make("argument", f"tensor_scalar operand{k} must be a scalar or a [P, 1] tile", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    for name in names:
        check_int_only(name, tuple(dts) + (dt,), loc)
    dst = result_access(t.shape, dt, loc)
    at = attrs(op0=names[0], reverse0=bool(reverse0) or None,
               op1=names[1] if len(names) > 1 else None, reverse1=(bool(reverse1) or None) if len(names) > 1 else None,
               engine=engine_name(engine, "vector"), engine_auto=engine_auto(engine))
    tr.emit(ir.Instr("tensor_scalar", (dst,), tuple(ins), at, to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.scalar_tensor_tensor")
def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):
    """nisa.scalar_tensor_tensor: (data op0 operand0) op1 operand1; operand1 is a tile of data's shape."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(data, "data", "scalar_tensor_tensor", loc)
    o0, dt0 = per_partition(operand0, t, "operand0", "scalar_tensor_tensor", loc)
    t1 = tile_operand(operand1, "operand1", "scalar_tensor_tensor", loc)
    if t1.shape != t.shape:
        raise errors.make("shape_mismatch", f"scalar_tensor_tensor operand1 shape {t1.shape} must equal data shape "
                          f"{t.shape}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    for op in (op0, op1):
        check_int_only(alu_name(op, loc), (t.dtype_name, dt0, t1.dtype_name, dt), loc)
    dst = result_access(t.shape, dt, loc)
    tr.emit(ir.Instr("scalar_tensor_tensor", (dst,), (t.access, o0, t1.access),
                     attrs(op0=alu_name(op0, loc), reverse0=bool(reverse0) or None, op1=alu_name(op1, loc),
                           reverse1=bool(reverse1) or None, engine="vector"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.activation", ignored=("buffer",))
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, mask=None,
               dtype=None):
    """nisa.activation: out = op(data * scale + bias); with reduce_res, also reduce_op over the free axes."""
    loc = capture_loc(2)
    check_reduce_cmd(reduce_cmd, loc)
    out = activation_tile(act_name(op, loc), data, dtype, mask, bias=bias, scale=scale, loc=loc,
                          opname="activation")
    if reduce_res is not None or reduce_op is not None:
        attach_reduce(out, data, reduce_op, reduce_res, "activation", loc)
    return out


@isa("nisa.reciprocal")
def reciprocal(data, *, dtype=None, mask=None):
    """nisa.reciprocal: 1/x on the Vector Engine (IEEE division in fp32)."""
    loc = capture_loc(2)
    out = activation_tile("reciprocal", data, dtype, mask, loc=loc, opname="reciprocal")
    tr = current()
    instr = tr.stack[-1].nodes[-1]
    tr.stack[-1].nodes[-1] = ir.Instr(instr.op, instr.outs, instr.ins,
                                      tuple((k, "vector" if k == "engine" else v) for k, v in instr.attrs),
                                      instr.mask, instr.loc)
    return out


@isa("nisa.iota")
def iota(expr, dtype, *, mask=None):
    """nisa.iota: a tile holding the values of an affine index expression (computed in int32)."""
    tr = current()
    loc = capture_loc(2)
    if isinstance(expr, (int, np.integer)):
        expr = Index(Affine(int(expr)), 2, {})
    if not isinstance(expr, Index) or expr.ndim < 2:
        raise errors.make("bad_index", "nisa.iota takes an affine expression of 2-D nl.arange indices, e.g. "
                          "nl.arange(128)[:, None] + nl.arange(64)[None, :]", loc=loc)
    dt = resolve_dtype(dtype, loc)
    dst = result_access(expr.shape, dt, loc)
    tr.emit(ir.Instr("iota", (dst,), (), attrs(expr=expr.expr, engine="gpsimd"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.affine_select")
def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None):
    """nisa.affine_select: out = pred(index) ? on_true_tile : on_false_value (pred is one affine comparison)."""
    tr = current()
    loc = capture_loc(2)
    if not isinstance(pred, Predicate):
        raise errors.make("bad_mask", "affine_select pred must be a comparison of nl.arange/mgrid expressions, "
                          "e.g. (iy < ix)", loc=loc)
    if len(pred.mask.terms) != 1:
        raise errors.make("bad_mask", "affine_select pred cannot combine comparisons with &", loc=loc,
                          hint="use nl.where with a computed condition for compound predicates")
    t = tile_operand(on_true_tile, "on_true_tile", "affine_select", loc)
    if not isinstance(on_false_value, (int, float, np.number)):
        raise errors.make("argument", "affine_select on_false_value must be a Python number (fp32)", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    pmask = to_mask(pred, t.shape, loc)
    tr.emit(ir.Instr("affine_select", (dst,), (t.access, ir.Imm(float(on_false_value), "float32")),
                     attrs(pred=pmask, engine="gpsimd"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.tensor_copy_predicated")
def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None):
    """nisa.tensor_copy_predicated: dst = predicate ? src : dst (in place)."""
    tr = current()
    loc = capture_loc(2)
    d = tile_operand(dst, "dst", "tensor_copy_predicated", loc)
    p = tile_operand(predicate, "predicate", "tensor_copy_predicated", loc)
    if dtype is not None and resolve_dtype(dtype, loc) != d.dtype_name:
        raise errors.make("dtype", f"tensor_copy_predicated writes dst ({d.dtype_name}) in place: dtype="
                          f"{resolve_dtype(dtype, loc)} cannot change it", loc=loc,
                          hint="drop dtype=, or copy into a dst tile of the wanted dtype")
    require_same_partitions("nisa.tensor_copy_predicated", (("dst", d), ("predicate", p), ("src", src)), loc)
    if isinstance(src, Tile):
        s = tile_operand(src, "src", "tensor_copy_predicated", loc)
        sacc = broadcast_access(s.access, d.shape, "src")
    else:
        sacc = scalar_imm(src)
    tr.emit(ir.Instr("copy_predicated", (d.access,), (sacc, broadcast_access(p.access, d.shape, "predicate"),
                                                      d.access),
                     attrs(reverse_pred=bool(reverse_pred) or None, engine="vector"),
                     to_mask(mask, d.shape, loc), loc))
    return d
