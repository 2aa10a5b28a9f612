"""CPU time per call of the MX instructions in each backend (prints a table; never asserts).

    python benchmarks/mx.py

One max-size nc_matmul_mx (stationary [128, 128] float8_e4m3fn_x4, moving [128, 512] float8_e5m2_x4: K = 512
values, fp32 PSUM) and one quantize_mx of a [128, 2048] bfloat16 tile, each as a small kernel (DMAs in and
out included), traced / compiled once, then the mean process CPU time of 3 calls (time.process_time: the
host is shared, so wall time says less).
"""
from __future__ import annotations

import time

import ml_dtypes
import numpy as np

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite.numerics import mx as MX

RNG = np.random.default_rng(0)


@nki.jit(platform_target="trn3")
def matmul(st, st_scale, mv, mv_scale):
    K, M, N = st.shape[0], st.shape[1], mv.shape[1]
    s = nl.ndarray((K, M), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=st.ap(dtype=nl.float8_e4m3fn_x4, pattern=[[M, K], [1, M]], offset=0))
    m = nl.ndarray((K, N), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=mv.ap(dtype=nl.float8_e5m2_x4, pattern=[[N, K], [1, N]], offset=0))
    ss = nl.ndarray((K, M), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((K, N), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=ss, src=st_scale)
    nisa.dma_copy(dst=ms, src=mv_scale)
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms)
    o = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=ps)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


@nki.jit(platform_target="trn3")
def quantize(x):
    P, F = x.shape
    xs = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    q = nl.ndarray((P, F // 4), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    s = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
    qo = nl.ndarray(q.shape, dtype=nl.float8_e5m2_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=qo, src=q)
    return qo


def _operand(name, K, F):
    codes = RNG.integers(0, 0x70, size=(K, F, 4), dtype=np.uint8)         # finite codes of both fp8 formats
    return MX.pack(codes, name), RNG.integers(120, 135, size=(K, F), dtype=np.uint8)


def main() -> None:
    st, st_s = _operand("float8_e4m3fn_x4", 128, 128)
    mv, mv_s = _operand("float8_e5m2_x4", 128, 512)
    x = RNG.standard_normal((128, 2048)).astype(ml_dtypes.bfloat16)
    print(f"{'instruction':14s} {'mode':10s} {'ms CPU / call':>14s}")
    for name, k, args in (("nc_matmul_mx", matmul, (st, st_s, mv, mv_s)), ("quantize_mx", quantize, (x,))):
        for mode in ("interpret", "jit"):
            k(*args, mode=mode)
            t = time.process_time()
            for _ in range(3):
                k(*args, mode=mode)
            print(f"{name:14s} {mode:10s} {(time.process_time() - t) / 3 * 1e3:14.1f}")


if __name__ == "__main__":
    main()
