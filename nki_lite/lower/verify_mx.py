"""Verifier rule 12 (mx_dtype, NL-E120): MX container dtypes (kind 'x': the x4 dtypes, float8_e8m0fnu) hold
raw codes, not values, so only bit-exact movement and the MX instructions may touch them.

Contract: an instruction with an access of a kind-'x' dtype is allowed when it is quantize_mx or nc_matmul_mx
(lang/isa_mx.py checks their dtypes at the call), an alloc, a bitcast (an on-chip `.ap(dtype=)` view's bytes), a dma_copy / tensor_copy / sendrecv whose source
and destination have the same dtype (a bit copy), or a memset of an x4 tile to 0 (all codes +0). Anything else
(arithmetic, a converting copy, a memset of another value) is NL-E120 at the instruction's line.
"""
from __future__ import annotations

from .. import errors
from ..core import dtypes as D
from ..core.ir import Access, Imm
from .analysis.accesses import accesses

MX_OPS = ("quantize_mx", "nc_matmul_mx", "alloc", "bitcast")   # bitcast: a byte copy (views_bitcast)
COPIES = ("dma_copy", "tensor_copy", "sendrecv")   # sendrecv: a bit copy to the other core


def check_mx_dtypes(ctx, site) -> None:
    instr = site.instr
    if instr.op in MX_OPS:
        return
    dts = [ctx.buf(a.buffer).dtype for _, _, a in accesses(instr)]
    packed = [d for d in dts if D.is_packed(d)]
    if not packed:
        return
    if instr.op in COPIES and len(set(dts)) == 1:
        return
    imm = [o for o in instr.ins if isinstance(o, Imm)]
    if instr.op == "memset" and packed[0] in D.MX_X4 and all(float(o.value) == 0.0 for o in imm):
        return
    what = (f"copies {dts[1] if len(dts) > 1 else '?'} to {dts[0]}" if instr.op in COPIES else
            f"'{instr.op}' computes on {packed[0]}")
    raise errors.make("mx_dtype", f"{what}: MX dtypes hold packed codes, not values; only bit copies between "
                      "tensors of the same MX dtype, nisa.quantize_mx and nisa.nc_matmul_mx use them", loc=instr.loc,
                      hint="quantize with nisa.quantize_mx and multiply with nisa.nc_matmul_mx; move packed data with "
                           "dma_copy / tensor_copy between tensors of the same dtype (scales: use nl.uint8 tiles "
                           "for anything else)")
