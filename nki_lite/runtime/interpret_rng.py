"""Interpreter rules for the random instructions: rand and dropout (numerics/rng.py's generator).

Definitions (docs/numerics.md, "Random numbers"): the seed operand is read when the instruction
runs (one tile element, or an immediate): an integer wraps to 32 bits, a float seed is its fp32 bit
pattern. u = rng.uniform(seed, draw, stream, row-major element index) in fp32.
- rand: u, rounded once to the output dtype.
- dropout: 0 where u < prob (prob read as fp32), else the data element converted to the output
  dtype as data movement does (same dtype: the same bits).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from ..core.ops import rule
from ..numerics import rng
from ..numerics.convert import round_to
from .interpret_common import F32, convert


def seed_value(m, operand, env, instr) -> int:
    """The 32-bit seed an instruction's seed operand holds now."""
    if isinstance(operand, ir.Imm):
        return rng.seed_of(operand.value, D.INFO[operand.dtype].is_int)
    v = m.read(operand, env, instr).reshape(-1)[0]
    return rng.seed_of(v, D.INFO[m.dtype_of(operand)].is_int)


def uniform_of(m, instr, env, seed_operand) -> np.ndarray:
    shape = instr.out.shape
    index = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    stream = int(instr.attr("stream").evaluate(env))
    return rng.uniform(seed_value(m, seed_operand, env, instr), int(instr.attr("draw")), stream, index)


@rule("interpret", "rand")
def _rand(m, instr, env):
    dst = instr.out
    u = uniform_of(m, instr, env, instr.ins[0])
    m.write(dst, env, round_to(u, m.dtype_of(dst)), instr, None)


@rule("interpret", "dropout")
def _dropout(m, instr, env):
    dst = instr.out
    data, prob, seed = instr.ins
    mask = m.eval_mask(instr, env, dst.shape)
    x = m.read(data, env, instr, mask)
    p = F32(prob.value) if isinstance(prob, ir.Imm) else m.read(prob, env, instr, mask).astype(F32)
    u = uniform_of(m, instr, env, seed)
    kept = convert(x, m.dtype_of(data), m.dtype_of(dst))
    out = np.where(u < p, np.zeros_like(kept), kept)
    m.write(dst, env, out, instr, mask)
