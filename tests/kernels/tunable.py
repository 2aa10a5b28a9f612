"""Kernels with tile-size keyword parameters, for the autotune tests (tests/test_autotune.py)."""
import math

import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


@nki.jit
def matmul_tiles(lhsT, rhs, TILE_M=128, TILE_N=512):
    """result[M, N] = lhsT[K, M].T @ rhs[K, N]; K in 128-deep tiles, M and N in the given tiles."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TK = 128
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a = nl.load(lhsT[k * TK:(k + 1) * TK, m * TILE_M:(m + 1) * TILE_M])
                b = nl.load(rhs[k * TK:(k + 1) * TK, n * TILE_N:(n + 1) * TILE_N])
                acc += nisa.nc_matmul(a, b)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=result.dtype))
    return result


@nki.jit
def softmax_tiles(x, TILE_P=128):
    """Softmax over each row of a 2-D fp32 tensor, TILE_P rows per tile (ragged tail masked)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(TILE_P)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / TILE_P)):
        valid = i * TILE_P + ip < rows
        t = nl.load(x[i * TILE_P + ip, ic], mask=valid)
        neg_max = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True)
        total = nl.ndarray((TILE_P, 1), dtype=nl.float32)
        e = nisa.activation(op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        nl.store(out[i * TILE_P + ip, ic], value=nl.multiply(e, nl.reciprocal(total), mask=valid), mask=valid)
    return out
