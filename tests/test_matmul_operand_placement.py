"""A Tensor Engine nc_transpose result fed straight to nc_matmul is placed in SBUF for the matmul
(lang/ops_math.py sbuf_operand), as NKI's compiler does for nki-samples' flash attention backward;
a user-declared PSUM tile as a matmul operand is still NL-E301."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

RNG = np.random.default_rng(5)


@nki.jit
def transpose_then_matmul(a, b, declared):
    out = nl.ndarray((a.shape[0], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((a.shape[0], b.shape[1]), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(1):
        if declared:
            t = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.psum)
            t[...] = nisa.nc_transpose(nl.load(a))
        else:
            t = nisa.nc_transpose(nl.load(a))        # [K, M]: a.T, in PSUM (Tensor Engine)
        ps += nisa.nc_matmul(t, nl.load(b))
    nl.store(out, nl.copy(ps))
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_tensor_engine_transpose_result_is_a_matmul_operand(mode):
    a = RNG.standard_normal((64, 128)).astype(np.float32)     # [M, K]
    b = RNG.standard_normal((128, 48)).astype(np.float32)
    got = transpose_then_matmul(a, b, False, mode=mode)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_declared_psum_tile_as_matmul_operand_is_still_an_error():
    a = RNG.standard_normal((64, 128)).astype(np.float32)
    b = RNG.standard_normal((128, 48)).astype(np.float32)
    with pytest.raises(errors.NkiLiteError) as ei:
        transpose_then_matmul(a, b, True, mode="interpret")
    assert ei.value.code == "NL-E301" and "stationary" in str(ei.value)
