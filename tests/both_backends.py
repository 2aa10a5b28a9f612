"""Shared by the op test files that run every test on both backends (test_ops_data.py,
test_ops_nl_compute.py, test_isa_compute.py, test_isa_reduce.py): the autouse `backend` fixture
(import it into the test module) and seeded input generators."""
from __future__ import annotations

import numpy as np
import pytest

from .oracle import F32, values


# the reduce_op= values of nisa instructions and their numpy references
REDUCE_OPS = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply}


@pytest.fixture(autouse=True, params=["interpret", "jit"])
def backend(request, monkeypatch):
    """Every test of a module that imports this runs on both backends: the interpreter (the
    definition) and the JIT."""
    monkeypatch.setenv("NKI_LITE_MODE", request.param)


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def nice(seed, shape, dt="float32", lo=-4.0, hi=4.0):
    """Finite values uniform in [lo, hi], stored in dtype dt."""
    return values(rng_of(seed), shape, dt, "uniform", lo, hi)


def random_bits_f32(seed, shape):
    """float32 arrays of random bit patterns (NaN payloads, infinities, subnormals included)."""
    return rng_of(seed).integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32).view(F32)
