"""Verifier rules 3 and 4: Tensor Engine matmul shapes and dtypes, PSUM bank fit of matmul outputs.

Rule 3 (matmul_shape, dtype): nc_matmul computes out[M, N] = stationary[K, M]^T @ moving[K, N] with
K <= matmul_kmax on both sides and equal, M <= matmul_stationary_fmax, N <= matmul_moving_fmax and the
output exactly [M, N]. Input dtypes: fp32/tfloat32 only with fp32/tfloat32; float8_e4m3 and
float8_e4m3fn never mixed; float8_e4m3fn only where the target has it; output fp32 (bf16 too from
NeuronCore-v4).
Rule 4 (psum_bank): where the target requires it, a matmul output holds at most one 2 KiB bank per
partition and does not cross a bank boundary. PSUM tiles start on a bank boundary (the allocator
rounds PSUM tiles up to whole banks, see rule 5), so the byte offsets of the output within its buffer
decide.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..core.affine import Affine, is_axis_var
from ..core.ir import Space
from .analysis.program import Site
from .analysis.ranges import prod
from .verify_common import Ctx, fmt_shape, itemsize, render

MATMUL_DTYPES = ("float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
_FP32 = ("float32", "tfloat32")
_PAIRS_LIMIT = 1 << 20


def _describe(ctx: Ctx, instr) -> str:
    s, m = instr.ins[0], instr.ins[1]
    o = instr.outs[0]
    sd, md, od = (ctx.buf(a.buffer).dtype for a in (s, m, o))
    return (f"stationary '{s.buffer}' {fmt_shape(s.shape)} {sd}, moving '{m.buffer}' {fmt_shape(m.shape)} {md}, "
            f"output '{o.buffer}' {fmt_shape(o.shape)} {od}")


def check_matmul(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    if instr.op != "nc_matmul" or len(instr.ins) < 2 or not instr.outs:
        return
    t = ctx.target
    s, m, o = instr.ins[0], instr.ins[1], instr.outs[0]
    roles = _describe(ctx, instr)

    def shape_err(msg, hint):
        return errors.make("matmul_shape", f"nc_matmul: {msg} ({roles})", loc=instr.loc, hint=hint)

    if len(s.shape) != 2 or len(m.shape) != 2:
        raise shape_err("stationary and moving must be 2-D tiles [K, M] and [K, N]",
                        "index the operands down to 2-D tiles")
    K, M = s.shape
    K2, N = m.shape
    if K != K2:
        raise shape_err(f"contraction (partition) sizes differ: stationary K={K}, moving K={K2}",
                        "both operands must have the contraction dimension K on their partition axis")
    if K > t.matmul_kmax:
        raise shape_err(f"contraction size K={K} exceeds {t.matmul_kmax} (the partition count)",
                        f"split K into chunks of {t.matmul_kmax} and accumulate: "
                        f"psum[...] += nisa.nc_matmul(s[k*{t.matmul_kmax}:(k+1)*{t.matmul_kmax}, :], ...)")
    if M > t.matmul_stationary_fmax:
        raise shape_err(f"stationary free size M={M} exceeds {t.matmul_stationary_fmax}",
                        f"split M into tiles of {t.matmul_stationary_fmax} columns")
    if N > t.matmul_moving_fmax:
        raise shape_err(f"moving free size N={N} exceeds {t.matmul_moving_fmax} on {t.name}",
                        f"split N into tiles of {t.matmul_moving_fmax} columns (one PSUM output each)")
    if tuple(o.shape) != (M, N):
        raise shape_err(f"the output tile is {fmt_shape(o.shape)} but stationary^T @ moving is [{M}, {N}]",
                        f"write the result into a PSUM tile of shape ({M}, {N})")

    sd, md, od = (ctx.buf(a.buffer).dtype for a in (s, m, o))
    allowed = ", ".join(MATMUL_DTYPES)
    for role, dt in (("stationary", sd), ("moving", md)):
        if dt not in MATMUL_DTYPES:
            raise errors.make("dtype", f"nc_matmul {role} dtype {dt} is not a Tensor Engine input dtype "
                              f"(allowed: {allowed}) ({roles})", loc=instr.loc,
                              hint=f"cast the {role} operand with nl.copy(x, dtype=nl.bfloat16) first")
    if (sd in _FP32) != (md in _FP32):
        raise errors.make("dtype", f"nc_matmul mixes {sd} and {md}: if one operand is float32/tfloat32 the other "
                          f"must be too ({roles})", loc=instr.loc,
                          hint="cast both operands to the same family (both float32, or both bfloat16)")
    if {sd, md} == {"float8_e4m3", "float8_e4m3fn"}:
        raise errors.make("dtype", f"nc_matmul mixes float8_e4m3 and float8_e4m3fn ({roles})", loc=instr.loc,
                          hint="use one fp8 format for both operands (float8_e4m3 and float8_e5m2 may mix)")
    if "float8_e4m3fn" in (sd, md) and not t.fp8_e4m3fn_matmul:
        raise errors.make("dtype", f"nc_matmul input float8_e4m3fn is not supported by the Tensor Engine of "
                          f"{t.name} (NeuronCore-v{t.nc_version}); it needs trn3 ({roles})", loc=instr.loc,
                          hint="use nl.float8_e4m3 or nl.float8_e5m2 on this target")
    out_ok = ("float32", "bfloat16") if t.nc_version >= 4 else ("float32",)
    if instr.attr("is_transpose") and t.nc_version >= 3 and sd == md:
        # transpose mode (is_transpose=True, identity moving) is bit-accurate from NeuronCore-v3 on: the
        # PSUM tile may hold the input dtype (the library's bwmm block transposes into bf16 PSUM on gen3)
        out_ok = tuple(dict.fromkeys(out_ok + (sd,)))
    if od not in out_ok:
        raise errors.make("dtype", f"nc_matmul output (PSUM accumulator) dtype {od} is not allowed on {t.name}; "
                          f"allowed: {', '.join(out_ok)} ({roles})", loc=instr.loc,
                          hint="declare the PSUM accumulator with dtype=nl.float32 and cast when copying it to "
                               "SBUF")


def check_psum_bank(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    t = ctx.target
    if instr.op != "nc_matmul" or not t.psum_tile_in_one_bank or not instr.outs or not site.executes:
        return
    o = instr.outs[0]
    buf = ctx.buf(o.buffer)
    if buf.space != Space.PSUM:
        return
    isz = itemsize(buf.dtype)
    bank = t.psum_bank_bytes
    free_dims = [d for d in range(len(buf.shape)) if d != buf.par_axis]
    strides: dict[int, int] = {}
    acc = 1
    for d in reversed(free_dims):
        strides[d] = acc
        acc *= buf.shape[d]
    off = Affine(0)
    for d in free_dims:
        off = off + o.index[d].scale(strides[d])
    axis_part = Affine.make(0, {v: c for v, c in off.terms if is_axis_var(v)})
    rest = Affine.make(off.const, {v: c for v, c in off.terms if not is_axis_var(v)})
    count = prod(o.shape[1:]) if len(o.shape) > 1 else 1
    name = f"'{buf.name}' ({buf.space.value}{fmt_shape(buf.shape)} {buf.dtype})"
    if count * isz > bank:
        raise errors.make(
            "psum_bank",
            f"nc_matmul output {name} takes {count * isz} bytes per partition ({count} x {isz} B); a PSUM "
            f"bank holds {bank} bytes per partition and a matmul output must fit in one bank on {t.name}",
            loc=instr.loc,
            hint=f"split N so that each output holds at most {bank // isz} {buf.dtype} elements per partition")
    ext = ctx.extents(site.loops)
    for a, n in enumerate(o.shape):
        ext[f"@{a}"] = n
    alo, ahi = axis_part.bounds(ext)
    rvars = sorted(rest.vars())
    if prod(ext[v] for v in rvars) > _PAIRS_LIMIT:
        return
    if rvars:
        grid = np.indices([ext[v] for v in rvars], dtype=np.int64).reshape(len(rvars), -1)
        r = np.full(grid.shape[1], rest.const, dtype=np.int64)
        for i, v in enumerate(rvars):
            r += rest.coeff(v) * grid[i]
    else:
        grid = np.zeros((0, 1), dtype=np.int64)
        r = np.array([rest.const], dtype=np.int64)
    first = (r + alo) * isz
    last = (r + ahi + 1) * isz - 1
    bad = np.nonzero(np.floor_divide(first, bank) != np.floor_divide(last, bank))[0]
    if bad.size == 0:
        return
    i = int(bad[0])
    when = ", ".join(f"{ctx.var_label(v)}={ctx.user_value(v, int(grid[j, i]))}" for j, v in enumerate(rvars))
    b0, b1 = int(first[i]) // bank, int(last[i]) // bank
    elems_per_bank = bank // isz
    view = ", ".join(render(ctx, e, o.shape)[0] for e in o.index)
    raise errors.make(
        "psum_bank",
        f"nc_matmul output {buf.name}[{view}] covers bytes [{int(first[i])}, {int(last[i])}] of each partition"
        + (f" (when {when})" if when else "")
        + f", crossing from PSUM bank {b0} into bank {b1} ({bank} bytes per bank); on {t.name} a matmul output "
          f"must stay within one bank",
        loc=instr.loc,
        hint=f"start each matmul output at a multiple of {elems_per_bank} {buf.dtype} elements of the free "
             f"dimension (e.g. {buf.name}[:, j * {elems_per_bank}:(j + 1) * {elems_per_bank}])")
