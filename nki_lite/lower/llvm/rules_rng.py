"""llvm rules for the random instructions, rand and dropout: numerics/rng.py's integer steps in i32
(mirrors runtime/interpret_rng.py bit for bit; masked-off elements are not written)."""
from __future__ import annotations

from ...core import dtypes as D
from ...core import ir
from ...core.ops import rule
from ...numerics import rng
from .irbuilder import f32
from .rules_common import elementwise, flat_axes


def _i32(c: int) -> str:
    """A 32-bit constant in LLVM's signed spelling."""
    c &= rng.MASK32
    return str(c - (1 << 32) if c >= 1 << 31 else c)


def _mix(B, x: str) -> str:
    """lowbias32 (numerics/rng.mix) on an i32 value."""
    x = B.op(f"xor i32 {x}, {B.op(f'lshr i32 {x}, 16')}")
    x = B.op(f"mul i32 {x}, {_i32(rng.M1)}")
    x = B.op(f"xor i32 {x}, {B.op(f'lshr i32 {x}, 15')}")
    x = B.op(f"mul i32 {x}, {_i32(rng.M2)}")
    return B.op(f"xor i32 {x}, {B.op(f'lshr i32 {x}, 16')}")


def _seed(em, operand, env) -> str:
    """The i32 seed (interpret_rng.seed_value): ints wrap, floats give their fp32 bits."""
    B = em.b
    if isinstance(operand, ir.Imm):
        return _i32(rng.seed_of(operand.value, D.INFO[operand.dtype].is_int))
    dt = em.dtype(operand)
    if D.INFO[dt].is_int:
        return B.op(f"trunc i64 {em.operand(operand, env, 'i64')} to i32")
    return B.op(f"bitcast float {em.operand(operand, env, 'f32')} to i32")


def _uniform(em, instr, env, seed_operand) -> str:
    """u in [0, 1) (f32) for the element at env's axis variables."""
    B = em.b
    k = B.op(f"xor i32 {_mix(B, _seed(em, seed_operand, env))}, {_i32(int(instr.attr('draw')))}")
    stream = B.op(f"trunc i64 {em.affine(instr.attr('stream'), env)} to i32")
    k = _mix(B, B.op(f"xor i32 {_mix(B, k)}, {stream}"))
    index = B.op(f"trunc i64 {em.affine(flat_axes(instr.out.shape, 0, None), env)} to i32")
    h = _mix(B, B.op(f"xor i32 {index}, {k}"))
    top = B.op(f"uitofp i32 {B.op(f'lshr i32 {h}, 8')} to float")
    return B.op(f"fmul float {top}, {f32(rng.SCALE)}")


@rule("llvm", "rand")
def _rand(em, instr, ctx):
    seed = instr.ins[0]
    ins = (seed,) if isinstance(seed, ir.Access) else ()
    elementwise(em, instr, ctx, ins, lambda env: em.from_f32(_uniform(em, instr, env, seed), em.dtype(instr.out)))


@rule("llvm", "dropout")
def _dropout(em, instr, ctx):
    data, prob, seed = instr.ins
    ddt = em.dtype(instr.out)

    def value(env):
        B = em.b
        kept = em.convert_raw(em.load_raw(data, env), em.dtype(data), ddt)
        p = em.operand(prob, env, "f32")
        drop = B.op(f"fcmp olt float {_uniform(em, instr, env, seed)}, {p}")
        zero = em.from_f32("0.0", ddt) if not D.INFO[ddt].is_int else em.from_i64("0", ddt)
        return B.op(f"select i1 {drop}, {em.storage(instr.out.buffer)} {zero}, {em.storage(instr.out.buffer)} {kept}")
    elementwise(em, instr, ctx, tuple(o for o in instr.ins if isinstance(o, ir.Access)), value)
