"""nisa selects with a max-reduction (range_select, select_reduce), the Vector Engine accumulator they
share, and nc_match_replace8.

Contract: each call checks its operands against NKI's documented constraints (errors at the user's
line) and emits one IR instruction, plus the accumulator steps below.
- range_select: out = (cmp0(i, bound0) and cmp1(i, bound1)) ? on_true : on_false_value, i = range_start
  + the element's flat free index, compared in fp32; bounds are one value per partition.
- select_reduce: dst = (predicate != 0, or == 0 with reverse_pred) ? on_true : on_false.
- reduce_cmd (the accumulator registers, shared by both): the instruction's max over the free axes
  of its fp32 results goes to a [P, 1] fp32 tile. `idle`: only reduce_res receives it. `reset_reduce`:
  a new accumulator holds it. `reduce`: the current accumulator takes the max with it. `reset`: a new
  accumulator holds -inf. With reduce_res, reduce_res then receives the accumulator. A new
  accumulator is a new tile allocated where the chain starts, so chains in different iterations of an
  affine_range loop do not depend on each other; a `reduce` with no chain started reads a fresh
  (uninitialised) accumulator, as the hardware's registers would be.
- nc_match_replace8: per partition, the first not-yet-replaced occurrence of each of the 8 values (in
  order) becomes imm; its flat index goes to dst_idx (0 when absent: NKI leaves that undefined).
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import dtypes as D
from ..core import ir
from .api import isa
from .isa_common import per_partition
from .masks import to_mask
from .memory import resolve_dtype
from .opnames import alu_name
from .ops_math import require_same_partitions, result_access, tile_operand
from .tile import Tile, broadcast_access
from .tracer import attrs, current

FP32_MIN = float(np.finfo(np.float32).min)
COMPARES = ("equal", "less", "less_equal", "greater", "greater_equal")

_ACCUMULATORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # tracer -> accumulator Access


def _cmd(reduce_cmd, op: str, loc) -> str:
    value = str(getattr(reduce_cmd, "value", reduce_cmd) or "idle")
    if value == "load_reduce":
        raise errors.make("unsupported", f"nisa.{op} reduce_cmd=load_reduce is not built yet", loc=loc,
                          hint="start the chain with reduce_cmd=reset_reduce")
    if value not in ("idle", "reset", "reset_reduce", "reduce"):
        raise errors.make("isa_operand", f"nisa.{op} reduce_cmd={value!r}: expected idle, reset, reset_reduce or "
                          "reduce (nisa.reduce_cmd)", loc=loc)
    return value


def _max_only(reduce_op, op: str, loc) -> None:
    """reduce_op: only max (None, NKI's default np.amax, also means max)."""
    if reduce_op is not None and alu_name(reduce_op, loc) != "maximum":
        raise errors.make("isa_operand", f"nisa.{op} reduce_op={alu_name(reduce_op, loc)}: only max is supported",
                          loc=loc, hint="pass reduce_op=np.max (or nl.max)")


def _reduce_res(reduce_res, P: int, op: str, loc):
    if reduce_res is None:
        return None
    r = tile_operand(reduce_res, "reduce_res", op, loc)
    if r.shape[0] != P or any(s != 1 for s in r.shape[1:]):
        raise errors.make("shape_mismatch", f"nisa.{op} reduce_res must have shape [{P}, 1]; got {r.shape}", loc=loc)
    if not D.INFO[r.dtype_name].kind == "f":
        raise errors.make("dtype", f"nisa.{op} reduce_res must be a float tile; got {r.dtype_name}", loc=loc)
    return r


def _row_access(shape, loc) -> ir.Access:
    return result_access(shape, "float32", loc, base="vector_acc")


def emit_select(op: str, dst: ir.Access, ins: tuple, extra: tuple, mask, reduce_cmd: str, reduce_res, loc) -> None:
    """Emit the select instruction and its accumulator steps (module docstring)."""
    tr = current()
    P = dst.shape[0]
    red = None
    if reduce_cmd in ("reset_reduce", "reduce") or (reduce_cmd == "idle" and reduce_res is not None):
        red = _row_access((P, 1), loc)
    outs = (dst,) if red is None else (dst, red)
    tr.emit(ir.Instr(op, outs, ins, extra + attrs(reduce_op="maximum" if red is not None else None, engine="vector"),
                     mask, loc))
    if reduce_cmd == "idle":
        src = red
    else:
        acc = _ACCUMULATORS.get(tr)
        if reduce_cmd == "reduce" and acc is not None and acc.shape[0] != P:
            raise errors.make("accumulator", f"nisa.{op} reduce_cmd=reduce on {P} partitions continues an "
                              f"accumulator of {acc.shape[0]} partitions", loc=loc)
        if reduce_cmd == "reset_reduce":
            acc = red
        elif reduce_cmd == "reset":
            acc = _row_access((P, 1), loc)
            tr.emit(ir.Instr("memset", (acc,), (ir.Imm(float("-inf"), "float32"),), attrs(engine="vector"), None, loc))
        else:                                                  # reduce: acc = max(acc, this instruction's max)
            if acc is None:
                acc = _row_access((P, 1), loc)
            tr.emit(ir.Instr("tensor_tensor", (acc,), (acc, red), attrs(op="maximum", engine="vector"), None, loc))
        _ACCUMULATORS[tr] = acc
        src = acc
    if reduce_res is not None:
        # reduce_res may be a [P] column view (max_local[:, k]): the [P, 1] value drops its trailing axis
        tr.emit(ir.Instr("tensor_copy", (reduce_res.access,), (broadcast_access(src, reduce_res.shape, "reduce_res"),),
                         attrs(engine="vector"), None, loc))


@isa("nisa.range_select")
def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd="idle", reduce_res=None,
                 reduce_op=None, range_start=0, on_false_value=FP32_MIN, mask=None, dtype=None):
    """nisa.range_select: keep elements whose free index (+ range_start) passes both bound tests."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(on_true_tile, "on_true_tile", "range_select", loc)
    if D.INFO[t.dtype_name].kind != "f":
        raise errors.make("dtype", f"nisa.range_select on_true_tile must be a float tile; got {t.dtype_name}",
                          loc=loc)
    cmps = []
    for what, c in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        name = alu_name(c, loc)
        if name not in COMPARES:
            raise errors.make("isa_operand", f"nisa.range_select {what}={name}: expected one of np.equal, np.less, "
                              "np.less_equal, np.greater, np.greater_equal", loc=loc)
        cmps.append(name)
    bounds = []
    for what, b in (("bound0", bound0), ("bound1", bound1)):
        acc, bdt = per_partition(b, t, what, "range_select", loc)
        if isinstance(acc, ir.Access) and bdt != "float32":
            raise errors.make("dtype", f"nisa.range_select {what} must be float32; got {bdt}", loc=loc)
        bounds.append(ir.Imm(float(acc.value), "float32") if isinstance(acc, ir.Imm) else acc)
    if not isinstance(range_start, (int, np.integer)) or isinstance(range_start, (bool, np.bool_)):
        raise errors.make("isa_operand", f"nisa.range_select range_start must be a compile-time integer; got "
                          f"{range_start!r}", loc=loc)
    _max_only(reduce_op, "range_select", loc)
    cmd = _cmd(reduce_cmd, "range_select", loc)
    r = _reduce_res(reduce_res, t.shape[0], "range_select", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    extra = attrs(comp_op0=cmps[0], comp_op1=cmps[1], range_start=int(range_start),
                  on_false=float(np.float32(on_false_value)))
    emit_select("range_select", dst, (t.access, bounds[0], bounds[1]), extra, to_mask(mask, t.shape, loc), cmd, r,
                loc)
    return Tile(tr, dst, dt)


@isa("nisa.select_reduce")
def select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd="idle", reduce_op=None,
                  reverse_pred=False, mask=None, dtype=None):
    """nisa.select_reduce: dst = predicate ? on_true : on_false (in place), with an optional max."""
    loc = capture_loc(2)
    d = tile_operand(dst, "dst", "select_reduce", loc)
    p = tile_operand(predicate, "predicate", "select_reduce", loc)
    t = tile_operand(on_true, "on_true", "select_reduce", loc)
    require_same_partitions("nisa.select_reduce", (("dst", d), ("predicate", p), ("on_true", t)), loc)
    if p.shape != d.shape or t.shape != d.shape:
        raise errors.make("shape_mismatch", f"nisa.select_reduce dst {d.shape}, predicate {p.shape} and on_true "
                          f"{t.shape} must have the same shape", loc=loc)
    if t.dtype_name in ("tfloat32", "int32", "uint32"):
        raise errors.make("dtype", f"nisa.select_reduce on_true cannot be {t.dtype_name}", loc=loc)
    if D.INFO[p.dtype_name].kind == "f":
        raise errors.make("dtype", f"nisa.select_reduce predicate must be an integer tile; got {p.dtype_name}",
                          loc=loc, hint="build the predicate with dtype=nl.uint8")
    if p.space == ir.Space.PSUM and t.space == ir.Space.PSUM:
        raise errors.make("memory_space", "nisa.select_reduce: on_true and predicate cannot both be in PSUM", loc=loc)
    if dtype is not None and resolve_dtype(dtype, loc) != d.dtype_name:
        raise errors.make("dtype", f"nisa.select_reduce writes dst ({d.dtype_name}) in place: dtype="
                          f"{resolve_dtype(dtype, loc)} cannot change it", loc=loc)
    f, _ = per_partition(on_false, t, "on_false", "select_reduce", loc)
    if isinstance(f, ir.Imm):
        f = ir.Imm(float(f.value), "float32")
    _max_only(reduce_op, "select_reduce", loc)
    cmd = _cmd(reduce_cmd, "select_reduce", loc)
    r = _reduce_res(reduce_res, t.shape[0], "select_reduce", loc)
    ins = (p.access, t.access, f)
    emit_select("select_reduce", d.access, ins, attrs(reverse_pred=bool(reverse_pred) or None),
                to_mask(mask, d.shape, loc), cmd, r, loc)
    return d


@isa("nisa.nc_match_replace8")
def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None):
    """nisa.nc_match_replace8: replace the first occurrence of each of 8 values per partition by imm."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(data, "data", "nc_match_replace8", loc)
    v = tile_operand(vals, "vals", "nc_match_replace8", loc)
    require_same_partitions("nisa.nc_match_replace8", (("data", t), ("vals", v)), loc)
    if len(t.shape) > 5 or len(v.shape) > 3:
        raise errors.make("rank", f"nisa.nc_match_replace8 data is at most 5-D and vals at most 3-D; got "
                          f"{len(t.shape)}-D and {len(v.shape)}-D", loc=loc)
    if int(np.prod(v.shape[1:])) != 8:
        raise errors.make("shape_mismatch", f"nisa.nc_match_replace8 vals must have 8 elements per partition; got "
                          f"shape {v.shape}", loc=loc)
    n = int(np.prod(t.shape[1:]))
    if n > tr.hw.max8_fmax:
        raise errors.make("free_size_limit", f"nisa.nc_match_replace8 reads at most {tr.hw.max8_fmax} elements per "
                          f"partition; got {n}", loc=loc)
    if not isinstance(imm, (int, float, np.integer, np.floating)) or isinstance(imm, (bool, np.bool_)):
        raise errors.make("isa_operand", f"nisa.nc_match_replace8 imm must be a float32 constant; got "
                          f"{type(imm).__name__}", loc=loc)
    outs_idx = ()
    if dst_idx is not None:
        i = tile_operand(dst_idx, "dst_idx", "nc_match_replace8", loc)
        if i.shape[0] != t.shape[0] or int(np.prod(i.shape[1:])) != 8:
            raise errors.make("shape_mismatch", f"nisa.nc_match_replace8 dst_idx must have {t.shape[0]} partitions "
                              f"and 8 elements per partition; got {i.shape}", loc=loc)
        outs_idx = (i.access,)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    tr.emit(ir.Instr("match_replace8", (dst,) + outs_idx, (t.access, v.access),
                     attrs(imm=float(np.float32(imm)), engine="vector"), to_mask(mask, t.shape, loc), loc))
    return Tile(tr, dst, dt)
