"""llvm rules for range_select, select_reduce and match_replace8 (mirror
runtime/interpret_select.py step for step: fp32 selects with an optional 16-lane max into the
second output; match_replace8 on a per-partition fp32 copy of the row)."""
from __future__ import annotations

import contextlib

from ...core import ir
from ...core.ops import rule
from .irbuilder import f32
from .rules_common import RowAny, elementwise, flat_axes
from .rules_reduce import _masked_operand, _per_partition, _unflatten

FCMP = {"equal": "oeq", "less": "olt", "less_equal": "ole", "greater": "ogt", "greater_equal": "oge"}
NAN = "0x7FF8000000000000"


def _select(em, instr, ctx, ins, cond_fn, on_true, on_false):
    dt = em.dtype(instr.out)

    def value(env):
        B = em.b
        y = B.op(f"select i1 {cond_fn(env)}, float {em.operand(on_true, env, 'f32')}, "
                 f"float {em.operand(on_false, env, 'f32')}")
        em.row_value = y
        return em.from_f32(em.canon(y), dt)
    reduce_op = "maximum" if len(instr.outs) > 1 else None
    elementwise(em, instr, ctx, tuple(o for o in ins if isinstance(o, ir.Access)), value, reduce_op=reduce_op)


@rule("llvm", "range_select")
def _range_select(em, instr, ctx):
    x, b0, b1 = instr.ins
    free = flat_axes(instr.out.shape, 1, None) + int(instr.attr("range_start"))

    def cond(env):
        B = em.b
        i = B.op(f"sitofp i64 {em.affine(free, env)} to float")
        c0 = B.op(f"fcmp {FCMP[instr.attr('comp_op0')]} float {i}, {em.operand(b0, env, 'f32')}")
        c1 = B.op(f"fcmp {FCMP[instr.attr('comp_op1')]} float {i}, {em.operand(b1, env, 'f32')}")
        return B.op(f"and i1 {c0}, {c1}")
    _select(em, instr, ctx, instr.ins, cond, x, ir.Imm(instr.attr("on_false"), "float32"))


@rule("llvm", "select_reduce")
def _select_reduce(em, instr, ctx):
    pred, t, f = instr.ins

    def cond(env):
        c = em.b.op(f"icmp ne i64 {em.operand(pred, env, 'i64')}, 0")
        return em.b.op(f"xor i1 {c}, true") if instr.attr("reverse_pred") else c
    _select(em, instr, ctx, instr.ins, cond, t, f)


@rule("llvm", "match_replace8")
def _match_replace8(em, instr, ctx):
    """Per partition: the row in an fp32 scratch array (masked-off elements as NaN, which matches
    nothing), 8 first-match scans replacing with imm, then the row and the indices are written."""
    B = em.b
    dst, data, vals = instr.out, instr.ins[0], instr.ins[1]
    accesses = (dst, data, vals) + tuple(instr.outs[1:])
    slow = em.check_bounds(instr, ctx, accesses, None)
    n = 1
    for s in data.shape[1:]:
        n *= s
    row = em.entry_alloca(f"[{n} x float]", "mrow")
    idx = em.entry_alloca("[8 x i64]", "midx")
    found = em.entry_alloca("i64", "mfound")
    flat = flat_axes(data.shape, 1, None)
    rows = RowAny(em, instr.mask is not None)

    def cell(arr, ty, k, i):
        return B.op(f"getelementptr inbounds [{k} x {ty}], ptr {arr}, i64 0, i64 {i}")

    with _per_partition(em, data.shape[0], ctx.env) as penv:
        rows.reset()
        with em.elements(data.shape, penv, start=1) as env:
            x = _masked_operand(em, instr, ctx, slow, data, env, rows, NAN)
            B.emit(f"store float {x}, ptr {cell(row, 'float', n, em.affine(flat, env))}, align 4")
        for j in range(8):
            v = em.operand(vals, _unflatten(em, str(j), vals.shape, 1, penv), "f32")
            B.emit(f"store i64 -1, ptr {found}, align 8")
            with B.loop(n, "mf") as f:
                old = B.op(f"load i64, ptr {found}, align 8")
                here = B.op(f"load float, ptr {cell(row, 'float', n, f)}, align 4")
                hit = B.op(f"fcmp oeq float {here}, {v}")
                take = B.op(f"and i1 {hit}, {B.op(f'icmp slt i64 {old}, 0')}")
                B.emit(f"store i64 {B.op(f'select i1 {take}, i64 {f}, i64 {old}')}, ptr {found}, align 8")
            at = B.op(f"load i64, ptr {found}, align 8")
            ok = B.op(f"icmp sge i64 {at}, 0")
            with B.if_(ok, "mrep"):
                B.emit(f"store float {f32(instr.attr('imm'))}, ptr {cell(row, 'float', n, at)}, align 4")
            B.emit(f"store i64 {B.op(f'select i1 {ok}, i64 {at}, i64 0')}, ptr {cell(idx, 'i64', 8, j)}, align 8")
        with em.elements(data.shape, penv, start=1) as env:
            live = em.mask_value(instr.mask, env)
            with (B.if_(live, "mw") if live is not None else contextlib.nullcontext()):
                y = B.op(f"load float, ptr {cell(row, 'float', n, em.affine(flat, env))}, align 4")
                em.store_raw(dst, env, em.from_f32(em.canon(y), em.dtype(dst)))
        if len(instr.outs) > 1:
            out_idx = instr.outs[1]
            with rows.guard():
                for j in range(8):
                    v = B.op(f"load i64, ptr {cell(idx, 'i64', 8, j)}, align 8")
                    em.store_raw(out_idx, _unflatten(em, str(j), out_idx.shape, 1, penv),
                                 em.from_i64(v, em.dtype(out_idx)))
