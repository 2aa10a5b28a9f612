"""nisa.dma_compute: a DMA that combines its sources while copying (the current dialect's instruction).

Contract (the reference, aws-neuron-sdk nki/api nki.isa.dma_compute): `dst = srcs[0] * scales[0] +
srcs[1] * scales[1] + ...` computed by the DMA engines in fp32 (each source converted to fp32 first,
the result cast to dst's dtype once). Only `reduce_op=nl.add` and scales that are all 1.0 (or None)
are supported on the hardware, so anything else is NL-E116, as are fewer than 1 or more than 16
sources, and a tensor outside HBM / SBUF. Every source must have dst's shape (NL-E103; the dialect
layer reshapes whole HBM tensors first, as for dma_copy). The sum runs in source order, each step
rounded to fp32 (docs/numerics.md, "dma_compute"). The read-modify-write forms (a source with a
vector_offset / `.indirect` view) are not built: NL-E916.

`emit_dma_compute` emits one IR instruction `dma_compute` (outs: dst; ins: the sources in order).
"""
from __future__ import annotations

from .. import errors
from ..core import ir
from ..loc import capture_loc
from .opnames import alu_name
from .ops_indirect import is_indirect
from .tile import Tile
from .tracer import attrs, current

MAX_SOURCES = 16


def _bad(msg: str, loc):
    return errors.make("dma_compute", f"nisa.dma_compute: {msg}", loc=loc)


def _check_args(dst, srcs, reduce_op, scales, unique_indices, loc) -> list:
    if not isinstance(srcs, (list, tuple)):
        raise _bad(f"srcs must be a list of tensors, got {type(srcs).__name__}", loc)
    srcs = list(srcs)
    if not 1 <= len(srcs) <= MAX_SOURCES:
        raise _bad(f"takes 1 to {MAX_SOURCES} source tensors, got {len(srcs)}", loc)
    for k, t in enumerate([dst] + srcs):
        if is_indirect(t):
            raise errors.make("nki_argument_not_built", "nisa.dma_compute: the read-modify-write form (an "
                              "indirect / vector_offset operand) is not built in nki_lite yet", loc=loc)
        if not isinstance(t, Tile):
            what = "dst" if k == 0 else f"srcs[{k - 1}]"
            raise _bad(f"{what} must be a tensor or tile of the kernel, got {type(t).__name__}", loc)
        if t.space not in (ir.Space.HBM, ir.Space.SBUF):
            what = "dst" if k == 0 else f"srcs[{k - 1}]"
            raise _bad(f"{what} is in {t.space.value}; the DMA engines read and write HBM or SBUF only", loc)
    name = alu_name(reduce_op, loc) if reduce_op is not None else None
    if name != "add":
        raise _bad(f"reduce_op must be nl.add (the only reduction the DMA engines support), got {reduce_op!r}", loc)
    if scales is not None:
        scales = list(scales)
        if len(scales) != len(srcs):
            raise _bad(f"{len(scales)} scales for {len(srcs)} sources", loc)
        if any(float(s) != 1.0 for s in scales):
            raise _bad(f"scales must all be 1.0 (or None), got {scales}", loc)
    if unique_indices is not True:
        raise _bad("unique_indices must be True", loc)
    return srcs


def emit_dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True) -> None:
    loc = capture_loc()
    srcs = _check_args(dst, srcs, reduce_op, scales, unique_indices, loc)
    for k, s in enumerate(srcs):
        if tuple(s.shape) != tuple(dst.shape):
            raise errors.make("shape_mismatch", f"nisa.dma_compute: srcs[{k}] shape {tuple(s.shape)} differs from "
                              f"dst shape {tuple(dst.shape)}", loc=loc,
                              hint="every source needs dst's element count (and, for views, dst's shape)")
    current().emit(ir.Instr("dma_compute", (dst.access,), tuple(s.access for s in srcs), attrs(engine="dma"),
                            None, loc))
