"""llvm rules for partition_reduce and sequence_bounds (mirror runtime/interpret_partition.py:
integer columns reduce exactly in i64, float columns in the 16-lane fp32 order with partition p as
element p; sequence_bounds as a forward and a backward scan; nonzero_with_count per row: the row
filled with padding, then one pass storing select(x != 0, position + offset, padding) at the running
count, then the count)."""
from __future__ import annotations

import contextlib

from ...core import dtypes as D
from ...core.affine import axis_var
from ...core.ops import rule
from .rules_common import Lanes, RowAny, alu_op, domain
from .rules_reduce import _unflatten

INT_IDENTITY = {"add": "0", "maximum": str(-2 ** 63), "bitwise_or": "0", "bitwise_and": "-1"}


@rule("llvm", "partition_reduce")
def _partition_reduce(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    op = instr.attr("op")
    dom = domain(em, (src,), (dst,))
    slow = em.check_bounds(instr, ctx, (dst, src), None)
    lanes = Lanes(em, op) if dom == "f32" else None
    acc = em.entry_alloca("i64", "pacc") if dom == "i64" else None
    cols = RowAny(em, instr.mask is not None)
    with em.elements(src.shape, ctx.env, start=1) as env:
        cols.reset()
        if lanes:
            lanes.reset()
        else:
            B.emit(f"store i64 {INT_IDENTITY[op]}, ptr {acc}, align 8")
        with (B.loop(src.shape[0], "pr") if src.shape[0] > 1 else contextlib.nullcontext("0")) as p:
            penv = {**env, axis_var(0): p}
            live = em.mask_value(instr.mask, penv)
            em.check_element(slow, live, ctx, penv, (src,))
            with (B.if_(live, "prl") if live is not None else contextlib.nullcontext()):
                cols.mark()
                x = em.operand(src, penv, dom)
                if lanes:
                    lanes.add(p, x)
                else:
                    old = B.op(f"load i64, ptr {acc}, align 8")
                    B.emit(f"store i64 {alu_op(em, op, old, x, 'i64')}, ptr {acc}, align 8")
        denv = {**env, axis_var(0): "0"}
        with cols.guard():
            if lanes:
                em.store_raw(dst, denv, em.from_f32(em.canon(lanes.combine()), em.dtype(dst)))
            else:
                em.store_raw(dst, denv, em.from_i64(B.op(f"load i64, ptr {acc}, align 8"), em.dtype(dst)))


def _id(em, src, i, env):
    """(segment id at flat free index i, its domain)."""
    dom = "i64" if D.INFO[em.dtype(src)].is_int else "f32"
    return em.operand(src, _unflatten(em, i, src.shape, 1, {**env, axis_var(0): "0"}), dom), dom


def _eq(em, a, b_, dom):
    return em.b.op(f"icmp eq i64 {a}, {b_}" if dom == "i64" else f"fcmp oeq float {a}, {b_}")


def _is_pad(em, x, dom):
    return em.b.op(f"icmp eq i64 {x}, 0" if dom == "i64" else f"fcmp oeq float {x}, 0.0")


@rule("llvm", "sequence_bounds")
def _sequence_bounds(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    em.check_bounds(instr, ctx, (dst, src), None)
    n = dst.shape[2]
    dt = em.dtype(dst)
    dom = "i64" if D.INFO[em.dtype(src)].is_int else "f32"
    ty = "i64" if dom == "i64" else "float"
    prev_b = em.entry_alloca("i64", "sbb")
    prev_id = em.entry_alloca(ty, "sbi")
    for col, pad in enumerate((str(n), "-1")):
        with B.loop(n, "sb") as t:
            i = t if col == 0 else B.op(f"sub nsw i64 {n - 1}, {t}")
            x, _ = _id(em, src, i, ctx.env)
            first = B.op(f"icmp eq i64 {t}, 0")
            same = B.op(f"and i1 {B.op(f'xor i1 {first}, true')}, "
                        f"{_eq(em, x, B.op(f'load {ty}, ptr {prev_id}, align 8'), dom)}")
            own = i if col == 0 else B.op(f"add nsw i64 {i}, 1")
            b_ = B.op(f"select i1 {same}, i64 {B.op(f'load i64, ptr {prev_b}, align 8')}, i64 {own}")
            b_ = B.op(f"select i1 {_is_pad(em, x, dom)}, i64 {pad}, i64 {b_}")
            B.emit(f"store i64 {b_}, ptr {prev_b}, align 8")
            B.emit(f"store {ty} {x}, ptr {prev_id}, align 8")
            em.store_raw(dst, {**ctx.env, axis_var(0): "0", axis_var(1): str(col), axis_var(2): i},
                         em.from_i64(b_, dt))


@rule("llvm", "nonzero_with_count")
def _nonzero_with_count(em, instr, ctx):
    B = em.b
    dst, src = instr.out, instr.ins[0]
    em.check_bounds(instr, ctx, (dst, src), None)
    rows, t = src.shape
    dom = "i64" if D.INFO[em.dtype(src)].is_int else "f32"
    off, pad, dt = instr.attr("index_offset"), instr.attr("padding_val"), em.dtype(dst)
    cnt = em.entry_alloca("i64", "nzc")
    with (B.loop(rows, "nzr") if rows > 1 else contextlib.nullcontext("0")) as r:
        env = {**ctx.env, axis_var(0): r}
        with B.loop(t + 1, "nzp") as j:
            em.store_raw(dst, {**env, axis_var(1): j}, em.from_i64(str(pad), dt))
        B.emit(f"store i64 0, ptr {cnt}, align 8")
        with B.loop(t, "nzs") as i:
            x = em.operand(src, {**env, axis_var(1): i}, dom)
            # une: NaN counts as nonzero, -0.0 does not (the interpreter's x != 0)
            nz = B.op(f"icmp ne i64 {x}, 0" if dom == "i64" else f"fcmp une float {x}, 0.0")
            c = B.op(f"load i64, ptr {cnt}, align 8")
            v = B.op(f"select i1 {nz}, i64 {B.op(f'add i64 {i}, {off}')}, i64 {pad}")
            em.store_raw(dst, {**env, axis_var(1): c}, em.from_i64(v, dt))
            one = B.op(f"zext i1 {nz} to i64")
            B.emit(f"store i64 {B.op(f'add i64 {c}, {one}')}, ptr {cnt}, align 8")
        em.store_raw(dst, {**env, axis_var(1): str(t)}, em.from_i64(B.op(f"load i64, ptr {cnt}, align 8"), dt))

