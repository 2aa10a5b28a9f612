"""numerics.alu.reduce_fp32's fast maximum / minimum (one numpy reduction, issue #13) against the
16-lane loop that states the order (`_reduce_lanes`) and the tests' own restatement
(oracle.reduce_fp32_ref), bit for bit.

What could separate them: numpy's max returns either zero of a {+0, -0} tie and any NaN's payload,
where the definition wants +0 (max) / -0 (min) and the canonical NaN; rows that are all
zeros, all infinities, all NaN, one element, lengths around the 16-lane chunk.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nki_lite.numerics import alu

from .oracle import fast, reduce_fp32_ref

F32 = np.float32
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 1.0], F32)


def _bits(x):
    return np.asarray(x, F32).view(np.uint32)


def _rows(rng, shape, kind):
    if kind == "normal":
        return rng.standard_normal(shape).astype(F32)
    if kind == "zeros":                  # signed-zero ties: the case numpy's max leaves open
        return rng.choice(np.array([0.0, -0.0], F32), size=shape)
    if kind == "zeros_and_negatives":
        return rng.choice(np.array([0.0, -0.0, -1.0, -np.inf], F32), size=shape)
    if kind == "specials":
        return rng.choice(SPECIALS, size=shape)
    x = rng.standard_normal(shape).astype(F32)   # "sprinkled": a few specials in normal rows
    pick = rng.random(shape)
    x[pick < 0.1] = rng.choice(SPECIALS, size=int((pick < 0.1).sum()))
    return x


@fast(40)
@given(seed=st.integers(0, 2 ** 32 - 1), rows=st.integers(0, 5), n=st.integers(1, 70),
       kind=st.sampled_from(["normal", "zeros", "zeros_and_negatives", "specials", "sprinkled"]),
       op=st.sampled_from(["maximum", "minimum"]))
def test_extremum_matches_lane_loop(seed, rows, n, kind, op):
    x = _rows(np.random.default_rng(seed), (rows, n), kind)
    got = alu.reduce_fp32(op, x)
    want = alu._reduce_lanes(op, x)
    assert got.dtype == F32 and got.shape == want.shape == (rows,)
    assert np.array_equal(_bits(got), _bits(want))
    assert np.array_equal(_bits(got), _bits(reduce_fp32_ref(op, x)))


@pytest.mark.parametrize("op, row, want", [
    ("maximum", [-0.0, 0.0, -0.0], 0x00000000),         # +0 beats -0 wherever it is
    ("maximum", [-0.0, -0.0], 0x80000000),
    ("minimum", [0.0, -0.0, 0.0], 0x80000000),
    ("minimum", [0.0, 0.0], 0x00000000),
    ("maximum", [1.0, -np.nan, 2.0], 0x7FC00000),       # any NaN: the canonical NaN
    ("minimum", [np.inf, np.inf], 0x7F800000),
    ("maximum", [-np.inf], 0xFF800000),
])
def test_extremum_edge_rows(op, row, want):
    x = np.array([row], F32)
    assert int(_bits(alu.reduce_fp32(op, x))[0]) == want
    assert int(_bits(alu._reduce_lanes(op, x))[0]) == want


def test_other_dtypes_and_empty_rows_take_the_loop():
    empty = np.zeros((3, 0), F32)
    assert np.array_equal(_bits(alu.reduce_fp32("maximum", empty)), _bits(np.full(3, -np.inf, F32)))
    x64 = np.array([[1.5, -2.0, 3.25]])
    assert alu.reduce_fp32("minimum", x64).dtype == F32
    assert float(alu.reduce_fp32("minimum", x64)[0]) == -2.0
