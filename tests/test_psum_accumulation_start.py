"""A PSUM accumulation group's first matmul overwrites: `psum += nc_matmul(...)` onto a fresh tile
declared with nl.ndarray (not nl.zeros) starts from zero (lower/passes/accumulation_start.py).

Re-creates, in our own code, the accumulator of nki-samples' allocated RMSNorm-QKV kernel (a
`ncc.psum.mod_alloc` tile allocated per iteration, masked `+=` matmuls), which read the NaN fill
of the new tile in the interpreter and stale memory in the JIT.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl

RNG = np.random.default_rng(11)


@nki.jit
def grouped_sums(a, b, direct, masked):
    """Per outer iteration g: out[g] = sum over k of a[k].T @ b[k], accumulated in a fresh PSUM tile."""
    G, K = 3, a.shape[0]
    out = nl.ndarray((G, a.shape[2], b.shape[2]), nl.float32, buffer=nl.shared_hbm)
    for g in nl.affine_range(G):
        buf = ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(1,)) if direct else nl.psum
        acc = nl.ndarray((1, nl.par_dim(a.shape[2]), b.shape[2]), nl.float32, buffer=buf)
        for k in nl.affine_range(K):
            prod = nisa.nc_matmul(nl.load(a[k]), nl.load(b[k]), mask=(g < G) if masked else None)
            acc[0] += prod
        nl.store(out[g], value=nl.copy(acc[0]))
    return out


@pytest.mark.parametrize("direct", [False, True], ids=["auto", "mod_alloc"])
@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
def test_accumulation_into_a_fresh_psum_tile_starts_at_zero(direct, masked):
    a = RNG.standard_normal((2, 32, 16)).astype(np.float32)
    b = RNG.standard_normal((2, 32, 24)).astype(np.float32)
    want = sum(a[k].astype(np.float64).T @ b[k] for k in range(2))
    got = {m: grouped_sums(a, b, direct, masked, mode=m) for m in ("interpret", "jit")}
    for m, v in got.items():
        assert not np.isnan(v).any(), m
        np.testing.assert_allclose(v, np.broadcast_to(want, v.shape), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["interpret"], got["jit"])     # bit for bit


@nki.jit
def read_before_accumulating(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    acc[...] = nl.copy(nl.load(b[0:a.shape[1]]))      # a non-matmul write opens no group: kept as is
    acc[...] += nisa.nc_matmul(nl.load(a), nl.load(b))
    nl.store(out, value=nl.copy(acc))
    return out


def test_only_a_tile_whose_first_use_is_an_accumulating_matmul_is_zeroed():
    a = RNG.standard_normal((32, 16)).astype(np.float32)
    b = RNG.standard_normal((32, 24)).astype(np.float32)
    assert "memset" not in read_before_accumulating.inspect_ir(a, b)
    assert "memset" in grouped_sums.inspect_ir(a[None].repeat(2, 0), b[None].repeat(2, 0), False, False)
    got = read_before_accumulating(a, b, mode="interpret")
    np.testing.assert_allclose(got, b[:16] + a.astype(np.float64).T @ b, rtol=1e-5, atol=1e-5)
