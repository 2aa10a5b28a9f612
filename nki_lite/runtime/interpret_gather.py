"""Interpreter rule for local_gather (the definition; lang/isa_gather.py states the semantics).

Output partition p (core c = p // 16) holds, for k < num_valid and e < n, element
indices_1d[k] + e of src partition p's flattened free axes, where indices_1d is core c's
16-partition slice of the index tile flattened partition-first. An offset past the end of the
partition is NL-E501, reported as the JIT reports it (lower/llvm/rules_gather.py): src's dimension 1
with the offending coordinate. Data movement: bits are copied unchanged.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..core.ops import rule

CORE = 16


def gather_offsets(index: np.ndarray, valid: int, n: int) -> np.ndarray:
    """[P, valid * n] flat source offsets per output element (index: [P, F] int64)."""
    P = index.shape[0]
    out = np.empty((P, valid * n), dtype=np.int64)
    for c in range(P // CORE):
        flat = index[c * CORE:(c + 1) * CORE].T.reshape(-1)[:valid]     # partition-first
        out[c * CORE:(c + 1) * CORE] = (flat[:, None] + np.arange(n)[None, :]).reshape(-1)
    return out


@rule("interpret", "local_gather")
def _local_gather(m, instr, env):
    src_acc, idx_acc = instr.ins
    dst = instr.out
    src = m.read(src_acc, env, instr)
    P = src.shape[0]
    flat_src = src.reshape(P, -1)
    index = m.read(idx_acc, env, instr).reshape(P, -1).astype(np.int64)
    offs = gather_offsets(index, instr.attr("num_valid"), instr.attr("num_elem_per_idx"))
    mask = m.eval_mask(instr, env, dst.shape)
    live = offs if mask is None else offs[np.asarray(mask).reshape(P, -1)]
    if live.size and live.max() >= flat_src.shape[1]:
        inner = int(np.prod(src.shape[2:])) if len(src.shape) > 2 else 1
        coord = int(live.max()) // inner
        buf = m.buffers[src_acc.buffer]
        where = ", ".join(f"{k}={val}" for k, val in sorted(env.items()))
        raise errors.make("out_of_bounds",
                          f"access to '{buf.name}' (shape {buf.shape}) on dimension 1: index range "
                          f"[{coord}, {coord}] exceeds [0, {buf.shape[1] - 1}]" + (f" when {where}" if where else ""),
                          loc=instr.loc, hint="local_gather reads src_buffer at the offsets in index: keep them "
                          "below the per-partition element count")
    vals = np.take_along_axis(flat_src, np.minimum(offs, flat_src.shape[1] - 1), axis=1)
    m.write(dst, env, vals.reshape(dst.shape), instr, mask)
