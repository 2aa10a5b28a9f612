"""The vectorised 2-D `transpose` (rules_data.py's fast path): 16 x 16 blocks transposed in registers.

Contract: `emit(em, instr, ctx) -> bool`. When it returns True it has emitted exactly the data movement
of the generic rule (dst[i, j] = src[j, i], storage bits copied unchanged) for an instruction that
  - has no mask, reads and writes different buffers, and converts nothing (equal dtypes);
  - is 2-D with both tiles contiguous along their free axis (the source in its own layout);
  - is not inside a row-major body, a fused run or a row-private placement (those address one row
    at a time, which a block of 16 rows cannot honour);
and is emitted with vectors enabled. Otherwise it emits nothing and returns False (the generic
elementwise rule runs). Bounds are checked at entry as the generic rule does (no mask: a failure
stops there), so the block order of the stores is never observable.

Method: 16 rows of the source (16 contiguous elements each) are loaded, transposed by four rounds of
two-input shuffles (round s swaps the elements (r, c) and (r ^ s, c ^ s) with bit s of r clear and of
c set, for s = 1, 2, 4, 8; after all four every (r, c) sits at (c, r)), and stored as 16 rows of the
destination. The ragged edges (rows or columns beyond a multiple of 16) are scalar loops. The generic
rule reads the source with a stride of a whole row per element (a gather per element), which made
stdlib.matmul's stationary-tile transposes ~5% of its JIT time.
"""
from __future__ import annotations

from ...core import dtypes as D
from ...core import ir
from ...core.affine import Affine, axis_var

W = 16                      # block edge: one zmm of fp32 per row, four shuffle rounds


def transposed(src: ir.Access) -> ir.Access:
    """The source access read in the destination's element order: [R, C] over a [C, R] tile."""
    swap = {axis_var(0): Affine.var(axis_var(1)), axis_var(1): Affine.var(axis_var(0))}
    return ir.Access(src.buffer, tuple(e.subst(swap) for e in src.index), (src.shape[1], src.shape[0]))


def eligible(em, instr: ir.Instr) -> bool:
    if not em.vectorize or instr.mask is not None or len(instr.outs) != 1 or len(instr.ins) != 1:
        return False
    dst, src = instr.outs[0], instr.ins[0]
    if not isinstance(src, ir.Access) or len(dst.shape) != 2 or len(src.shape) != 2:
        return False
    if em.capturing is not None or em.fused is not None or em.row is not None:
        return False
    if dst.buffer in em.placed or src.buffer in em.placed or em.root(dst.buffer) == em.root(src.buffer):
        return False
    if em.dtype(dst) != em.dtype(src) or em.storage(dst.buffer) != em.storage(src.buffer):
        return False
    if em.storage(dst.buffer) == "i1" or min(dst.shape) < W:
        return False
    one = axis_var(1)
    return em.flat_index(dst).coeff(one) == 1 and em.flat_index(src).coeff(one) == 1


def _transpose16(B, rows: list[str], vt: str) -> list[str]:
    """rows[r][c] -> out[c][r] for a 16 x 16 block held as 16 vectors."""
    rows = list(rows)
    for s in (1, 2, 4, 8):
        lo = ", ".join(f"i32 {l if not l & s else W + l - s}" for l in range(W))
        hi = ", ".join(f"i32 {l + s if not l & s else W + l}" for l in range(W))
        for i in range(W):
            if i & s:
                continue
            j = i + s
            a, b = rows[i], rows[j]
            rows[i] = B.op(f"shufflevector {vt} {a}, {vt} {b}, <{W} x i32> <{lo}>")
            rows[j] = B.op(f"shufflevector {vt} {a}, {vt} {b}, <{W} x i32> <{hi}>")
    return rows


def emit(em, instr: ir.Instr, ctx) -> bool:
    if not eligible(em, instr):
        return False
    dst, src = instr.outs[0], instr.ins[0]
    em.check_bounds(instr, ctx, [dst, transposed(src)], None)
    R, C = dst.shape
    B = em.b
    ty = em.storage(dst.buffer)
    vt, align = f"<{W} x {ty}>", D.itemsize(em.dtype(dst))
    a0, a1 = axis_var(0), axis_var(1)
    env = ctx.env
    with B.loop(R // W, "tbr") as bi:
        i0 = B.op(f"mul nsw i64 {bi}, {W}")
        with B.loop(C // W, "tbc") as bj:
            j0 = B.op(f"mul nsw i64 {bj}, {W}")
            rows = []
            for k in range(W):          # source row j0 + k, columns i0 .. i0 + 15
                p = em.elem_ptr(src, {**env, a0: B.op(f"add nsw i64 {j0}, {k}"), a1: i0})
                rows.append(B.op(f"load {vt}, ptr {p}, align {align}"))
            for r, v in enumerate(_transpose16(B, rows, vt)):
                p = em.elem_ptr(dst, {**env, a0: B.op(f"add nsw i64 {i0}, {r}"), a1: j0})
                B.emit(f"store {vt} {v}, ptr {p}, align {align}")
    R16, C16 = R // W * W, C // W * W
    if C16 < C:                          # right edge of the blocked rows
        _scalar(em, src, dst, env, (0, R16), (C16, C))
    if R16 < R:                          # bottom rows, every column
        _scalar(em, src, dst, env, (R16, R), (0, C))
    return True


def _scalar(em, src, dst, env, rows: tuple[int, int], cols: tuple[int, int]) -> None:
    B = em.b
    ty, align = em.storage(dst.buffer), D.itemsize(em.dtype(dst))
    a0, a1 = axis_var(0), axis_var(1)
    if rows[0] >= rows[1] or cols[0] >= cols[1]:
        return
    with B.loop(rows[1] - rows[0], "tsr") as i:
        i = B.op(f"add nsw i64 {i}, {rows[0]}")
        with B.loop(cols[1] - cols[0], "tsc") as j:
            j = B.op(f"add nsw i64 {j}, {cols[0]}")
            v = B.op(f"load {ty}, ptr {em.elem_ptr(src, {**env, a0: j, a1: i})}, align {align}")
            B.emit(f"store {ty} {v}, ptr {em.elem_ptr(dst, {**env, a0: i, a1: j})}, align {align}")
