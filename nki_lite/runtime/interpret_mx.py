"""Interpreter rules of the MX instructions (quantize_mx, nc_matmul_mx): numerics/mx.py is the definition,
these rules move its inputs and results between the machine's memory and the instruction's accesses
(lang/isa_mx.py: one [4, F] scale access per 32-partition quadrant). Mirrored by lower/llvm/rules_mx.py."""
from __future__ import annotations

import numpy as np

from ..core.ops import rule
from ..numerics import mx as MX
from .interpret_common import F32, finish


def _scales(m, accs, env, instr) -> np.ndarray:
    """The compact [K//8, F] E8M0 codes of a data tile from its quadrant scale accesses."""
    return np.concatenate([m.read(a, env, instr).view(np.uint8).reshape(4, -1) for a in accs], axis=0)


@rule("interpret", "quantize_mx")
def _quantize_mx(m, instr, env):
    dst, quads = instr.outs[0], instr.outs[1:]
    x = m.read(instr.ins[0], env, instr).astype(F32)
    data, scales = MX.quantize(x.reshape(x.shape[0], -1), m.dtype_of(dst))     # free axes read row-major
    m.write(dst, env, data.reshape(dst.shape), instr)
    for j, acc in enumerate(quads):
        m.write(acc, env, scales[4 * j:4 * j + 4].view(m.mem[acc.buffer].dtype).reshape(acc.shape), instr)


@rule("interpret", "nc_matmul_mx")
def _nc_matmul_mx(m, instr, env):
    dst = instr.out
    st, mv = instr.ins[0], instr.ins[1]
    nq = instr.attr("quadrants")
    ss = _scales(m, instr.ins[2:2 + nq], env, instr)
    ms = _scales(m, instr.ins[2 + nq:2 + 2 * nq], env, instr)
    K = st.shape[0]                      # free axes of every operand read row-major
    acc = MX.matmul(m.read(st, env, instr).reshape(K, -1), m.dtype_of(st), m.read(mv, env, instr).reshape(K, -1),
                    m.dtype_of(mv), ss, ms).reshape(dst.shape)
    if instr.attr("accumulate"):
        with np.errstate(all="ignore"):
            acc = (m.read(dst, env, instr).astype(F32) + acc).astype(F32)
    m.write(dst, env, finish(acc, m.dtype_of(dst)), instr)
