"""Shared steps of the interpreter's rules (the numpy oracle; registered as the "interpret" backend
by runtime/interpret_data.py, interpret_compute.py and interpret_reduce.py, laid out like the LLVM
rules in lower/llvm/rules_*.py).

Numerics (shared/DESIGN.md, docs/numerics.md):
- Arithmetic computes in fp32 with one rounding per ALU step, then NaNs are canonicalised to
  +qNaN (0x7FC00000) and the result is rounded once to the output dtype (numerics.convert):
  `finish`. When every input and the output are integers and the op exists on the integer path,
  it computes exactly in int64 and wraps to the output width (`is_int`, `alu_step`). right_shift is
  logical (NKI has no arithmetic right shift): the left operand's bit pattern is zero-extended at
  the output width first.
- Pure data movement of the same dtype copies bits; with a dtype change it converts through fp32
  (exact widening, then `round_to`), or int64 for int -> int (`convert`).
- Reductions attached to activation / tensor_scalar reduce the fp32 results (before the output
  rounding) in numerics.alu's order (`write_reduction`); per-partition outputs are written only for
  the partitions where the instruction's mask selects at least one element (`rows_of`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..numerics import alu
from ..numerics.convert import round_to

if TYPE_CHECKING:
    from .machine import Machine


F32 = np.float32


def finish(x: np.ndarray, dtype: str) -> np.ndarray:
    if x.dtype == np.float32:
        nan = np.isnan(x)
        if nan.any():            # most results have none: skip the select and its new array
            x = np.where(nan, F32("nan"), x)
    return round_to(x, dtype)


def convert(values: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == dst:
        return values
    if D.INFO[src].is_int and D.INFO[dst].is_int:
        return round_to(values.astype(np.int64), dst)
    return round_to(values.astype(F32), dst)


def is_int(m: Machine, operands, out: ir.Access) -> bool:
    dts = [m.dtype_of(o) if isinstance(o, ir.Access) else o.dtype for o in operands] + [m.dtype_of(out)]
    return all(D.INFO[d].is_int for d in dts)


def value(m: Machine, o, env, instr, as_int: bool, mask=None):
    if isinstance(o, ir.Imm):
        return np.int64(o.value) if as_int else F32(o.value)
    v = m.read(o, env, instr, mask)      # a fresh array (Machine.read): no second copy needed
    return v.astype(np.int64, copy=False) if as_int else v.astype(F32, copy=False)


def alu_step(name: str, a, b, as_int: bool, reverse: bool = False, width: int = 64):
    if reverse:
        a, b = b, a
    with np.errstate(all="ignore"):
        if as_int:
            if name == "right_shift" and width < 64:
                # logical shift (NKI has no arithmetic right shift): zero-extend the bit pattern at the
                # output width first, else negative values would shift in ones
                a = np.asarray(a, dtype=np.int64) & np.int64((1 << width) - 1)
            return np.asarray(alu.INT[name](a, b), dtype=np.int64)
        return np.asarray(alu.FP32[name](a, b), dtype=F32)


def rows_of(mask, shape) -> np.ndarray | None:
    """Write mask of a per-partition output: a partition is written iff the instruction's mask
    selects at least one of its elements (as tensor_reduce does); partitions the mask excludes
    keep their old contents. `shape` is the output's shape."""
    if mask is None:
        return None
    rows = np.asarray(mask).reshape(mask.shape[0], -1).any(axis=1)
    return np.broadcast_to(rows.reshape((-1,) + (1,) * (len(shape) - 1)), shape)


def write_reduction(m: Machine, instr: ir.Instr, env, y: np.ndarray, mask) -> None:
    """Second output of activation / tensor_scalar: reduce_op of the fp32 result over free axes."""
    if len(instr.outs) < 2:
        return
    op = instr.attr("reduce_op")
    racc = instr.outs[1]
    y = np.asarray(y, dtype=F32)
    if mask is not None:
        y = np.where(mask, y, F32(alu.REDUCE_IDENTITY[op]))
    flat = y.reshape(y.shape[0], -1)
    r = alu.reduce_fp32(op, flat).reshape(racc.shape)
    m.write(racc, env, finish(r, m.dtype_of(racc)), instr,
            None if mask is None else rows_of(np.broadcast_to(mask, y.shape), racc.shape))
