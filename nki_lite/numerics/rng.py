"""nki_lite's random number generator: a counter-based hash, the same bits on every backend.

Contract: `uniform(seed, draw, stream, index)` is a pure function of four 32-bit integers, returning
fp32 values in [0, 1) (multiples of 2^-24). Hardware RNG bits are not reproducible on a CPU, so
nki_lite defines its own generator (docs/numerics.md, "Random numbers"):

    h = mix(mix(mix(mix(seed) ^ draw) ^ stream) ^ index)      (all arithmetic mod 2^32)
    u = (h >> 8) * 2^-24

- `mix` is the "lowbias32" integer finaliser (xor-shift-multiply, constants 0x7feb352d and
  0x846ca68b): a bijection of 32-bit integers with good avalanche, cheap in numpy and in LLVM.
- seed: the value set by nl.random_seed (0 if never set); draw: how many random instructions ran
  since that call (trace order); stream: the iteration of the loops opened since that call
  (row-major over their trips); index: the element's row-major position in the instruction's tile.
So one seed gives one sequence (NKI's random_seed contract), every element and iteration gets its
own value, and the JIT (lower/llvm/rules_rng.py) evaluates exactly these integer steps.
"""
from __future__ import annotations

import numpy as np

M1 = 0x7FEB352D
M2 = 0x846CA68B
MASK32 = 0xFFFFFFFF
SCALE = 2.0 ** -24            # 24 random bits -> [0, 1), exact in fp32


def mix(x: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 values (wrapping multiplies)."""
    x = np.asarray(x, dtype=np.uint32)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint32(16))
        x = (x * np.uint32(M1)).astype(np.uint32)
        x = x ^ (x >> np.uint32(15))
        x = (x * np.uint32(M2)).astype(np.uint32)
        x = x ^ (x >> np.uint32(16))
    return x


def bits(seed: int, draw: int, stream: int, index: np.ndarray) -> np.ndarray:
    """The 32-bit hash of every element index (uint32 array of index's shape)."""
    k = mix(np.uint32(seed & MASK32)) ^ np.uint32(draw & MASK32)
    k = mix(k) ^ np.uint32(stream & MASK32)
    k = mix(k)
    return mix(np.asarray(index, dtype=np.int64).astype(np.uint32) ^ k)


def uniform(seed: int, draw: int, stream: int, index: np.ndarray) -> np.ndarray:
    """fp32 values in [0, 1) for every element index."""
    h = bits(seed, draw, stream, index)
    return ((h >> np.uint32(8)).astype(np.float32) * np.float32(SCALE)).astype(np.float32)


def seed_of(value, dtype_is_int: bool) -> int:
    """The 32-bit seed of a seed operand's value: an integer wraps to 32 bits; a float seed uses its
    fp32 bit pattern (total: NaN, infinities and huge values are seeds too)."""
    if dtype_is_int:
        return int(value) & MASK32
    return int(np.asarray(value, dtype=np.float32).view(np.uint32))
