"""Softmax: `softmax(x, axis=-1)` and the DSL kernels behind it.

Part of nki_lite's stdlib: kernels written in the DSL itself (legacy dialect), tiled as a
NeuronCore wants them: 128 rows per tile on the partitions, the row on the free axis.

Numerics: fp32 (bf16 inputs are widened on load, the result rounded once to the input dtype).
y = exp(x - max) * (1 / sum): the max is reduced with negate=True so that it is the activation's
bias, and one activation instruction produces exp(x - max) and its fp32 row sum. NaN in a row makes
the row NaN; a +inf makes it NaN (inf - inf), a row of -inf is NaN — all as numpy's
`e = exp(x - max); e / e.sum()`.

Two forms:
- `softmax_rows`: a row fits on chip (`ROW_FIT` elements): one HBM read and one write per element.
- `softmax_online`: wider rows, in column chunks of `CHUNK`: a sequential pass keeps the running
  max m and the running sum s (s <- s * exp(m_old - m_new) + sum(exp(x - m_new))), a second pass
  re-reads each chunk and writes exp(x - m) / s. The ragged last chunk is its own, narrower tile.
Ragged row tails are masked (rows beyond the tensor are never loaded or stored).
"""
from __future__ import annotations

import math

import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl

from ._api import FLOAT_DTYPES, Call, as_array, entry, fail

P = 128            # rows per tile (partitions)
ROW_FIT = 8192     # widest row done in one pass (three fp32 tiles of 32 KiB per partition)
CHUNK = 2048       # column chunk of the online form


@nki.jit
def row_softmax(x):
    """Numerically stable softmax over each row of a 2-D fp32 tensor, 128 rows per tile, ragged last
    tile masked (the tutorial-sized kernel; `softmax` is the general entry point)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(128)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / 128)):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        neg_max = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True)
        total = nl.ndarray((128, 1), dtype=nl.float32)
        e = nisa.activation(op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        y = nl.multiply(e, nl.reciprocal(total), mask=valid)
        nl.store(out[i * 128 + ip, ic], value=y, mask=valid)
    return out


@nki.jit
def softmax_rows(x):
    """softmax over the last axis of x [rows, cols], cols <= ROW_FIT: one read, one write."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / P)):
        valid = i * P + ip < rows
        t = nl.load(x[i * P + ip, ic], mask=valid, dtype=nl.float32)
        neg_max = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True, mask=valid)
        total = nl.ndarray((P, 1), dtype=nl.float32)
        e = nisa.activation(op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total, mask=valid)
        inv = nl.reciprocal(total, mask=valid)
        y = nl.multiply(e, inv, dtype=x.dtype, mask=valid)
        nl.store(out[i * P + ip, ic], value=y, mask=valid)
    return out


def _chunk_stats(x, i, c0, width, valid, m, s, first):
    """Fold columns [c0, c0 + width) of row tile i into the running max m and sum s ([P, 1] fp32)."""
    ip = nl.arange(P)[:, None]
    ic = nl.arange(width)[None, :]
    t = nl.load(x[i * P + ip, c0 + ic], mask=valid, dtype=nl.float32)
    cm = nisa.tensor_reduce(np.max, t, axis=1, keepdims=True, mask=valid)
    if first:
        m[...] = nl.copy(cm, mask=valid)
        neg = nl.negative(m, mask=valid)
        nisa.activation(op=nl.exp, data=t, bias=neg, reduce_op=nl.add, reduce_res=s, mask=valid)
        return
    m_new = nl.maximum(m, cm, mask=valid)
    neg = nl.negative(m_new, mask=valid)
    alpha = nisa.activation(op=nl.exp, data=m, bias=neg, mask=valid)           # exp(m_old - m_new)
    part = nl.ndarray((P, 1), dtype=nl.float32)
    nisa.activation(op=nl.exp, data=t, bias=neg, reduce_op=nl.add, reduce_res=part, mask=valid)
    s[...] = nl.add(nl.multiply(s, alpha, mask=valid), part, mask=valid)
    m[...] = nl.copy(m_new, mask=valid)


def _chunk_write(x, out, i, c0, width, valid, neg_max, inv):
    ip = nl.arange(P)[:, None]
    ic = nl.arange(width)[None, :]
    t = nl.load(x[i * P + ip, c0 + ic], mask=valid, dtype=nl.float32)
    e = nisa.activation(op=nl.exp, data=t, bias=neg_max, mask=valid)
    nl.store(out[i * P + ip, c0 + ic], value=nl.multiply(e, inv, dtype=out.dtype, mask=valid), mask=valid)


@nki.jit
def softmax_online(x):
    """softmax over the last axis of x [rows, cols] for rows wider than ROW_FIT: running max/sum over
    CHUNK-wide column chunks (sequential), then a second pass that writes each chunk."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    full, tail = cols // CHUNK, cols % CHUNK
    ip = nl.arange(P)[:, None]
    for i in nl.affine_range(math.ceil(rows / P)):
        valid = i * P + ip < rows
        m = nl.ndarray((P, 1), dtype=nl.float32)
        s = nl.ndarray((P, 1), dtype=nl.float32)
        _chunk_stats(x, i, 0, CHUNK, valid, m, s, first=True)
        for j in nl.sequential_range(1, full):
            _chunk_stats(x, i, j * CHUNK, CHUNK, valid, m, s, first=False)
        if tail:
            _chunk_stats(x, i, full * CHUNK, tail, valid, m, s, first=False)
        neg_max = nl.negative(m, mask=valid)
        inv = nl.reciprocal(s, mask=valid)
        for j in nl.affine_range(full):
            _chunk_write(x, out, i, j * CHUNK, CHUNK, valid, neg_max, inv)
        if tail:
            _chunk_write(x, out, i, full * CHUNK, tail, valid, neg_max, inv)
    return out


@entry
def softmax(x, axis=-1):
    """Numerically stable softmax of x along `axis` (fp32 or bf16; the result has x's dtype).

    Layout: the softmax axis becomes the free axis and every other axis is flattened into rows, 128
    rows per tile (a copy only when `axis` is not the last axis). Rows up to 8192 wide take one HBM
    read and one write per element (`softmax_rows`); wider rows use the online form
    (`softmax_online`: running max and sum over 2048-wide chunks, then a second read).
    Numerics: fp32 arithmetic, one rounding to the output dtype; NaN/±inf rows behave as numpy's
    `exp(x - max) / sum`. Tolerance against a float64 reference: 8 ulp of fp32 relative per element
    (documented in docs/stdlib.md), exact bitwise JIT == interpreter.
    """
    x = as_array("softmax", "x", x, FLOAT_DTYPES[:2])
    if x.ndim == 0:
        fail("softmax", "argument 'x' is 0-d; softmax needs at least one axis")
    if not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        fail("softmax", f"axis={axis!r} is out of range for a {x.ndim}-D input of shape {x.shape}")
    ax = int(axis) % x.ndim
    moved = np.moveaxis(x, ax, -1)
    shape = moved.shape
    rows = np.ascontiguousarray(moved).reshape(-1, shape[-1])
    if rows.size == 0:
        return Call(lambda r: r, (np.empty(rows.shape, x.dtype),), lambda r: np.moveaxis(r.reshape(shape), -1, ax))
    kernel = softmax_rows if shape[-1] <= ROW_FIT else softmax_online
    return Call(kernel, (rows,), lambda r: np.moveaxis(r.reshape(shape), -1, ax))
