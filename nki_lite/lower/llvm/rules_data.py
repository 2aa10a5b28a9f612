"""llvm rules for data movement and fills: alloc, dma_copy, dma_compute, tensor_copy, transpose, memset, iota,
copy_predicated, device_print, bitcast (mirrors runtime/interpret_*.py)."""
from __future__ import annotations

import numpy as np

from ...core import dtypes as D
from ...numerics.convert import round_to
from ...core.bits import UNINIT_SENTINEL
from ...core import ir
from ...core.affine import axis_var
from ...core.ops import rule
from .rules_common import alu_op, elementwise
from .transpose_block import emit as blocked, transposed


def _const_bits(value: np.ndarray, dtype: str) -> str:
    """LLVM constant of a storage value (as stored bits)."""
    arr = np.asarray(value).reshape(1)
    ty = D.storage(dtype)
    if dtype in ("float32", "tfloat32"):
        from .irbuilder import f32_bits
        return f32_bits(int(arr.astype(np.float32).view(np.uint32)[0]))
    bits = arr.astype(ty).view(np.dtype(f"u{ty.itemsize}"))[0]
    width = ty.itemsize * 8
    v = int(bits)
    return str(v - (1 << width) if v >= 1 << (width - 1) else v)


def uninit_bits(dtype: str) -> str:
    info = D.INFO[dtype]
    if info.kind == "f":
        return _const_bits(round_to(np.array([np.nan], np.float32), dtype), dtype)
    if info.kind == "b":
        return "1"
    return _const_bits(np.array([UNINIT_SENTINEL[dtype]]).astype(info.storage), dtype)


@rule("llvm", "alloc")
def _alloc(em, instr, ctx):
    if not em.debug:
        return
    buf = em.bufs[instr.out.buffer]
    ty = em.storage(buf.name)
    val = uninit_bits(buf.dtype)
    base, n = em.base_ptr(buf.name), em.stored_elements(buf.name)
    if buf.name in em.placed:        # held in its store's destination row (row_private.py): fill that row
        base = em.elem_ptr(ir.Access.full(buf), {**ctx.env, **{axis_var(k): "0" for k in range(len(buf.shape))},
                                                 axis_var(0): em.row})
        n = buf.size // buf.shape[0]
    # one shared fill function per storage type: a kernel with thousands of tiles would otherwise
    # give LLVM thousands of fill loops to optimise
    fn = em.use(_fill_function(ty, D.itemsize(buf.dtype)))
    em.b.emit(f"call void @{fn}(ptr {base}, i64 {n}, {ty} {val})")


def _fill_function(ty: str, align: int) -> tuple[str, str]:
    name = f"nkl_fill_{ty}"
    return name, "\n".join([
        f"define internal void @{name}(ptr %p, i64 %n, {ty} %v) noinline {{", "entry:", "  br label %h", "h:",
        "  %i = phi i64 [ 0, %entry ], [ %i1, %b ]", "  %c = icmp slt i64 %i, %n", "  br i1 %c, label %b, label %x",
        "b:", f"  %q = getelementptr inbounds {ty}, ptr %p, i64 %i", f"  store {ty} %v, ptr %q, align {align}",
        "  %i1 = add nsw i64 %i, 1", "  br label %h", "x:", "  ret void", "}"])


def _move(em, instr, ctx, src: ir.Access):
    dst = instr.out
    sdt, ddt = em.dtype(src), em.dtype(dst)
    elementwise(em, instr, ctx, (src,), lambda env: em.convert_raw(em.load_raw(src, env), sdt, ddt))


@rule("llvm", "dma_copy")
def _dma(em, instr, ctx):
    if instr.attr("forwarded"):          # readers address the source directly (pass forward-loads, lower/passes/forward_loads.py)
        em.check_bounds(instr, ctx, (instr.out, instr.ins[0]), None)
        return
    _move(em, instr, ctx, instr.ins[0])


@rule("llvm", "dma_compute")
def _dma_compute(em, instr, ctx):
    """The interpreter's sum step for step: fp32 adds in source order, one cast to dst's dtype."""
    dst = instr.out

    def value(env):
        acc = em.operand(instr.ins[0], env, "f32")
        for src in instr.ins[1:]:
            acc = alu_op(em, "add", acc, em.operand(src, env, "f32"), "f32", 32)
        return em.from_f32(em.canon(acc), em.dtype(dst))
    elementwise(em, instr, ctx, instr.ins, value)


@rule("llvm", "tensor_copy")
def _copy(em, instr, ctx):
    _move(em, instr, ctx, instr.ins[0])


@rule("llvm", "transpose")
def _transpose(em, instr, ctx):
    if not blocked(em, instr, ctx):                   # 16 x 16 register blocks when eligible
        _move(em, instr, ctx, transposed(instr.ins[0]))


@rule("llvm", "memset")
def _memset(em, instr, ctx):
    imm = instr.ins[0]
    dt = em.dtype(instr.out)
    src = np.array([imm.value], dtype=np.int64 if D.INFO[imm.dtype].is_int else np.float32)
    val = _const_bits(round_to(src, dt), dt)
    elementwise(em, instr, ctx, (), lambda env: val)


@rule("llvm", "iota")
def _iota(em, instr, ctx):
    dt = em.dtype(instr.out)
    expr = instr.attr("expr")
    elementwise(em, instr, ctx, (), lambda env: em.from_i64(em.affine(expr, env), dt))


@rule("llvm", "copy_predicated")
def _copy_predicated(em, instr, ctx):
    src, pred, old = instr.ins
    dst = instr.out
    ddt = em.dtype(dst)
    B = em.b

    def value(env):
        pv = em.operand(pred, env, "f32")
        c = B.op(f"fcmp une float {pv}, 0.0")
        if instr.attr("reverse_pred"):
            c = B.op(f"xor i1 {c}, true")
        oldv = em.load_raw(old, env)
        if isinstance(src, ir.Imm):
            arr = np.array([src.value], dtype=np.int64 if isinstance(src.value, int) else np.float32)
            new = _const_bits(round_to(arr, ddt), ddt)
        else:
            raw = em.load_raw(src, env)
            new = raw if em.dtype(src) == ddt else em.from_f32(em.to_f32(raw, em.dtype(src)), ddt)
        return B.op(f"select i1 {c}, {em.storage(dst.buffer)} {new}, {em.storage(dst.buffer)} {oldv}")
    elementwise(em, instr, ctx, (src, pred, old), value)


@rule("llvm", "device_print")
def _device_print(em, instr, ctx):
    """Copy the tile (masked-off elements as 0) to scratch and call back into Python."""
    src = instr.ins[0]
    B = em.b
    site = em.site(instr, ctx)
    em.check_bounds(instr, ctx, (src,), None)
    ty = em.storage(src.buffer)
    item = D.itemsize(em.dtype(src))
    from .rules_common import flat_axes
    flat = flat_axes(src.shape, 0, None)
    with em.elements(src.shape, ctx.env) as env:
        live = em.mask_value(instr.mask, env)
        q = B.op(f"getelementptr inbounds {ty}, ptr {em.scratch_ptr()}, i64 {em.affine(flat, env)}")
        if live is None:
            B.emit(f"store {ty} {em.load_raw(src, env)}, ptr {q}, align {item}")
        else:
            B.emit(f"store {ty} {'0.0' if ty == 'float' else '0'}, ptr {q}, align {item}")
            with B.if_(live, "pm"):
                B.emit(f"store {ty} {em.load_raw(src, env)}, ptr {q}, align {item}")
    for k, name in enumerate(ctx.names[:24]):
        p = B.op(f"getelementptr inbounds i64, ptr %status, i64 {6 + k}")
        B.emit(f"store i64 {ctx.env[name]}, ptr {p}, align 8")
    B.emit(f"call void %print_cb(i64 {site}, ptr {em.scratch_ptr()})")
    em.mod.needs_print = True


@rule("llvm", "bitcast")
def _bitcast(em, instr, ctx):
    """Per partition, a memcpy of the row's bytes (both tiles are dense row-major: mirrors interpret_data.py)."""
    src, dst = instr.ins[0], instr.out
    em.check_bounds(instr, ctx, (dst, src), None)
    nbytes = D.itemsize(em.dtype(src))
    for s in src.shape[1:]:
        nbytes *= s
    em.declare("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
    A = [axis_var(k) for k in range(max(len(src.shape), len(dst.shape)))]
    with em.context(W=1):
        with em.b.loop(src.shape[0], "bc") as p:
            ps = em.elem_ptr(src, {**ctx.env, **{a: "0" for a in A}, A[0]: p})
            pd = em.elem_ptr(dst, {**ctx.env, **{a: "0" for a in A}, A[0]: p})
            em.b.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {pd}, ptr {ps}, i64 {nbytes}, i1 false)")
