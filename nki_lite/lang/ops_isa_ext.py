"""The rest of the legacy nisa/nl op set: scans, selects, statistics, top-8, transposes, printing.

Contract: as lang/ops_isa.py: each call checks its operands and emits one IR instruction (plus
its result tile's allocation); the numerics of each op are defined by its interpreter rule
(runtime/interpret_rules_ext.py) and documented in docs/numerics.md.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core import dtypes as D
from .api import api, isa
from .index import Index, Predicate
from .masks import to_mask
from .memory import new_buffer, resolve_dtype
from .opnames import act_name, alu_name
from .ops_isa import _engine
from .ops_math import _operand, _out, _scalar_imm, activation_tile, require_same_partitions
from .tile import Tile, broadcast_access
from .tracer import attrs, current


def _per_partition(x, like: Tile, what: str, op: str, loc):
    """A [P, 1] (or (P,)) tile broadcast over `like`, or a Python scalar as an immediate."""
    if isinstance(x, Tile):
        t = _operand(x, what, op, loc)
        if t.shape[0] != like.shape[0] or any(s != 1 for s in t.shape[1:]):
            raise errors.make("shape_mismatch", f"{op} {what} must be a scalar or a [P, 1] tile with P="
                              f"{like.shape[0]}; got shape {t.shape}", loc=loc)
        return broadcast_access(t.access, like.shape, what), t.dtype_name
    if isinstance(x, (int, float, bool, np.number)):
        imm = _scalar_imm(x)
        return imm, imm.dtype
    raise errors.make("argument", f"{op} {what} must be a scalar or a [P, 1] tile", loc=loc)


def _reduce_out(reduce_res, data: Tile, op: str, loc) -> ir.Access:
    if not isinstance(reduce_res, Tile):
        raise errors.make("argument", f"{op} needs reduce_res=, a [P, 1] tile to receive the reduction", loc=loc)
    r = _operand(reduce_res, "reduce_res", op, loc)
    if r.shape[0] != data.shape[0] or any(s != 1 for s in r.shape[1:]):
        raise errors.make("shape_mismatch", f"{op} reduce_res must have shape [{data.shape[0]}, 1]; got {r.shape}",
                          loc=loc)
    return r.access


@isa("nisa.activation", ignored=("buffer",))
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, mask=None,
               dtype=None):
    """nisa.activation: out = op(data * scale + bias); with reduce_res, also reduce_op over the free axes."""
    loc = capture_loc(2)
    _check_reduce_cmd(reduce_cmd, loc)
    out = activation_tile(act_name(op, loc), data, dtype, mask, bias=bias, scale=scale, loc=loc,
                          opname="activation")
    if reduce_res is not None or reduce_op is not None:
        _attach_reduce(out, data, reduce_op, reduce_res, "activation", loc)
    return out


@isa("nisa.activation_reduce")
def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    """nisa.activation_reduce: activation plus a reduction of its (fp32) results into reduce_res."""
    loc = capture_loc(2)
    out = activation_tile(act_name(op, loc), data, dtype, mask, bias=bias, scale=scale, loc=loc,
                          opname="activation_reduce")
    _attach_reduce(out, data, reduce_op, reduce_res, "activation_reduce", loc)
    return out


def _check_reduce_cmd(cmd, loc) -> None:
    """nki_lite reduces each instruction on its own: reduce_cmd idle (the default) or reset_reduce. The
    commands that carry the Scalar Engine's accumulator registers across instructions are not built."""
    value = getattr(cmd, "value", cmd)
    if value not in (None, "idle", "reset_reduce"):
        raise errors.make("unsupported", f"nisa.activation reduce_cmd={value!r} (accumulator registers kept across "
                          "instructions) is not built yet", loc=loc,
                          hint="reduce each instruction into its own [P, 1] reduce_res tile (reduce_cmd=reset_reduce) "
                          "and combine those tiles with nl.add / nl.maximum")


def _attach_reduce(out: Tile, data, reduce_op, reduce_res, opname: str, loc) -> None:
    """Give the instruction that produced `out` a second output: the free-axis reduction."""
    tr = current()
    body = tr.stack[-1].nodes
    instr = body[-1]
    rop = alu_name(reduce_op if reduce_op is not None else np.add, loc)
    if rop not in ("add", "maximum", "minimum", "multiply"):
        raise errors.make("unsupported", f"{opname} reduce_op {rop} is not supported (add, max, min, multiply)",
                          loc=loc)
    racc = _reduce_out(reduce_res, out, opname, loc)
    body[-1] = ir.Instr(instr.op, instr.outs + (racc,), instr.ins, instr.attrs + attrs(reduce_op=rop),
                        instr.mask, instr.loc)


@isa("nisa.tensor_scalar_reduce")
def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None):
    """nisa.tensor_scalar_reduce: out = data op0 operand0, reduce_res = reduce_op(out) over the free axes."""
    from .ops_isa import tensor_scalar
    loc = capture_loc(2)
    out = tensor_scalar(data, op0, operand0, reverse0, dtype=dtype, mask=mask)
    _attach_reduce(out, data, reduce_op, reduce_res, "tensor_scalar_reduce", loc)
    return out


@isa("nisa.scalar_tensor_tensor")
def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):
    """nisa.scalar_tensor_tensor: (data op0 operand0) op1 operand1; operand1 is a tile of data's shape."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "scalar_tensor_tensor", loc)
    o0, dt0 = _per_partition(operand0, t, "operand0", "scalar_tensor_tensor", loc)
    t1 = _operand(operand1, "operand1", "scalar_tensor_tensor", loc)
    if t1.shape != t.shape:
        raise errors.make("shape_mismatch", f"scalar_tensor_tensor operand1 shape {t1.shape} must equal data shape "
                          f"{t.shape}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    from .ops_math import _check_int_only
    for op in (op0, op1):
        _check_int_only(alu_name(op, loc), (t.dtype_name, dt0, t1.dtype_name, dt), loc)
    dst = _out(t.shape, dt, loc)
    tr.emit(ir.Instr("scalar_tensor_tensor", (dst,), (t.access, o0, t1.access),
                     attrs(op0=alu_name(op0, loc), reverse0=bool(reverse0) or None, op1=alu_name(op1, loc),
                           reverse1=bool(reverse1) or None, engine="vector"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.tensor_tensor_scan")
def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None):
    """nisa.tensor_tensor_scan: out[:, j] = op1(op0(data0[:, j], out[:, j-1]), data1[:, j]), out[:, -1] = initial."""
    tr = current()
    loc = capture_loc(2)
    a = _operand(data0, "data0", "tensor_tensor_scan", loc)
    b = _operand(data1, "data1", "tensor_tensor_scan", loc)
    if a.shape != b.shape or len(a.shape) != 2:
        raise errors.make("shape_mismatch", f"tensor_tensor_scan data0 {a.shape} and data1 {b.shape} must be equal "
                          "2-D tiles", loc=loc)
    init, _ = _per_partition(initial, a, "initial", "tensor_tensor_scan", loc)
    if isinstance(init, ir.Access):
        init = ir.Access(init.buffer, init.index, (a.shape[0], 1))
    dt = resolve_dtype(dtype, loc) if dtype is not None else D.promote(a.dtype_name, b.dtype_name)
    dst = _out(a.shape, dt, loc)
    tr.emit(ir.Instr("tensor_tensor_scan", (dst,), (a.access, b.access, init),
                     attrs(op0=alu_name(op0, loc), reverse0=bool(reverse0) or None, op1=alu_name(op1, loc),
                           reverse1=bool(reverse1) or None, engine="vector"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.iota")
def iota(expr, dtype, *, mask=None):
    """nisa.iota: a tile holding the values of an affine index expression (computed in int32)."""
    tr = current()
    loc = capture_loc(2)
    if isinstance(expr, (int, np.integer)):
        expr = Index(__import__("nki_lite.core.affine", fromlist=["Affine"]).Affine(int(expr)), 2, {})
    if not isinstance(expr, Index) or expr.ndim < 2:
        raise errors.make("bad_index", "nisa.iota takes an affine expression of 2-D nl.arange indices, e.g. "
                          "nl.arange(128)[:, None] + nl.arange(64)[None, :]", loc=loc)
    dt = resolve_dtype(dtype, loc)
    dst = _out(expr.shape, dt, loc)
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
    t = _operand(on_true_tile, "on_true_tile", "affine_select", loc)
    if not isinstance(on_false_value, (int, float, np.number)):
        raise errors.make("argument", "affine_select on_false_value must be a Python number (fp32)", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = _out(t.shape, dt, loc)
    pmask = to_mask(pred, t.shape, loc)
    tr.emit(ir.Instr("affine_select", (dst,), (t.access, ir.Imm(float(on_false_value), "float32")),
                     attrs(pred=pmask, engine="gpsimd"), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.tensor_copy_predicated")
def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None):
    """nisa.tensor_copy_predicated: dst = predicate ? src : dst (in place)."""
    tr = current()
    loc = capture_loc(2)
    d = _operand(dst, "dst", "tensor_copy_predicated", loc)
    p = _operand(predicate, "predicate", "tensor_copy_predicated", loc)
    if dtype is not None and resolve_dtype(dtype, loc) != d.dtype_name:
        raise errors.make("dtype", f"tensor_copy_predicated writes dst ({d.dtype_name}) in place: dtype="
                          f"{resolve_dtype(dtype, loc)} cannot change it", loc=loc,
                          hint="drop dtype=, or copy into a dst tile of the wanted dtype")
    require_same_partitions("nisa.tensor_copy_predicated", (("dst", d), ("predicate", p), ("src", src)), loc)
    if isinstance(src, Tile):
        s = _operand(src, "src", "tensor_copy_predicated", loc)
        sacc = broadcast_access(s.access, d.shape, "src")
    else:
        sacc = _scalar_imm(src)
    tr.emit(ir.Instr("copy_predicated", (d.access,), (sacc, broadcast_access(p.access, d.shape, "predicate"),
                                                      d.access),
                     attrs(reverse_pred=bool(reverse_pred) or None, engine="vector"),
                     to_mask(mask, d.shape, loc), loc))
    return d


@isa("nisa.bn_stats")
def bn_stats(data, *, mask=None, dtype=None):
    """nisa.bn_stats: [P, 6] = (count, mean, var*count) of the even and of the odd free elements."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "bn_stats", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = _out((t.shape[0], 6), dt, loc)
    tr.emit(ir.Instr("bn_stats", (dst,), (t.access,), attrs(engine="vector"), to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.bn_aggr")
def bn_aggr(data, *, mask=None, dtype=None):
    """nisa.bn_aggr: combine (count, mean, var*count) triples per partition into [P, 2] = (mean, var)."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "bn_aggr", loc)
    n = int(np.prod(t.shape[1:]))
    if n % 3:
        raise errors.make("shape_mismatch", f"bn_aggr input has {n} elements per partition; it must be a multiple "
                          "of 3 (bn_stats outputs)", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = _out((t.shape[0], 2), dt, loc)
    tr.emit(ir.Instr("bn_aggr", (dst,), (t.access,), attrs(engine="vector"), to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.max8")
def max8(*, src, mask=None, dtype=None):
    """nisa.max8: the 8 largest values per partition in descending order, [P, 8]."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(src, "src", "max8", loc)
    n = int(np.prod(t.shape[1:]))
    if not 8 <= n <= 16384:
        raise errors.make("free_size_limit", f"max8 reads 8..16384 elements per partition; got {n}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = _out((t.shape[0], 8), dt, loc)
    tr.emit(ir.Instr("max8", (dst,), (t.access,), attrs(engine="vector"), to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.nc_find_index8")
def nc_find_index8(*, data, vals, mask=None, dtype=None):
    """nisa.nc_find_index8: per partition, the index of the first occurrence of each of 8 values (uint32)."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "nc_find_index8", loc)
    v = _operand(vals, "vals", "nc_find_index8", loc)
    if int(np.prod(v.shape[1:])) != 8 or v.shape[0] != t.shape[0]:
        raise errors.make("shape_mismatch", f"nc_find_index8 vals must have 8 elements per partition and P="
                          f"{t.shape[0]}; got {v.shape}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else "uint32"
    if dt not in ("uint16", "uint32"):
        raise errors.make("dtype", f"nc_find_index8 dtype must be uint16 or uint32, got {dt}", loc=loc)
    dst = _out((t.shape[0], 8), dt, loc)
    tr.emit(ir.Instr("find_index8", (dst,), (t.access, v.access), attrs(engine="vector"),
                     to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.nc_transpose")
def nc_transpose(data, *, mask=None, dtype=None, engine=None):
    """nisa.nc_transpose: PF transpose on the Tensor Engine (<=128x128, SBUF -> PSUM) or the Vector
    Engine (<=32x32). Free axes are collapsed first. Exact data movement."""
    tr = current()
    loc = capture_loc(2)
    t = _operand(data, "data", "nc_transpose", loc)
    P, F = t.shape[0], int(np.prod(t.shape[1:]))
    eng = _engine(engine, "vector" if P <= 32 and F <= 32 else "tensor")
    limit = 128 if eng == "tensor" else 32
    if P > limit or F > limit:
        raise errors.make("free_size_limit", f"nc_transpose on the {eng} engine handles up to {limit}x{limit}; got "
                          f"{P}x{F}", loc=loc, hint="split the tile into blocks" if eng == "vector" else
                          "transpose 128x128 blocks")
    if len(t.shape) > 2:
        raise errors.make("unsupported", "nc_transpose of a tile with several free axes is not built yet", loc=loc,
                          hint="index the tile down to 2-D first")
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    space = ir.Space.PSUM if eng == "tensor" else ir.Space.SBUF
    buf = new_buffer(tr, (F, P), dt, space, "tp", loc)
    dst = ir.Access.full(buf)
    tr.emit(ir.Instr("transpose", (dst,), (t.access,), attrs(engine=eng), to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


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


@api("nl.device_print")
def device_print(prefix, x, *, mask=None):
    """nl.device_print: print a tile's values when the kernel runs (interpreter: stdout)."""
    tr = current()
    loc = capture_loc(2)
    if not isinstance(x, Tile):
        raise errors.make("argument", f"nl.device_print prints tiles, got {type(x).__name__}", loc=loc)
    tr.emit(ir.Instr("device_print", (), (x.access,), attrs(prefix=str(prefix)), to_mask(mask, x.shape, loc), loc))
