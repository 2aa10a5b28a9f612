"""Normalisations: `rmsnorm(x, weight, eps)`, `layernorm(x, weight, bias, eps)` and their kernels.

Part of nki_lite's stdlib: kernels written in the DSL itself (legacy dialect). Rows of x (every
leading axis flattened) go 128 to a tile on the partitions, the normalised axis D on the free axis;
weight and bias are loaded once into a [1, D] tile and broadcast over the partitions.

Numerics: fp32 throughout (bf16 inputs widened on load), one rounding to x's dtype at the end.
- rmsnorm: y = x * rsqrt(sum(x^2) / D + eps) * weight; the sum of squares comes from the activation
  instruction's fp32 reduction.
- layernorm: mean and (biased) variance from nisa.bn_stats over 512-element chunks combined by
  nisa.bn_aggr (the hardware's Welford-style statistics), then y = (x - mean) * rsqrt(var + eps) *
  weight + bias.
Rows up to `ROW_FIT` wide are read once; wider rows are read twice (statistics, then output).
Ragged row tails are masked; the ragged last column chunk is its own narrower tile.
"""
from __future__ import annotations

import math

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl

from ._api import FLOAT_DTYPES, Call, as_array, entry, fail, rows_view

P = 128
ROW_FIT = 8192          # rows up to this width stay on chip between the statistics and the output
STATS = 512             # nl.tile_size.bn_stats_fmax: bn_stats reads at most 512 elements per partition


@nki.jit
def rmsnorm_tutorial(a_tensor, g_tensor):
    """out = a * rsqrt(mean(a^2, axis=1)) * g, rows in tiles of 128 with a masked ragged tail (the
    tutorial's form, no eps; `rmsnorm` is the general entry point)."""
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


def _chunks(width: int, size: int):
    """(start, width) of the column chunks covering [0, width): full chunks, then the ragged tail."""
    return [(c, min(size, width - c)) for c in range(0, width, size)]


def _row_vector(v, width):
    """A [D] HBM vector as a [P, D] fp32 tile (one load, broadcast over the partitions)."""
    iw = nl.arange(1)[:, None]
    iy = nl.arange(width)[None, :]
    return nl.load(v.reshape((1, width))[iw, iy], dtype=nl.float32).broadcast_to((P, width))


def _load_rows(x, i, c0, width, valid):
    ip = nl.arange(P)[:, None]
    ic = nl.arange(width)[None, :]
    return nl.load(x[i * P + ip, c0 + ic], mask=valid, dtype=nl.float32)


def _store_rows(out, i, c0, width, valid, value):
    ip = nl.arange(P)[:, None]
    ic = nl.arange(width)[None, :]
    nl.store(out[i * P + ip, c0 + ic], value=value, mask=valid)


@nki.jit
def rmsnorm_kernel(x, weight, eps):
    rows, width = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    w = _row_vector(weight, width)
    eps_t = nl.full((P, 1), float(eps), dtype=nl.float32)
    ip = nl.arange(P)[:, None]
    resident = width <= ROW_FIT
    for i in nl.affine_range(math.ceil(rows / P)):
        valid = i * P + ip < rows
        if resident:
            t = _load_rows(x, i, 0, width, valid)
            ss = nl.ndarray((P, 1), dtype=nl.float32)
            nisa.activation(op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss, mask=valid)
        else:
            ss = nl.zeros((P, 1), dtype=nl.float32)
            for c0, cw in _chunks(width, ROW_FIT):
                part = nl.ndarray((P, 1), dtype=nl.float32)
                nisa.activation(op=nl.square, data=_load_rows(x, i, c0, cw, valid), reduce_op=nl.add,
                                reduce_res=part, mask=valid)
                ss[...] = nl.add(ss, part, mask=valid)
        rstd = nisa.activation(op=nl.rsqrt, data=ss, scale=1.0 / width, bias=eps_t, mask=valid)
        for c0, cw in ([(0, width)] if resident else _chunks(width, ROW_FIT)):
            src = t if resident else _load_rows(x, i, c0, cw, valid)
            y = nl.multiply(nl.multiply(src, rstd, mask=valid), w[:, c0:c0 + cw], dtype=x.dtype, mask=valid)
            _store_rows(out, i, c0, cw, valid, y)
    return out


@nki.jit
def layernorm_kernel(x, weight, bias, eps):
    rows, width = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    w = _row_vector(weight, width)
    b = _row_vector(bias, width)
    eps_t = nl.full((P, 1), float(eps), dtype=nl.float32)
    ip = nl.arange(P)[:, None]
    i6 = nl.arange(6)[None, :]
    resident = width <= ROW_FIT
    stat_chunks = _chunks(width, STATS)
    for i in nl.affine_range(math.ceil(rows / P)):
        valid = i * P + ip < rows
        stats = nl.ndarray((P, 6 * len(stat_chunks)), dtype=nl.float32)
        t = _load_rows(x, i, 0, width, valid) if resident else None
        for k, (c0, cw) in enumerate(stat_chunks):
            src = t[:, c0:c0 + cw] if resident else _load_rows(x, i, c0, cw, valid)
            stats[ip, 6 * k + i6] = nisa.bn_stats(src, mask=valid)
        mv = nisa.bn_aggr(stats, mask=valid)
        rstd = nisa.activation(op=nl.rsqrt, data=mv[:, 1:2], bias=eps_t, mask=valid)
        for c0, cw in ([(0, width)] if resident else _chunks(width, ROW_FIT)):
            src = t if resident else _load_rows(x, i, c0, cw, valid)
            centred = nisa.tensor_scalar(src, nl.subtract, mv[:, 0:1], op1=nl.multiply, operand1=rstd, mask=valid)
            y = nl.add(nl.multiply(centred, w[:, c0:c0 + cw], mask=valid), b[:, c0:c0 + cw], dtype=x.dtype,
                       mask=valid)
            _store_rows(out, i, c0, cw, valid, y)
    return out


def _check_vector(fn: str, name: str, v, width: int):
    v = as_array(fn, name, v, FLOAT_DTYPES)
    if v.shape != (width,):
        fail(fn, f"argument '{name}' has shape {v.shape}; expected ({width},) to match x's last axis")
    return v


def _norm_input(fn: str, x):
    x = as_array(fn, "x", x, FLOAT_DTYPES[:2])
    if x.ndim == 0 or x.shape[-1] == 0:
        fail(fn, f"argument 'x' has shape {x.shape}; expected [..., D] with D >= 1")
    return x


@entry
def rmsnorm(x, weight, eps=1e-6):
    """RMS normalisation over the last axis: x * rsqrt(mean(x^2) + eps) * weight.

    x: [..., D] fp32 or bf16 (leading axes are rows); weight: [D] (any float dtype). Returns x's
    shape and dtype. Tiling: 128 rows per tile; rows up to 8192 wide are read once, wider ones twice.
    Numerics: fp32 arithmetic, one rounding to x's dtype; see docs/stdlib.md for the tolerance.
    """
    x = _norm_input("rmsnorm", x)
    w = _check_vector("rmsnorm", "weight", weight, x.shape[-1])
    return Call(rmsnorm_kernel, (rows_view(x), w, float(eps)), lambda r: r.reshape(x.shape))


@entry
def layernorm(x, weight, bias, eps=1e-5):
    """Layer normalisation over the last axis: (x - mean) * rsqrt(var + eps) * weight + bias.

    x: [..., D] fp32 or bf16; weight, bias: [D]. Mean and biased variance from bn_stats/bn_aggr over
    512-wide chunks. Returns x's shape and dtype; fp32 arithmetic, one rounding at the end.
    """
    x = _norm_input("layernorm", x)
    w = _check_vector("layernorm", "weight", weight, x.shape[-1])
    b = _check_vector("layernorm", "bias", bias, x.shape[-1])
    return Call(layernorm_kernel, (rows_view(x), w, b, float(eps)), lambda r: r.reshape(x.shape))
