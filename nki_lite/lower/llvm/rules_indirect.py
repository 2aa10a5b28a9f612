"""llvm rules of indirect data movement: dma_indirect and copy_dynamic (mirrors
runtime/interpret_indirect.py, whose docstring states the semantics).

One scalar loop over the tile in row-major order (the interpreter's element order, so the first
out-of-range index reported and the order of repeated read-modify-writes agree): per live element
read the index tile, add the affine part of the indirect dimension, check it against the
dimension's size (oob=error: a status report with code ERR_INDIRECT, which runtime/native.py turns into
NL-E503; oob=skip: the element is not moved), then move (or add, rmw=add) one element. The
index is data: nothing here is vectorised or fused.
"""
from __future__ import annotations

import contextlib

from ...core import dtypes as D
from ...core import ir
from ...core.affine import Affine
from ...core.ops import rule
from .rules_common import flat_axes

ERR_INDIRECT = 3          # status word 0 of an indirect out-of-range index (codegen.ERR_BOUNDS is 1)


def _fail(em, site: int, ctx, operand: int, dim: int, value: str, element: str) -> None:
    """Status words: code, site, operand, dim, the index value, the tile element (row-major flat)."""
    em.fail(site, ctx, operand, dim, value, element, code=ERR_INDIRECT)


def _zero_dim(acc: ir.Access, dim: int) -> ir.Access:
    return ir.Access(acc.buffer, acc.index[:dim] + (Affine(0),) + acc.index[dim + 1:], acc.shape)


def _stride(em, buf_name: str, dim: int) -> int:
    s = 1
    for n in em.bufs[buf_name].shape[dim + 1:]:
        s *= n
    return s


@rule("llvm", "dma_indirect", "copy_dynamic")
def _move(em, instr: ir.Instr, ctx) -> None:
    B = em.b
    dst, src = instr.out, instr.ins[0]
    side, dim, rmw = instr.attr("dyn"), instr.attr("dim"), instr.attr("rmw")
    dyn_acc = {"in": src, "out": dst}.get(side)
    dyn_k = 0 if side == "out" else 1                    # operand position in outs + ins (error reports)
    checked = [_zero_dim(dst, dim) if side == "out" else dst, _zero_dim(src, dim) if side == "in" else src]
    if dyn_acc is not None:
        checked.append(instr.ins[1])
    slow = em.check_bounds(instr, ctx, checked, None)
    site = em.site(instr, ctx)
    sdt, ddt = em.dtype(src), em.dtype(dst)
    with em.elements(dst.shape, ctx.env) as env:
        live = em.mask_value(instr.mask, env)
        em.check_element(slow, live, ctx, env, checked)
        with (B.if_(live, "im") if live is not None else contextlib.nullcontext()):
            ptr = None
            guard = contextlib.nullcontext()
            if dyn_acc is not None:
                idx = instr.ins[1]
                off = em.to_i64(em.load_raw(idx, env), em.dtype(idx))
                v = B.op(f"add nsw i64 {em.affine(dyn_acc.index[dim], env)}, {off}")
                n = em.bufs[dyn_acc.buffer].shape[dim]
                bad = B.op(f"or i1 {B.op(f'icmp slt i64 {v}, 0')}, {B.op(f'icmp sge i64 {v}, {n}')}")
                if instr.attr("oob") == "skip":
                    guard = B.if_(B.op(f"xor i1 {bad}, true"), "iok")
                else:
                    with B.if_(bad, "ioob"):
                        _fail(em, site, ctx, dyn_k, dim, v, em.affine(flat_axes(dst.shape, 0, None), env))
                base = em.affine(em.flat_index(_zero_dim(dyn_acc, dim)), env)
                flat = B.op(f"add nsw i64 {base}, {B.op(f'mul nsw i64 {v}, {_stride(em, dyn_acc.buffer, dim)}')}")
                ty = em.storage(dyn_acc.buffer)
                ptr = B.op(f"getelementptr inbounds {ty}, ptr {em.base_ptr(dyn_acc.buffer)}, i64 {flat}")
            with guard:
                _element(em, instr, env, side, ptr, sdt, ddt, rmw)


def _element(em, instr, env, side, ptr, sdt, ddt, rmw) -> None:
    """Move (or add into the destination) one element; `ptr` addresses the indirect side."""
    B = em.b
    dst, src = instr.out, instr.ins[0]
    sty, dty = em.storage(src.buffer), em.storage(dst.buffer)
    raw = B.op(f"load {sty}, ptr {ptr}, align {D.itemsize(sdt)}") if side == "in" else em.load_raw(src, env)
    dptr = ptr if side == "out" else em.elem_ptr(dst, env)
    if rmw:
        old = B.op(f"load {dty}, ptr {dptr}, align {D.itemsize(ddt)}")
        s = B.op(f"fadd float {em.to_f32(old, ddt)}, {em.to_f32(raw, sdt)}")
        val = em.from_f32(em.canon(s), ddt)
    else:
        val = em.convert_raw(raw, sdt, ddt)
    B.emit(f"store {dty} {val}, ptr {dptr}, align {D.itemsize(ddt)}")
