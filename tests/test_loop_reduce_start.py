"""nl.loop_reduce into a destination nothing wrote before (an nl.ndarray, as NKIBench's
compiler-generated kernels do) starts at op's identity before the outermost loop of loop_indices
(lang/ops_math.py LoopReduce._start); a destination written before keeps its value. Both backends,
bit for bit (the JIT used to read whatever its arena held, the interpreter its NaN fill)."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl

from .test_jit_differential import run_both

F32 = np.float32


@nki.jit
def sums_inner(x):
    """rmsnorm_matmul's shape: acc[i] reduced over the loop j nested inside i."""
    out = nl.ndarray((2, 128, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 1), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        for j in nl.affine_range(4):
            part = nl.sum(nl.load(x[i, :, nl.ds(j * 64, 64)]), axis=1, keepdims=True)
            acc[i] = nl.loop_reduce(part, op=np.add, loop_indices=[j], dtype=np.float32)
        nl.store(out[i], value=acc[i])
    return out


@nki.jit
def max_outer(x):
    """bmm_softmax's shape: acc[k] indexed by a loop k inside the outer reduction loop i, reduced
    over i and the innermost j: started over every k before the i loop."""
    out = nl.ndarray((3, 128, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((3, nl.par_dim(128), 1), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        for k in nl.affine_range(3):
            for j in nl.affine_range(2):
                part = nl.max(nl.load(x[i, k, j]), axis=1, keepdims=True)
                acc[k] = nl.loop_reduce(part, op=np.maximum, loop_indices=[i, j], dtype=np.float32)
    for k in nl.affine_range(3):
        nl.store(out[k], value=acc[k])
    return out


@nki.jit
def started_by_user(x):
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.full((nl.par_dim(128), 1), 5.0, nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        part = nl.sum(nl.load(x[:, nl.ds(j * 64, 64)]), axis=1, keepdims=True)
        acc[...] = nl.loop_reduce(part, op=np.add, loop_indices=[j], dtype=np.float32)
    nl.store(out, value=acc)
    return out


def _x(*shape):
    return np.random.default_rng(len(shape)).integers(-8, 8, size=shape).astype(F32)


def test_uninitialised_destination_starts_at_the_identity():
    x = _x(2, 128, 256)
    got = run_both(sums_inner, [x])[0]
    np.testing.assert_array_equal(got[..., 0], x.sum(axis=2))


def test_destination_indexed_inside_the_reduction_loop_starts_over_every_block():
    x = _x(2, 3, 2, 128, 16)
    got = run_both(max_outer, [x])[0]
    np.testing.assert_array_equal(got[..., 0], x.max(axis=(0, 2, 4)))


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_destination_written_before_keeps_its_value(mode):
    x = _x(128, 256)
    got = started_by_user(x, mode=mode)
    np.testing.assert_array_equal(got[:, 0], x.sum(axis=1) + F32(5))
