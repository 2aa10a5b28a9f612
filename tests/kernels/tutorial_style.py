"""Kernels written the way AWS's NKI tutorials write them (legacy dialect), in nki_lite's own code.

Used by the tests and the demo; each has a numpy reference next to it.
"""
import math

import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


@nki.jit
def spmd_add(a_input, b_input):
    """c = a + b over a 2-D launch grid of [128, 512] tiles."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    nl.store(c_output[ix, iy], value=c_tile)
    return c_output


@nki.jit
def tiled_matmul(lhsT, rhs):
    """result[M, N] = lhsT[K, M].T @ rhs[K, N]; K accumulated in PSUM over 128-deep tiles."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TK, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            res_psum = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                lhsT_tile = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                rhs_tile[...] = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                res_psum += nisa.nc_matmul(lhsT_tile[...], rhs_tile[...])
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=res_sb)
    return result


@nki.jit
def nl_matmul(x, y):
    """out = x @ y with nl.matmul (transpose_x=False: x is [M, K] and goes through a transpose)."""
    M, K = x.shape
    _, N = y.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        xt = nl.load(x[:, k * 128:(k + 1) * 128])
        yt = nl.load(y[k * 128:(k + 1) * 128, :])
        acc += nl.matmul(xt, yt)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def row_softmax(x):
    """Numerically stable softmax over each row, 128 rows per tile, ragged last tile masked."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(128)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / 128)):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        row_max = nl.max(t, axis=1)
        e = nl.exp(nl.subtract(t, row_max))
        total = nl.sum(e, axis=1)
        y = nl.multiply(e, nl.reciprocal(total))
        nl.store(out[i * 128 + ip, ic], value=y, mask=valid)
    return out


def row_softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@nki.jit
def rmsnorm(a_tensor, g_tensor):
    """out = a * rsqrt(mean(a^2, axis=1)) * g, rows in tiles of 128 with a masked ragged tail."""
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, width = a_tensor.shape
    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(width)[None, :]
    g_tile = nl.load(g_tensor.reshape((1, width))[iw, iy])
    for i in nl.affine_range(math.ceil(num_rows / 128)):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        in_square = nl.square(a_tile)
        square_sum = nl.sum(in_square, axis=[1])
        mean = square_sum / width
        rms_reciprocal = nl.rsqrt(mean)
        out_tile = nl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, width))
        out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor


def rmsnorm_ref(a, g):
    a = a.astype(np.float64)
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g.astype(np.float64)[None, :]
