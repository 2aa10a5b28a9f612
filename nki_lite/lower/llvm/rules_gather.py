"""llvm rule for local_gather (mirrors runtime/interpret_gather.py, the definition).

Per output element (p, f): k = f // n, e = f % n; the index element is partition 16*(p // 16) + k % 16,
free position k // 16 of the index tile; the source element is src partition p at flat free offset
index + e. An offset past the end of the partition fails with the interpreter's NL-E501 report
(src's dimension 1, the offending coordinate). Scalar code: the addresses are data-dependent.
"""
from __future__ import annotations

import numpy as np

from ...core.affine import axis_var
from ...core.ops import rule
from .rules_common import elementwise, flat_axes
from .rules_reduce import _unflatten

CORE = 16


@rule("llvm", "local_gather")
def _local_gather(em, instr, ctx):
    B = em.b
    src, idx = instr.ins
    dst = instr.out
    n = instr.attr("num_elem_per_idx")
    free = int(np.prod(src.shape[1:]))
    inner = int(np.prod(src.shape[2:])) if len(src.shape) > 2 else 1
    flat_out = flat_axes(dst.shape, 1, None)
    site = em.site(instr, ctx)
    ity = em.storage(idx.buffer)

    def value(env):
        p = env[axis_var(0)]
        f = em.affine(flat_out, env)
        k, e = B.op(f"udiv i64 {f}, {n}"), B.op(f"urem i64 {f}, {n}")
        core = B.op(f"mul i64 {B.op(f'udiv i64 {p}, {CORE}')}, {CORE}")
        ip = B.op(f"add i64 {core}, {B.op(f'urem i64 {k}, {CORE}')}")
        ienv = _unflatten(em, B.op(f"udiv i64 {k}, {CORE}"), idx.shape, 1, {**env, axis_var(0): ip})
        raw = em.load_raw(idx, ienv)
        g = B.op(f"add i64 {B.op(f'zext {ity} {raw} to i64')}, {e}")
        with B.if_(B.op(f"icmp uge i64 {g}, {free}"), "goob"):
            coord = B.op(f"udiv i64 {g}, {inner}")
            em.fail(site, ctx, 1, 1, coord, coord)
        return em.load_raw(src, _unflatten(em, g, src.shape, 1, {**env, axis_var(0): p}))
    elementwise(em, instr, ctx, (src, idx), value)
