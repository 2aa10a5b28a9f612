"""`.ap(dtype=...)` of an on-chip tensor as another dtype (any element size): the NKI Library's
`fp32_tile.ap(pattern, dtype=nl.bfloat16)` (mxfp_load: an fp32 transpose result read as bf16 pairs), and
likewise `bf16.ap(dtype=fp32)`, `uint8.ap(dtype=<x4>)`.

Contract:
- `dtype_view(t, dt)` returns (snapshot tile, the view's start offset in `dt` elements of it). The
  snapshot is a fresh tile of the root's partitions and the same bytes per partition, dtype `dt`
  ([P, free bytes / itemsize(dt)]). It is never written by the kernel: before every instruction that
  reads it, the tracer (lang/tracer.py `emit`) emits an IR `bitcast` instruction copying the root's
  current bytes into it, so a read sees exactly the bytes the hardware's reinterpreting view would (the
  root written earlier, in a loop, by another view: always the bytes at that point of the program).
  The IR stays one op per instruction: verification, dependences and both backends see an ordinary
  copy, which the engine model charges nothing (the hardware has no such instruction: it is a view).
- Writing through such a view (the snapshot as an instruction's output) is NL-E904 at that line: the
  bytes would have to go back into the root, which is not built.
- The bytes per partition must hold a whole number of `dt` elements and the view must start at a
  whole `dt` element (NL-E904 otherwise); views of a tile whose partition dimension is not dim 0 are
  not built (lang/views.py `_linear`).
"""
from __future__ import annotations

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..core.affine import Affine, axis_var
from ..loc import capture_loc
from .memory import new_buffer
from .tile import Tile


def _err(msg: str, hint: str) -> errors.NkiLiteError:
    return errors.make("unsupported", msg, loc=capture_loc(), hint=hint)


def dtype_view(t: Tile, dt: str, part: Affine, free: Affine) -> tuple[Tile, Affine]:
    """part, free: the view's partition index and offset in the partition (lang/views.py `_linear`)."""
    tr, buf = t._tracer, t.buf
    at0 = {axis_var(k): 0 for k in range(t.ndim)}
    fsize = 1
    for s in buf.shape[1:]:
        fsize *= s
    a, b = D.INFO[buf.dtype].itemsize, D.INFO[dt].itemsize
    if (fsize * a) % b:
        raise _err(f".ap(dtype={dt}) of a {t.space.value} tensor of {fsize} {buf.dtype} elements per partition: "
                   f"{fsize * a} bytes are not a whole number of {dt} elements",
                   "view a tensor whose partition size is a multiple of the new element size")
    start = part.subst(at0).scale(fsize) + free.subst(at0)
    if not start.is_const or (start.const % fsize * a) % b:
        raise _err(f".ap(dtype={dt}) of a view starting at element `{start}` of a {buf.dtype} tensor: an "
                   f"element-size-changing view of an on-chip tensor must start at a whole {dt} element known "
                   "at trace time", "take the dtype view of the whole tensor and put the offset in its pattern")
    p0, f0 = divmod(start.const, fsize)
    fnew = fsize * a // b
    snap = new_buffer(tr, (buf.shape[0], fnew), dt, buf.space, buf.name + "_as_" + dt, capture_loc())
    tr.bitcast_views[snap.name] = (ir.Access.full(snap), ir.Access.full(buf), capture_loc())
    tr.refresh_views = refresh          # the tracer calls it before each emit (no import of this module there)
    return Tile(tr, ir.Access.full(snap), dt), Affine(p0 * fnew + f0 * a // b)


def refresh(tr, instr: ir.Instr) -> None:
    """Before `instr` is emitted: refresh every bitcast snapshot it reads; NL-E904 if it writes one."""
    for o in instr.outs:
        if o.buffer in tr.bitcast_views:
            raise errors.make("unsupported", f"'{instr.op}' writes through an `.ap(dtype=...)` view of an on-chip "
                              f"tensor of another dtype ('{tr.bitcast_views[o.buffer][1].buffer}'): writing such a "
                              "view is not built (it is read-only in nki_lite)", loc=instr.loc,
                              hint="write the tensor in its own dtype and view it only to read it")
    seen = set()
    for a in instr.ins:
        if isinstance(a, ir.Access) and a.buffer in tr.bitcast_views and a.buffer not in seen:
            seen.add(a.buffer)
            dst, src, loc = tr.bitcast_views[a.buffer]
            tr.stack[-1].nodes.append(ir.Instr("bitcast", (dst,), (src,), (), None, instr.loc or loc))
