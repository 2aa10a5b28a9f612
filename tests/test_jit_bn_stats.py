"""bn_stats's vector path in the JIT (lower/llvm/rules_reduce.py `_bn_vector_sweep`): 32-element
chunks split into even and odd lanes, the ragged tail scalar; bit for bit the interpreter's order,
whatever the width, the values (NaN, ±inf, subnormals) and whether the row runs row-major."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.lower.llvm.target import jit_supported

from .test_jit_differential import _jit_env, run_both  # noqa: F401  (_jit_env: autouse, debug fill, no disk cache)

pytestmark = pytest.mark.skipif(not jit_supported(), reason="no LLVM JIT on this host")
F32 = np.float32


@nki.jit
def _stats(a):
    P, F = a.shape
    out = nl.ndarray((P, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    mv_out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nisa.bn_stats(nl.load(a), dtype=nl.float32)
    nl.store(out, st)
    nl.store(mv_out, nisa.bn_aggr(st))
    return out, mv_out


@nki.jit
def _masked_stats(a):
    P, F = a.shape
    out = nl.ndarray((P, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    st = nisa.bn_stats(nl.load(a), dtype=nl.float32, mask=(ip < P - 3))
    nl.store(out, st)
    return out


def _values(seed, shape, special):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(F32)
    if special:
        x[0, 0], x[1, -1], x[2, 1 % shape[1]] = np.nan, np.inf, -np.inf
        x[3, :] = np.float32(1e-40)                                  # subnormals
        x[4, 0::2] = np.inf
    return x


@pytest.mark.parametrize("width", [31, 32, 33, 63, 64, 95, 512])
@pytest.mark.parametrize("special", [False, True])
def test_bn_stats_same_bits(width, special):
    run_both(_stats, [_values(width, (8, width), special)])


@pytest.mark.parametrize("width", [32, 70])
def test_masked_bn_stats_same_bits(width):
    run_both(_masked_stats, [_values(width + 1, (8, width), True)])
