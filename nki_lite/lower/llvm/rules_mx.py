"""llvm rules of quantize_mx and nc_matmul_mx (mirror runtime/interpret_mx.py and numerics/mx.py step for step).

Scalar code: the instructions are rare and their operands small, so the rules favour being obviously the
definition over speed. Codes decode through constant tables of exact doubles (numerics/mx.py TABLES and
SCALES, emitted as module constants), so a product a*sa*b*sb is the same exact double as the
interpreter's, and the float64 sum runs in the same (k, q) order; the fp8 rounding of quantize_mx is the
shared fp32 encoder (convert.py), which is ml_dtypes-exact. Quadrants are unrolled in Python: each has its
own scale access (lang/isa_mx.py).
"""
from __future__ import annotations

import math
import struct

from ...core.affine import axis_var
from ...core.ops import rule
from ...numerics import mx as MX
from .rules_reduce import _unflatten

A0, A1 = axis_var(0), axis_var(1)


def _hex(x: float) -> str:
    return "0x" + struct.pack(">d", float(x)).hex().upper()


def _table(em, key: str, values) -> str:
    """A module constant [n x double] of exact values; returns its name."""
    name = f"@nkl_mx_{key}"
    body = ", ".join(f"double {_hex(v)}" for v in values)
    em.declare(f"{name} = private unnamed_addr constant [{len(values)} x double] [{body}]")
    return name


def _free(shape) -> int:
    """Elements per partition (the free axes, read row-major)."""
    return math.prod(shape[1:])


def _lookup(em, table: str, n: int, code_i64: str) -> str:
    B = em.b
    p = B.op(f"getelementptr inbounds [{n} x double], ptr {table}, i64 0, i64 {code_i64}")
    return B.op(f"load double, ptr {p}, align 8")


def _code(em, raw: str, ty: str, bits: int, q: int) -> str:
    """Element q's code of a container value, as i64."""
    B = em.b
    v = B.op(f"lshr {ty} {raw}, {bits * q}") if q else raw
    v = B.op(f"and {ty} {v}, {(1 << bits) - 1}")
    return B.op(f"zext {ty} {v} to i64")


@rule("llvm", "nc_matmul_mx")
def _nc_matmul_mx(em, instr, ctx):
    B = em.b
    dst = instr.out
    st, mv = instr.ins[0], instr.ins[1]
    nq = instr.attr("quadrants")
    sq, mq = instr.ins[2:2 + nq], instr.ins[2 + nq:2 + 2 * nq]
    em.check_bounds(instr, ctx, (dst,) + tuple(instr.ins), None)
    sdt, mdt = em.dtype(st), em.dtype(mv)
    (sn, sbits, _), (mn, mbits, _) = MX.X4[sdt], MX.X4[mdt]
    ts, tm = _table(em, sdt, MX.TABLES[sdt]), _table(em, mdt, MX.TABLES[mdt])
    te = _table(em, "e8m0", [float(v) for v in MX.SCALES])
    sty, mty = em.storage(st.buffer), em.storage(mv.buffer)
    M, N = _free(st.shape), _free(mv.shape)          # free axes read row-major (lang/isa_mx.py)
    env = ctx.env
    with em.context(W=1):
        slot = em.entry_alloca("double", "mxacc")
        with B.loop(M, "xm") as m:
            with B.loop(N, "xn") as n:
                B.emit(f"store double 0.0, ptr {slot}, align 8")
                for j in range(nq):
                    with B.loop(32, "xk") as kl:
                        k = B.op(f"add nsw i64 {kl}, {32 * j}")
                        row = B.op(f"udiv i64 {kl}, 8")
                        sraw = em.load_raw(st, _unflatten(em, m, st.shape, 1, {**env, A0: k}))
                        mraw = em.load_raw(mv, _unflatten(em, n, mv.shape, 1, {**env, A0: k}))
                        s_sc = _lookup(em, te, 256, B.op(f"zext i8 {em.load_raw(sq[j], _unflatten(em, m, sq[j].shape, 1, {**env, A0: row}))} to i64"))
                        m_sc = _lookup(em, te, 256, B.op(f"zext i8 {em.load_raw(mq[j], _unflatten(em, n, mq[j].shape, 1, {**env, A0: row}))} to i64"))
                        for q in range(4):
                            a = B.op(f"fmul double {_lookup(em, ts, 1 << sbits, _code(em, sraw, sty, sbits, q))}, {s_sc}")
                            b = B.op(f"fmul double {_lookup(em, tm, 1 << mbits, _code(em, mraw, mty, mbits, q))}, {m_sc}")
                            prod = B.op(f"fmul double {a}, {b}")
                            old = B.op(f"load double, ptr {slot}, align 8")
                            B.emit(f"store double {B.op(f'fadd double {old}, {prod}')}, ptr {slot}, align 8")
                total = B.op(f"fptrunc double {B.op(f'load double, ptr {slot}, align 8')} to float")
                denv = _unflatten(em, n, dst.shape, 1, {**env, A0: m})
                if instr.attr("accumulate"):
                    old = em.to_f32(em.load_raw(dst, denv), em.dtype(dst))
                    total = B.op(f"fadd float {old}, {total}")
                em.store_raw(dst, denv, em.from_f32(em.canon(total), em.dtype(dst)))


@rule("llvm", "quantize_mx")
def _quantize_mx(em, instr, ctx):
    B = em.b
    src, dst, quads = instr.ins[0], instr.outs[0], instr.outs[1:]
    em.check_bounds(instr, ctx, tuple(instr.outs) + (src,), None)
    name = em.dtype(dst)
    element, _, emax = MX.X4[name]
    sdt = em.dtype(src)
    F4 = _free(dst.shape)
    env = ctx.env
    with em.context(W=1):
        for j, quad in enumerate(quads):
            with B.loop(4, "qg") as r:
                p0 = B.op(f"add nsw i64 {B.op(f'mul nsw i64 {r}, 8')}, {32 * j}")
                with B.loop(F4, "qc") as c:
                    rows = [B.op(f"add nsw i64 {p0}, {i}") for i in range(8)]
                    cols = [B.op(f"add nsw i64 {B.op(f'mul nsw i64 {c}, 4')}, {q}") for q in range(4)]
                    xs, amax = [], "0"
                    for i in range(8):
                        for q in range(4):
                            x = em.to_f32(em.load_raw(src, _unflatten(em, cols[q], src.shape, 1,
                                                                      {**env, A0: rows[i]})), sdt)
                            mag = B.op(f"and i32 {B.op(f'bitcast float {x} to i32')}, 2147483647")
                            amax = mag if amax == "0" else B.op(f"select i1 {B.op(f'icmp ugt i32 {mag}, {amax}')}, "
                                                                f"i32 {mag}, i32 {amax}")
                            xs.append(x)
                    efield = B.op(f"lshr i32 {amax}, 23")
                    bs = B.op(f"sub nsw i32 {efield}, {emax - 1}")
                    bs = B.op(f"select i1 {B.op(f'icmp slt i32 {bs}, 0')}, i32 0, i32 {bs}")
                    nan = B.op(f"icmp eq i32 {efield}, 255")
                    b = B.op(f"select i1 {nan}, i32 {MX.SCALE_NAN}, i32 {bs}")
                    finite_b = B.op(f"select i1 {nan}, i32 254, i32 {bs}")
                    fb = B.op(f"shl i32 {B.op(f'sub i32 254, {finite_b}')}, 23")
                    factor = B.op(f"bitcast i32 {fb} to float")
                    for i in range(8):
                        word = None
                        for q in range(4):
                            code = em.from_f32(B.op(f"fmul float {xs[4 * i + q]}, {factor}"), element)
                            code = B.op(f"select i1 {nan}, i8 {MX.CODE_NAN}, i8 {code}")
                            w = B.op(f"zext i8 {code} to i32")
                            w = B.op(f"shl i32 {w}, {8 * q}") if q else w
                            word = w if word is None else B.op(f"or i32 {word}, {w}")
                        em.store_raw(dst, _unflatten(em, c, dst.shape, 1, {**env, A0: rows[i]}), word)
                    em.store_raw(quad, _unflatten(em, c, quad.shape, 1, {**env, A0: r}), B.op(f"trunc i32 {b} to i8"))
