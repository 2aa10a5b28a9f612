"""Matrix multiplication: `matmul`, `matmul_fp8`, `quantize_fp8` and the DSL kernels behind them.

Part of nki_lite's stdlib: kernels written in the DSL itself (legacy dialect).

Tiling (the Tensor Engine's shapes): the contraction K goes on the partitions in 128-deep tiles;
the stationary operand is a 128x128 tile of A transposed (A is loaded with a DMA transpose,
`nl.load_transpose2d`, so A stays row-major in HBM); the moving operand is a 128x512 tile of B. For
each 512-wide block of N the K x 512 panel of B is loaded once (hoisted) and reused by every
128-row block of M; each output tile accumulates its K tiles in one PSUM bank and is copied out
once. A ragged K tail is its own narrower matmul (exact: no padding enters the sums); ragged M and N
tails are masked on the loads and stores (the unloaded lanes only reach outputs that are not
stored).

Numerics: products exact, accumulation in fp32 in k order (the Tensor Engine's PSUM), one rounding
to out_dtype. fp8 operands are multiplied exactly; per-row / per-column scales are applied to the
fp32 sums when PSUM is copied out.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl

from ._api import FLOAT_DTYPES, FP8_DTYPES, Call, as_array, entry, fail

TK, TM, TN = 128, 128, 512
OUT_DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))


@nki.jit
def tiled_matmul(lhsT, rhs):
    """result[M, N] = lhsT[K, M].T @ rhs[K, N]; K accumulated in PSUM over 128-deep tiles (the
    tutorial's form: multiples of the tile sizes only; `matmul` is the general entry point)."""
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


def _b_panel(b, bi, n, N, K, in_dtype):
    """The K x TN panel of b[bi] for N-block n: full 128-deep tiles, then the ragged K tail."""
    KT = K // TK
    ik = nl.arange(TK)[:, None]
    jn = nl.arange(TN)[None, :]
    cols = n * TN + jn < N
    pdt = in_dtype if in_dtype is not None else b.dtype        # None: each operand keeps its own dtype
    panel = nl.ndarray((max(KT, 1), nl.par_dim(TK), TN), dtype=pdt, buffer=nl.sbuf)
    for k in nl.affine_range(KT):
        panel[k, ik, jn] = nl.load(b[bi, k * TK + ik, n * TN + jn], mask=cols, dtype=in_dtype)
    tail = None
    if K % TK:
        it = nl.arange(K % TK)[:, None]
        tail = nl.load(b[bi, KT * TK + it, n * TN + jn], mask=cols, dtype=in_dtype)
    return panel, tail


def _a_block_T(a, bi, mb, M, K, MB, in_dtype):
    """Rows [mb*MB, mb*MB + MB) of a[bi] transposed into stationary tiles, once per M block: each
    128x128 tile is loaded row-major (contiguous DMA) and transposed on the Tensor Engine. Returns
    ([KT, 128, MB] full-depth tiles, [K % 128, MB] tail or None)."""
    KT = K // TK
    adt = in_dtype if in_dtype is not None else a.dtype
    im = nl.arange(TM)[:, None]
    blk = nl.ndarray((max(KT, 1), nl.par_dim(TK), MB), dtype=adt, buffer=nl.sbuf)
    tail = nl.ndarray((K % TK, MB), dtype=adt, buffer=nl.sbuf) if K % TK else None
    for k in nl.affine_range(KT):              # the block's row tiles inside: independent transposes
        for t in range(MB // TM):
            r0 = mb * MB + t * TM
            x = nl.load(a[bi, r0 + im, k * TK + nl.arange(TK)[None, :]], mask=r0 + im < M, dtype=in_dtype)
            blk[k, :, t * TM:(t + 1) * TM] = nl.copy(nisa.nc_transpose(x, engine=nisa.tensor_engine), dtype=adt)
    if tail is not None:
        for t in range(MB // TM):
            r0 = mb * MB + t * TM
            x = nl.load(a[bi, r0 + im, KT * TK + nl.arange(K % TK)[None, :]], mask=r0 + im < M, dtype=in_dtype)
            tail[:, t * TM:(t + 1) * TM] = nl.copy(nisa.nc_transpose(x, engine=nisa.tensor_engine), dtype=adt)
    return blk, tail


@nki.jit
def matmul_kernel(a, b, sa, sb, in_dtype, out_dtype):
    """out[B, M, N] = (a[B, M, K] @ b[B, K, N]) * sa[B, M, 1] * sb[B, 1, N]; sa/sb may be None.

    Loop nest: batch, M blocks of up to 512 rows (A transposed once per block), N blocks of 512
    (B's K x 512 panel loaded once per M block and N block), K tiles, the block's 128-row tiles —
    each accumulating in its own PSUM bank (up to 4 live) — then each tile copied out."""
    B, M, K = a.shape
    N = b.shape[2]
    if isinstance(in_dtype, str) and in_dtype == "fp8":
        in_dtype = fp8_operand_dtype(a.dtype, b.dtype, nisa.get_nc_version())
    out = nl.ndarray((B, M, N), dtype=out_dtype, buffer=nl.shared_hbm)
    KT = K // TK
    MB = TM * max(1, min(8, math.ceil(math.ceil(M / TM) / 2)))   # up to 8 PSUM banks; >= 2 blocks
    im = nl.arange(TM)[:, None]
    jn = nl.arange(TN)[None, :]
    for bi in nl.affine_range(B):
        for mb in nl.affine_range(math.ceil(M / MB)):
            a_blk, a_tail = _a_block_T(a, bi, mb, M, K, MB, in_dtype)
            for n in nl.affine_range(math.ceil(N / TN)):
                panel, b_tail = _b_panel(b, bi, n, N, K, in_dtype)
                cols = n * TN + jn < N
                if sb is not None:
                    sb_t = nl.load(sb[bi, nl.arange(1)[:, None], n * TN + jn], mask=cols, dtype=nl.float32)
                # one PSUM bank per 128-row tile of the block, all live over one K loop: each moving
                # tile panel[k] feeds the block's stationary tiles back to back
                accs = [nl.zeros((TM, TN), nl.float32, buffer=nl.psum) for _ in range(MB // TM)]
                for k in nl.affine_range(KT):
                    for t in range(MB // TM):
                        accs[t] += nisa.nc_matmul(a_blk[k, :, t * TM:(t + 1) * TM], panel[k, :, :])
                for t in range(MB // TM):
                    if a_tail is not None:
                        accs[t] += nisa.nc_matmul(a_tail[:, t * TM:(t + 1) * TM], b_tail)
                    r0 = mb * MB + t * TM
                    valid = (r0 + im < M) & cols
                    res = accs[t]
                    if sa is not None:
                        sa_t = nl.load(sa[bi, r0 + im, nl.arange(1)[None, :]], mask=r0 + im < M, dtype=nl.float32)
                        res = nl.multiply(res, sa_t, mask=valid)
                    if sb is not None:
                        res = nl.multiply(res, sb_t.broadcast_to((TM, TN)), mask=valid)
                    nl.store(out[bi, r0 + im, n * TN + jn], value=nl.copy(res, dtype=out_dtype, mask=valid),
                             mask=valid)
    return out


# ---------------------------------------------------------------- entry points

def _batched(fn: str, a: np.ndarray, b: np.ndarray):
    """(a3 [B, M, K], b3 [B, K, N], result shape): numpy's matmul broadcasting of leading axes."""
    if a.ndim < 1 or b.ndim < 1:
        fail(fn, f"operands must be at least 1-D; got shapes {a.shape} and {b.shape}")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        fail(fn, f"contraction dimensions differ: a {a.shape} has K={a2.shape[-1]}, b {b.shape} has "
                 f"K={b2.shape[-2]}")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        fail(fn, f"batch dimensions {a2.shape[:-2]} and {b2.shape[:-2]} do not broadcast")
    M, K, N = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    if b2.ndim == 2 and a2.ndim > 2:                 # one B for every batch: fold the batch into M
        a3 = a2.reshape(1, -1, K)
        b3 = b2[None]
    else:
        a3 = np.ascontiguousarray(np.broadcast_to(a2, batch + (M, K))).reshape(-1, M, K)
        b3 = np.ascontiguousarray(np.broadcast_to(b2, batch + (K, N))).reshape(-1, K, N)
    shape = batch + (M, N)
    if a.ndim == 1:
        shape = shape[:-2] + (N,)
    if b.ndim == 1:
        shape = shape[:-1]
    return a3, b3, shape


def _out_dtype(fn: str, out_dtype) -> np.dtype:
    dt = np.dtype(out_dtype)
    if dt not in OUT_DTYPES:
        fail(fn, f"out_dtype {dt} is not supported; use float32, bfloat16 or float16")
    return dt


@entry
def matmul(a, b, *, out_dtype=np.float32):
    """a @ b on the Tensor Engine's tiling: fp32, bf16 or fp16 inputs (mixed allowed; both widened to
    the wider one), any M, N, K, numpy's broadcasting of leading batch axes, 1-D operands as numpy.

    Layout: K on the partitions in 128-deep tiles, A transposed by the DMA into 128x128 stationary
    tiles, B in 128x512 moving tiles (a K x 512 panel of B is loaded once per N block), fp32 PSUM
    accumulation over K. Numerics: exact products, fp32 sums in k order, one rounding to out_dtype.
    Tolerance against float64: |C - C_ref| <= K * 2^-23 * (|A| @ |B|) for fp32 inputs (docs/stdlib.md).
    """
    a = as_array("matmul", "a", a, FLOAT_DTYPES)
    b = as_array("matmul", "b", b, FLOAT_DTYPES)
    odt = _out_dtype("matmul", out_dtype)
    in_dtype = np.promote_types(a.dtype, b.dtype) if a.dtype != b.dtype else a.dtype
    if a.dtype != b.dtype and np.float32 in (a.dtype, b.dtype):
        in_dtype = np.dtype(np.float32)
    elif a.dtype != b.dtype:                          # bf16 with fp16: fp32 holds both exactly
        in_dtype = np.dtype(np.float32)
    a3, b3, shape = _batched("matmul", a, b)
    return Call(matmul_kernel, (a3, b3, None, None, in_dtype, odt), lambda r: r.reshape(shape))


def fp8_operand_dtype(da, db, nc_version):
    """The dtype both fp8 operands enter the Tensor Engine in, decided at trace time for the target:
    None keeps each format (e4m3 and e5m2 mix on the hardware; e4m3fn only on NeuronCore-v4, trn3,
    and never mixed with another format); otherwise both are widened to bf16, which holds every fp8
    value exactly, so the products stay exact."""
    e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
    if e4m3fn not in (np.dtype(da), np.dtype(db)):
        return None
    if np.dtype(da) == np.dtype(db) and nc_version.value >= 4:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def _scale(fn: str, name: str, s, rows: int, cols: int, batch: int, per: str):
    """A scale as None (1.0), a float, or a [batch, rows, cols] fp32 array."""
    if isinstance(s, (int, float, np.floating, np.integer)) and not isinstance(s, bool):
        return float(s)
    s = np.asarray(s, dtype=np.float32)
    if s.size == 1:
        return float(s.reshape(()))
    want = (rows, 1) if per == "row" else (1, cols)
    if s.shape != want:
        fail(fn, f"{name} has shape {s.shape}; expected a scalar or {want} (per {per})")
    return np.ascontiguousarray(np.broadcast_to(s[None], (batch,) + want))


@entry
def matmul_fp8(a, b, scale_a=1.0, scale_b=1.0, *, out_dtype=np.float32):
    """(a * scale_a) @ (b * scale_b) for fp8 a [M, K] and b [K, N] (float8_e4m3, float8_e4m3fn or
    float8_e5m2, mixable), exact products and fp32 accumulation.

    scale_a: a scalar or [M, 1] (per row of a); scale_b: a scalar or [1, N] (per column of b). The
    scales multiply the fp32 sums as PSUM is copied out (scalars are folded into one factor).
    Tiling as `matmul`. Tolerance against float64: K * 2^-23 * (|A| @ |B|) * |scales|.
    """
    a = as_array("matmul_fp8", "a", a, FP8_DTYPES)
    b = as_array("matmul_fp8", "b", b, FP8_DTYPES)
    odt = _out_dtype("matmul_fp8", out_dtype)
    if a.ndim != 2 or b.ndim != 2:
        fail("matmul_fp8", f"a and b must be 2-D ([M, K] and [K, N]); got {a.shape} and {b.shape}")
    a3, b3, shape = _batched("matmul_fp8", a, b)
    M, N = a.shape[0], b.shape[1]
    sa = _scale("matmul_fp8", "scale_a", scale_a, M, N, 1, "row")
    sb = _scale("matmul_fp8", "scale_b", scale_b, M, N, 1, "column")
    factor = (sa if isinstance(sa, float) else 1.0) * (sb if isinstance(sb, float) else 1.0)
    sa_arr = sa if not isinstance(sa, float) else None
    sb_arr = sb if not isinstance(sb, float) else None
    if factor != 1.0:                                 # fold scalar scales into whichever array exists
        if sa_arr is not None:
            sa_arr = (sa_arr * np.float32(factor)).astype(np.float32)
        elif sb_arr is not None:
            sb_arr = (sb_arr * np.float32(factor)).astype(np.float32)
        else:
            sa_arr = np.full((1, M, 1), factor, np.float32)
    return Call(matmul_kernel, (a3, b3, sa_arr, sb_arr, "fp8", odt), lambda r: r.reshape(shape))


# ---------------------------------------------------------------- fp8 quantisation

QCHUNK = 2048           # columns per tile in quantize_fp8's two passes
_TINY = 2.0 ** -100     # amax floor: an all-zero row/column/tensor gets a tiny scale and zero codes


def _abs_tile(x, i, c0, cw, valid):
    ip = nl.arange(P_ROWS)[:, None]
    ic = nl.arange(cw)[None, :]
    return nl.abs(nl.load(x[i * P_ROWS + ip, c0 + ic], mask=valid, dtype=nl.float32), mask=valid)


def _column_max_row(acc, cw):
    """[128, cw] -> [1, cw]: the max over the partitions of each column (Tensor Engine transposes)."""
    row = nl.ndarray((1, cw), dtype=nl.float32)
    for s0 in range(0, cw, P_ROWS):
        sw = min(P_ROWS, cw - s0)
        colmax = nisa.tensor_reduce(np.max, nisa.nc_transpose(acc[:, s0:s0 + sw], engine=nisa.tensor_engine),
                                    axis=1, keepdims=True)
        row[0:1, s0:s0 + sw] = nl.copy(nisa.nc_transpose(colmax, engine=nisa.tensor_engine))
    return row


P_ROWS = 128


@nki.jit
def quantize_kernel(x, fp8, fmax, per):
    """codes = saturate(x / scale) in fp8, scale = max(amax, 2^-100) / fmax per tensor / row / column."""
    rows, cols = x.shape
    codes = nl.ndarray(x.shape, dtype=fp8, buffer=nl.shared_hbm)
    sshape = {"tensor": (1, 1), "row": (rows, 1), "column": (1, cols)}[per]
    scales = nl.ndarray(sshape, dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P_ROWS)[:, None]
    chunks = [(c0, min(QCHUNK, cols - c0)) for c0 in range(0, cols, QCHUNK)]
    ntiles = math.ceil(rows / P_ROWS)
    inv_fmax = 1.0 / fmax
    if per == "row":
        for i in nl.affine_range(ntiles):
            valid = i * P_ROWS + ip < rows
            amax = nl.zeros((P_ROWS, 1), dtype=nl.float32)
            for c0, cw in chunks:
                part = nisa.tensor_reduce(np.max, _abs_tile(x, i, c0, cw, valid), axis=1, keepdims=True, mask=valid)
                amax[...] = nl.maximum(amax, part, mask=valid)
            scale = nl.multiply(nl.maximum(amax, _TINY, mask=valid), inv_fmax, mask=valid)
            nl.store(scales[i * P_ROWS + ip, nl.arange(1)[None, :]], value=scale, mask=valid)
            for c0, cw in chunks:
                _quantize_tile(x, codes, i, c0, cw, valid, scale, fmax, fp8, rows)
        return codes, scales
    # per tensor / per column: a first pass folds |x| over the row tiles, a second one quantises
    srow = []
    for c0, cw in chunks:
        acc = nl.zeros((P_ROWS, cw), dtype=nl.float32)
        for i in nl.sequential_range(ntiles):
            valid = i * P_ROWS + ip < rows
            acc[...] = nl.maximum(acc, _abs_tile(x, i, c0, cw, valid), mask=valid)
        srow.append(_column_max_row(acc, cw))
    if per == "tensor":
        amax = nl.zeros((1, 1), dtype=nl.float32)
        for r in srow:
            amax[...] = nl.maximum(amax, nisa.tensor_reduce(np.max, r, axis=1, keepdims=True))
        s11 = nl.multiply(nl.maximum(amax, _TINY), inv_fmax)
        nl.store(scales, value=s11)
        scale = s11.broadcast_to((P_ROWS, 1))
    for k, (c0, cw) in enumerate(chunks):
        if per == "column":
            s_row = nl.multiply(nl.maximum(srow[k], _TINY), inv_fmax)
            nl.store(scales[nl.arange(1)[:, None], c0 + nl.arange(cw)[None, :]], value=s_row)
            scale_k = s_row.broadcast_to((P_ROWS, cw))
        for i in nl.affine_range(ntiles):
            valid = i * P_ROWS + ip < rows
            _quantize_tile(x, codes, i, c0, cw, valid, scale if per == "tensor" else scale_k, fmax, fp8, rows)
    return codes, scales


def _quantize_tile(x, codes, i, c0, cw, valid, scale, fmax, fp8, rows):
    ip = nl.arange(P_ROWS)[:, None]
    ic = nl.arange(cw)[None, :]
    t = nl.load(x[i * P_ROWS + ip, c0 + ic], mask=valid, dtype=nl.float32)
    q = nl.minimum(nl.maximum(nl.divide(t, scale, mask=valid), -fmax, mask=valid), fmax, mask=valid)
    nl.store(codes[i * P_ROWS + ip, c0 + ic], value=nl.copy(q, dtype=fp8, mask=valid), mask=valid)


@entry
def quantize_fp8(x, dtype=ml_dtypes.float8_e4m3, axis=None):
    """(codes, scales) with x ≈ codes * scales: amax scaling to the fp8 format's largest finite value,
    saturating (values beyond ±max clamp to ±max; NaN stays NaN).

    axis=None: one scale for the tensor (returned as a Python float); axis=1 / -1 (2-D x): one per
    row, scales [M, 1] (the scale_a layout of matmul_fp8); axis=0: one per column, scales [1, N]
    (scale_b's layout). scale = max(amax, 2^-100) / max(dtype). Codes are x / scale rounded once
    (fp32 division, then ml_dtypes' round-to-nearest-even conversion).
    """
    fp8 = np.dtype(dtype)
    if fp8 not in FP8_DTYPES:
        fail("quantize_fp8", f"dtype {fp8} is not an fp8 format; use float8_e4m3, float8_e4m3fn or float8_e5m2")
    x = as_array("quantize_fp8", "x", x, FLOAT_DTYPES)
    shape = x.shape
    if axis is None:
        per, x2 = "tensor", x.reshape(1, -1) if x.ndim < 2 else x.reshape(-1, x.shape[-1])
    else:
        if x.ndim != 2 or axis not in (0, 1, -1, -2):
            fail("quantize_fp8", f"axis={axis!r} needs a 2-D x (got shape {shape}); axis=1 gives per-row "
                                 "scales, axis=0 per-column scales")
        per, x2 = ("row" if axis in (1, -1) else "column"), x
    if x2.size == 0:
        fail("quantize_fp8", f"x of shape {shape} is empty: there is no amax to scale by")
    fmax = float(ml_dtypes.finfo(fp8).max)

    def finish(r):
        codes, scales = r
        return codes.reshape(shape), (float(scales.reshape(())) if per == "tensor" else scales)
    return Call(quantize_kernel, (x2, fp8, fmax, per), finish)
