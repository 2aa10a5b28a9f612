"""NKI Library patterns of issue #14, round 4, re-created in small kernels of the current dialect.

- The core id of a per-core (LNC=2) trace and the program id of a one-program launch are Python ints, so
  shard sizes computed from them are ints wherever NKI wants a trace-time int (`.ap` pattern counts, nl.ds).
- `.ap(scalar_offset=...)` with a trace-time value (an int or a loop variable) is that offset along the base
  tensor's indirect_dim, known statically.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl

from .nki_tiles import hbm_of

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(1404)


@nki.jit
def uneven_row_shards(a):
    """Core c copies its share of a's rows, the last core the remainder: shard sizes from the core id."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cores, me = nl.num_programs(), nl.program_id(0)
    per_core = a.shape[0] // cores
    start = me * per_core
    rows = a.shape[0] - start if me == cores - 1 else per_core
    t = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    # the shard as an explicit access pattern ([step, num] counts are the computed ints) ...
    nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], rows], [1, a.shape[1]]], offset=start * a.shape[1]))
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(me + 2))
    # ... and written back through an nl.ds of the computed size
    nisa.dma_copy(dst=out[nl.ds(start, rows), :], src=t)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_shard_sizes_from_the_core_id_are_ints(lnc):
    a = RNG.standard_normal((7, 5)).astype(np.float32)
    got = np.asarray(uneven_row_shards[lnc](a))
    per = 7 // lnc
    want = a.copy()
    for c in range(lnc):
        stop = 7 if c == lnc - 1 else (c + 1) * per
        want[c * per:stop] = a[c * per:stop] * np.float32(c + 2)
    np.testing.assert_array_equal(got, want)


@nki.jit
def rows_by_scalar_offset(a, picks: int):
    """Row `b` of a for b in range(picks), each through `.ap(scalar_offset=b, indirect_dim=0)`."""
    out = nl.ndarray((picks, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(picks):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], 1], [1, a.shape[1]]], offset=0, scalar_offset=b,
                                      indirect_dim=0))
        nisa.dma_copy(dst=out[b], src=t)
    return out


@nki.jit
def column_by_int_scalar_offset(a):
    """Column 3 of a, through `.ap(scalar_offset=3, indirect_dim=1)` (the base tensor's dim 1)."""
    t = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[a.shape[1], a.shape[0]], [1, 1]], scalar_offset=3, indirect_dim=1))
    return hbm_of(t)


@pytest.mark.parametrize("mode", MODES)
def test_scalar_offset_of_a_loop_variable(mode):
    a = RNG.standard_normal((6, 9)).astype(np.float32)
    np.testing.assert_array_equal(rows_by_scalar_offset(a, 4, mode=mode), a[:4])
    np.testing.assert_array_equal(column_by_int_scalar_offset(a, mode=mode), a[:, 3:4])
