"""Matrix multiplication kernels (PSUM accumulation over 128-deep k tiles; any Tensor Engine dtype, fp8 included).

Part of nki_lite's stdlib: kernels written in the DSL itself, in the style of AWS's NKI tutorials
(legacy dialect), each with a numpy reference in nki_lite/stdlib/reference.py.
"""
import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


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
