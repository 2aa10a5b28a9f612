"""The four kernels of AWS's NKI matrix-multiplication tutorial, written in nki_lite's own code.

The tutorial (aws-neuron-sdk general/nki/tutorials/matrix_multiplication.rst) walks one problem,
result[M, N] = lhsT[K, M].T @ rhs[K, N], through four versions and publishes their trn1 latency
for lhsT [8192, 4096] and rhs [8192, 8192] in BF16. These are our own implementations of the same
four loop structures, used by the engine-model validation (benchmarks/estimate_matmul.py,
tests/test_cost_validation.py) and small enough to run on the interpreter at toy sizes.

1. `mm_tiled`          : M/N/K tiled; both operand tiles loaded inside the K loop.
2. `mm_hoisted`        : the lhsT column strip is loaded once per M tile and the rhs column strip
                         once per (M, N) tile, outside the K loop.
3. `mm_block_free`     : M and N blocked (2 x 2 tiles per block), so each loaded strip feeds two
                         output tiles.
4. `mm_optimized`      : M, N and K blocked (16 x 2 x 8 tiles); K blocks run in a sequential_range
                         and accumulate into an SBUF result block; results are stored in wide rows.
"""
import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl

TK = 128   # contraction tile (partition dimension)
TM = 128   # stationary free size
TN = 512   # moving free size


@nki.jit
def mm_tiled(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in nl.affine_range(M // TM):
        for ni in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(K // TK):
                a = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                a[...] = nl.load(lhsT[ki * TK:(ki + 1) * TK, mi * TM:(mi + 1) * TM])
                b[...] = nl.load(rhs[ki * TK:(ki + 1) * TK, ni * TN:(ni + 1) * TN])
                acc += nisa.nc_matmul(a, b)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[mi * TM:(mi + 1) * TM, ni * TN:(ni + 1) * TN], value=res)
    return out


@nki.jit
def mm_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    KT = K // TK
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in nl.affine_range(M // TM):
        a_strip = nl.ndarray((KT, nl.par_dim(TK), TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(KT):
            a_strip[ki] = nl.load(lhsT[ki * TK:(ki + 1) * TK, mi * TM:(mi + 1) * TM])
        for ni in nl.affine_range(N // TN):
            b_strip = nl.ndarray((KT, nl.par_dim(TK), TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(KT):
                b_strip[ki] = nl.load(rhs[ki * TK:(ki + 1) * TK, ni * TN:(ni + 1) * TN])
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(KT):
                acc += nisa.nc_matmul(a_strip[ki], b_strip[ki])
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[mi * TM:(mi + 1) * TM, ni * TN:(ni + 1) * TN], value=res)
    return out


@nki.jit
def mm_block_free(lhsT, rhs, BM=2, BN=2):
    K, M = lhsT.shape
    N = rhs.shape[1]
    KT = K // TK
    assert M % (BM * TM) == 0 and N % (BN * TN) == 0
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(M // (BM * TM)):
        a_blk = nl.ndarray((BM, KT, nl.par_dim(TK), TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(BM):
            for ki in nl.affine_range(KT):
                m0 = (mb * BM + bm) * TM
                a_blk[bm, ki] = nl.load(lhsT[ki * TK:(ki + 1) * TK, m0:m0 + TM])
        for nb in nl.affine_range(N // (BN * TN)):
            b_blk = nl.ndarray((BN, KT, nl.par_dim(TK), TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(BN):
                for ki in nl.affine_range(KT):
                    n0 = (nb * BN + bn) * TN
                    b_blk[bn, ki] = nl.load(rhs[ki * TK:(ki + 1) * TK, n0:n0 + TN])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
                    for ki in nl.affine_range(KT):
                        acc += nisa.nc_matmul(a_blk[bm, ki], b_blk[bn, ki])
                    res = nl.copy(acc, dtype=out.dtype)
                    m0 = (mb * BM + bm) * TM
                    n0 = (nb * BN + bn) * TN
                    nl.store(out[m0:m0 + TM, n0:n0 + TN], value=res)
    return out


@nki.jit
def mm_optimized(lhsT, rhs, BM=16, BN=2, BK=8):
    """BM/BN/BK: tiles per block along M, N, K (the tutorial's 16 x 2 x 8 by default)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    WM, WN, WK = BM * TM, BN * TN, BK * TK          # block widths in elements
    assert M % WM == 0 and N % WN == 0 and K % WK == 0
    NMB = M // WM
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(N // WN):
        # the whole [M, WN] result column block lives in SBUF across the K blocks
        res_blk = nl.zeros((NMB, BM, BN, nl.par_dim(TM), TN), dtype=lhsT.dtype, buffer=nl.sbuf)
        for kb in nl.sequential_range(K // WK):
            b_blk = nl.ndarray((BK, nl.par_dim(TK), WN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(BK):
                k0 = (kb * BK + bk) * TK
                b_blk[bk] = nl.load(rhs[k0:k0 + TK, nb * WN:(nb + 1) * WN])
            for mb in nl.affine_range(NMB):
                a_blk = nl.ndarray((BK, nl.par_dim(TK), WM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(BK):
                    k0 = (kb * BK + bk) * TK
                    a_blk[bk] = nl.load(lhsT[k0:k0 + TK, mb * WM:(mb + 1) * WM])
                for bn in nl.affine_range(BN):
                    for bm in nl.affine_range(BM):
                        acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(BK):
                            acc += nisa.nc_matmul(a_blk[bk, :, bm * TM:(bm + 1) * TM],
                                                  b_blk[bk, :, bn * TN:(bn + 1) * TN])
                        res_blk[mb, bm, bn] += acc
        for mb in nl.affine_range(NMB):
            for bm in nl.affine_range(BM):
                row = nl.ndarray((TM, WN), dtype=res_blk.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(BN):
                    row[:, bn * TN:(bn + 1) * TN] = nl.copy(res_blk[mb, bm, bn])
                m0 = (mb * BM + bm) * TM
                nl.store(out[m0:m0 + TM, nb * WN:(nb + 1) * WN], value=row)
    return out


KERNELS = {"tiled": mm_tiled, "hoisted": mm_hoisted, "block_free": mm_block_free, "optimized": mm_optimized}


def reference(lhsT, rhs):
    return (lhsT.astype(np.float64).T @ rhs.astype(np.float64))
