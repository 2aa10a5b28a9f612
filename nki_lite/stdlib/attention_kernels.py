"""Flash attention forward: `attention(q, k, v, causal=False, scale=None)` and its DSL kernel.

Part of nki_lite's stdlib: a kernel written in the DSL itself (legacy dialect), shaped like the
flash-attention kernels of AWS's NKI samples. The [Sq, Sk] score matrix never reaches HBM.

Tiling, per (batch, kv head): K is DMA-transposed into [d, 512] blocks and V loaded as [128, d]
sub-tiles into block tensors, once for every query head of the group (GQA) when they fit in SBUF,
else per use. Query tiles of 128 rows go in lockstep groups of 4; block 0 is unrolled, the full key
blocks that no row masks run in one sequential loop, causal diagonal blocks and the ragged last
block are unrolled. Per 128-row query tile (Q transposed to [d, 128], the stationary operand):
  S = Q Kᵀ for one 512-key block               Tensor Engine, fp32 PSUM (one bank)
  neg = -scale * max(m, rowmax(S))              Vector Engine (one tensor_scalar after the reduce)
  P = exp(scale*S + neg), rowsum(P)             Scalar Engine, one activation instruction
  O = O * exp(scale*m + neg) + P V              P transposed on the Tensor Engine, four 128-key
                                                transposes into one PSUM bank, one copy to SBUF
  l = l * exp(scale*m + neg) + rowsum(P)        (O and l: one scalar_tensor_tensor each)
  m = max(m, rowmax(S))
and finally O / l. Instruction order within a group (what in-order engines see): the score matmuls
of every tile, then each tile's softmax step in turn (tile 0's exponentials run while the Vector
Engine reduces tile 1), then every transpose, then the copies and P V matmuls, then the updates —
no Tensor -> Scalar -> Tensor chain per 128 keys (trn2 model: Tensor Engine 25% -> 50% active at
S=4096, d=128, bf16; tests/test_attention_schedule.py pins the order). The first key block initialises m, l and O (no -inf arithmetic). Causal masking
is top-left aligned (key j attends to query i when j <= i, as torch's `is_causal`): key blocks
entirely above the diagonal are skipped, the diagonal blocks masked with affine_select (-inf).
Ragged Sq is masked; a ragged last key block is its own narrower block.

Numerics: scores and softmax in fp32; P enters the PV matmul in V's precision (fp32 for fp32
inputs, bf16 for bf16 and fp8 inputs; fp8 V is widened to bf16 exactly); output in q's dtype (fp32
for fp8 inputs). Tolerance: docs/stdlib.md.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl

from ._api import FLOAT_DTYPES, FP8_DTYPES, Call, as_array, entry, fail

QT = 128               # query rows per tile (partitions of S)
KB = 512               # keys per block (the moving operand's free size, one PSUM bank of fp32)
KV_FIT = 96 * 1024     # bytes per partition that hoisted K and V blocks of one kv head may take


def _sub_tiles(width: int):
    return [(s0, min(QT, width - s0)) for s0 in range(0, width, QT)]


class _KV:
    """K and V of one (batch, kv head). Full 512-key blocks are addressed by a block index that may be
    a loop variable: K as [d, 512] transposed blocks, V as [128, d] sub-tiles; hoisted into block
    tensors once per kv head when they fit in SBUF (`hoist`), else loaded at every use. The ragged
    last block (Sk % 512 keys) is its own, narrower tiles."""

    def __init__(self, k, v, bi, g, d, pv_dtype, hoist):
        self.k, self.v, self.bi, self.g, self.d, self.pv_dtype = k, v, bi, g, d, pv_dtype
        Sk = k.shape[2]
        self.full, self.tail = Sk // KB, Sk % KB
        self.hoist = hoist and self.full > 0
        if self.hoist:
            self.kT_all = nl.ndarray((self.full, nl.par_dim(d), KB), dtype=k.dtype, buffer=nl.sbuf)
            self.v_all = nl.ndarray((self.full * (KB // QT), nl.par_dim(QT), d), dtype=pv_dtype, buffer=nl.sbuf)
            idd = nl.arange(d)[None, :]
            for j in nl.affine_range(self.full):
                self.kT_all[j, :, :] = self._load_kT(j * KB, KB)
                for s in range(KB // QT):
                    self.v_all[j * (KB // QT) + s, :, :] = self._load_v(j * KB + s * QT, QT)
        if self.tail:
            self.kT_tail = self._load_kT(self.full * KB, self.tail)
            self.v_tail = [self._load_v(self.full * KB + s0, sw) for s0, sw in _sub_tiles(self.tail)]

    def _load_kT(self, j0, w):
        ik = nl.arange(w)[:, None]
        idd = nl.arange(self.d)[None, :]
        return nl.load_transpose2d(self.k[self.bi, self.g, j0 + ik, idd])

    def _load_v(self, r0, rows):
        ir_ = nl.arange(rows)[:, None]
        idd = nl.arange(self.d)[None, :]
        return nl.load(self.v[self.bi, self.g, r0 + ir_, idd], dtype=self.pv_dtype)

    def kT(self, blk):
        """K transposed for key block `blk` (an int or a loop variable; "tail" for the ragged block)."""
        if isinstance(blk, str):              # "tail" (a loop variable compares symbolically)
            return self.kT_tail
        return self.kT_all[blk, :, :] if self.hoist else self._load_kT(blk * KB, KB)

    def v_rows(self, blk, s):
        """Rows [128 s, 128 s + 128) of key block `blk` of V (sub-tile s of the ragged block for "tail")."""
        if isinstance(blk, str):              # "tail" (a loop variable compares symbolically)
            return self.v_tail[s]
        return self.v_all[blk * (KB // QT) + s, :, :] if self.hoist else self._load_v(blk * KB + s * QT, QT)


def _block_keys(kv, blk):
    """(first key, width) of a key block."""
    return (kv.full * KB, kv.tail) if isinstance(blk, str) else (blk * KB, KB)


def _scores(r, kv, blk, masked):
    """S = Q Kᵀ for one key block in PSUM; on a causal diagonal block, future keys are -inf."""
    s = nisa.nc_matmul(r.qT, kv.kT(blk))
    if masked:
        j0, w = _block_keys(kv, blk)
        ip = nl.arange(QT)[:, None]
        jf = nl.arange(w)[None, :]
        s = nisa.affine_select(pred=(r.i * QT + ip - (j0 + jf) >= 0), on_true_tile=s, on_false_value=-np.inf,
                               dtype=nl.float32)
    return s


def _pv_group(ps, kv, blk, d, pv_dtype):
    """P V for every tile of a group. A full block's four transposes go into one PSUM bank per tile, copied to SBUF in one instruction.
    Phase by phase over the group, so that the Tensor Engine runs its transposes back to back while
    the activations finish, instead of a transpose -> copy -> matmul chain per 128 keys (which made
    every sub-tile wait on two cross-engine hops). A ragged block goes sub-tile by sub-tile.
    Returns P V per tile (fp32 PSUM)."""
    _, w = _block_keys(kv, blk)
    if w != KB:
        return [_pv(p, kv, blk, d, pv_dtype) for p in ps]
    subs = range(KB // QT)

    def transposed(p):
        tp = nl.ndarray((QT, KB), dtype=p.dtype, buffer=nl.psum)
        for s in subs:
            tp[:, s * QT:(s + 1) * QT] = nisa.nc_transpose(p[:, s * QT:(s + 1) * QT], engine=nisa.tensor_engine)
        return tp

    def pv(tp):
        pt = nl.copy(tp, dtype=pv_dtype)
        acc = nl.zeros((QT, d), nl.float32, buffer=nl.psum)
        for s in subs:
            acc += nisa.nc_matmul(pt[:, s * QT:(s + 1) * QT], kv.v_rows(blk, s))
        return acc

    tps = [transposed(p) for p in ps]
    return [pv(tp) for tp in tps]


def _pv(p, kv, blk, d, pv_dtype):
    """P [QT, w] @ V[block] -> [QT, d] fp32 in PSUM, P transposed 128 keys at a time."""
    _, w = _block_keys(kv, blk)
    acc = nl.zeros((QT, d), nl.float32, buffer=nl.psum)
    for s, (s0, sw) in enumerate(_sub_tiles(w)):
        pT = nl.copy(nisa.nc_transpose(p[:, s0:s0 + sw], engine=nisa.tensor_engine), dtype=pv_dtype)
        acc += nisa.nc_matmul(pT, kv.v_rows(blk, s))
    return acc


class _Rows:
    """One 128-row query tile's state: Q transposed to [d, 128], the row mask, running m, l and O."""

    def __init__(self, q, bi, h, i, Sq, d):
        iq = nl.arange(QT)[:, None]
        idd = nl.arange(d)[None, :]
        self.i = i
        self.valid = i * QT + iq < Sq
        rows_f = i * QT + nl.arange(QT)[None, :] < Sq          # the transposed tile's query axis is free
        self.qT = nl.load_transpose2d(q[bi, h, i * QT + iq, idd], mask=rows_f)
        self.m = nl.ndarray((QT, 1), dtype=nl.float32)
        self.l = nl.ndarray((QT, 1), dtype=nl.float32)
        self.o = nl.ndarray((QT, d), dtype=nl.float32)


def _tile_softmax(r, s, first, scale):
    """One tile's online-softmax step for a key block: block max, running max, P = exp(scale*S -
    scale*m_new) and its row sum; later blocks also exp(scale * (m_old - m_new)). Returns
    (P, alpha, row sum, block max); the first block writes m and l directly (alpha None)."""
    bm = nisa.tensor_reduce(np.max, s, axis=1, keepdims=True, mask=r.valid)
    if first:
        r.m[...] = nl.copy(bm, mask=r.valid)
        neg = nl.multiply(r.m, -scale, mask=r.valid)
        p = nisa.activation(op=nl.exp, data=s, scale=scale, bias=neg, reduce_op=nl.add, reduce_res=r.l, mask=r.valid)
        return p, None, None, None
    # -scale * max(m_old, bm) in one instruction; m itself is updated after the P V phase
    neg = nisa.tensor_scalar(bm, nl.maximum, r.m, reverse0=True, op1=nl.multiply, operand1=-scale, mask=r.valid)
    alpha = nisa.activation(op=nl.exp, data=r.m, scale=scale, bias=neg, mask=r.valid)
    part = nl.ndarray((QT, 1), dtype=nl.float32)
    p = nisa.activation(op=nl.exp, data=s, scale=scale, bias=neg, reduce_op=nl.add, reduce_res=part, mask=r.valid)
    return p, alpha, part, bm


def _fold_block(rows, kv, blk, first, masked, scale, d, pv_dtype):
    """One key block for every tile of a group (module docstring): scores for every tile, then each
    tile's softmax step in turn (so tile 0's exponentials start while the Vector Engine reduces tile
    1), then P V phase by phase; the first block initialises m, l and O, later ones rescale them by
    exp(scale * (m_old - m_new))."""
    scores = [_scores(r, kv, blk, masked) for r in rows]
    steps = [_tile_softmax(r, s, first, scale) for r, s in zip(rows, scores)]
    pvs = _pv_group([st[0] for st in steps], kv, blk, d, pv_dtype)
    for r, (_, alpha, part, bm), pv in zip(rows, steps, pvs):
        if first:
            r.o[...] = nl.copy(pv, mask=r.valid)
            continue
        # l * alpha + part and O * alpha + P V, each one instruction (the product rounded to fp32
        # before the add, as two instructions would)
        r.l[...] = nisa.scalar_tensor_tensor(data=r.l, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=part,
                                             mask=r.valid)
        r.o[...] = nisa.scalar_tensor_tensor(data=r.o, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=pv,
                                             mask=r.valid)
        r.m[...] = nl.maximum(r.m, bm, mask=r.valid)


def _plan_blocks(kv, lo_row, hi_row, causal):
    """The key blocks a group of query rows [lo_row, hi_row] needs, as (looped full blocks 1..u-1,
    unrolled [(blk, masked)]): block 0 first; full blocks no row of the group masks run in one
    sequential loop; causal diagonal blocks and the ragged tail block are unrolled."""
    blocks = list(range(kv.full)) + (["tail"] if kv.tail else [])
    need, masked = [], {}
    for blk in blocks:
        j0, w = _block_keys(kv, blk)
        if causal and j0 > hi_row:
            continue                                        # every key of the block is in every row's future
        need.append(blk)
        masked[blk] = causal and j0 + w - 1 > lo_row
    loop_end = 1
    while loop_end < len(need) and not isinstance(need[loop_end], str) and not masked[need[loop_end]]:
        loop_end += 1
    return need[0], masked[need[0]], loop_end, [(b, masked[b]) for b in need[loop_end:]]


def _query_group(q, out, kv, bi, h, tiles, lo_row, hi_row, Sq, d, scale, causal, pv_dtype):
    """Flash attention for a group of query tiles in lockstep: each phase of a key block is issued
    for every tile of the group before the next phase, so each engine's in-order stream holds
    independent work while the cross-engine dependencies of one tile resolve."""
    rows = [_Rows(q, bi, h, i, Sq, d) for i in tiles]
    first, first_masked, loop_end, rest = _plan_blocks(kv, lo_row, hi_row, causal)
    _fold_block(rows, kv, first, True, first_masked, scale, d, pv_dtype)
    for j in nl.sequential_range(1, loop_end):
        _fold_block(rows, kv, j, False, False, scale, d, pv_dtype)
    for blk, masked in rest:
        _fold_block(rows, kv, blk, False, masked, scale, d, pv_dtype)
    iq = nl.arange(QT)[:, None]
    idd = nl.arange(d)[None, :]
    for r in rows:
        inv = nl.reciprocal(r.l, mask=r.valid)
        nl.store(out[bi, h, r.i * QT + iq, idd], value=nl.multiply(r.o, inv, dtype=out.dtype, mask=r.valid),
                 mask=r.valid)


GROUP = KB // QT       # query tiles in lockstep: 4, so a causal group shares its key blocks


@nki.jit
def flash_attention_kernel(q, k, v, scale, causal, pv_dtype, out_dtype):
    """out[B, H, Sq, d] = softmax(scale * q kᵀ (+ causal mask)) v, kv heads shared by H / Hkv heads."""
    B, H, Sq, d = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    group = H // Hkv
    out = nl.ndarray((B, H, Sq, d), dtype=out_dtype, buffer=nl.shared_hbm)
    kv_bytes = Sk * 4 + math.ceil(Sk / QT) * d * 4        # per partition, fp32 upper bound
    hoist = kv_bytes <= KV_FIT
    nq = math.ceil(Sq / QT)
    G = min(GROUP, nq)
    for bi in nl.affine_range(B):
        for g in nl.affine_range(Hkv):
            kv = _KV(k, v, bi, g, d, pv_dtype, hoist)
            for hh in nl.affine_range(group):
                h = g * group + hh
                if causal:          # static groups: each has its own key-block plan (blocks above skipped)
                    for t0 in range(0, nq, G):
                        tiles = list(range(t0, min(nq, t0 + G)))
                        _query_group(q, out, kv, bi, h, tiles, t0 * QT, min(Sq, (tiles[-1] + 1) * QT) - 1, Sq, d,
                                     scale, causal, pv_dtype)
                else:
                    for gi in nl.affine_range(math.ceil(nq / G)):
                        _query_group(q, out, kv, bi, h, [gi * G + t for t in range(G)], 0, Sq - 1, Sq, d, scale,
                                     causal, pv_dtype)
    return out


def _as_4d(name, x):
    if x.ndim == 2:
        return x[None, None]
    if x.ndim == 4:
        return x
    fail("attention", f"argument '{name}' has shape {x.shape}; expected [B, H, S, d] or [S, d]")


@entry
def attention(q, k, v, *, causal=False, scale=None):
    """softmax(q kᵀ * scale) v, flash-attention style (online softmax over 512-key blocks).

    q: [B, H, Sq, d]; k, v: [B, Hkv, Sk, d] with Hkv dividing H (grouped-query attention); 2-D
    [S, d] operands are one batch and one head. d <= 128; fp32, bf16 or fp8 (float8_e4m3 /
    float8_e4m3fn / float8_e5m2) inputs, one dtype for q, k and v; any Sq, Sk. scale defaults to
    1/sqrt(d) and must be positive. causal=True masks key j > query i (top-left aligned) and skips
    the key blocks that are masked entirely, about half the work for Sq == Sk.
    Output: q's dtype (fp32 for fp8 inputs), q's shape.
    """
    dts = FLOAT_DTYPES[:2] + FP8_DTYPES
    q = as_array("attention", "q", q, dts)
    k = as_array("attention", "k", k, dts)
    v = as_array("attention", "v", v, dts)
    if not (q.dtype == k.dtype == v.dtype):
        fail("attention", f"q, k and v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    shape = q.shape
    q4, k4, v4 = _as_4d("q", q), _as_4d("k", k), _as_4d("v", v)
    B, H, Sq, d = q4.shape
    if k4.shape != v4.shape or k4.shape[0] != B or k4.shape[3] != d:
        fail("attention", f"k {k.shape} and v {v.shape} must both be [B={B}, Hkv, Sk, d={d}] for q {q.shape}")
    Hkv, Sk = k4.shape[1], k4.shape[2]
    if Hkv == 0 or H % Hkv:
        fail("attention", f"the number of kv heads ({Hkv}) must divide the number of query heads ({H})")
    if not 1 <= d <= 128:
        fail("attention", f"head dimension d={d} is not supported; d must be in [1, 128]")
    if Sk == 0 or Sq == 0:
        fail("attention", f"empty sequence (Sq={Sq}, Sk={Sk}): softmax over zero keys is undefined")
    sc = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not sc > 0 or not math.isfinite(sc):
        fail("attention", f"scale={scale!r} must be a positive finite number")
    is_fp8 = q.dtype in FP8_DTYPES
    pv_dtype = np.dtype(np.float32) if q.dtype == np.float32 else np.dtype(ml_dtypes.bfloat16)
    out_dtype = np.dtype(np.float32) if is_fp8 else q.dtype
    return Call(flash_attention_kernel, (q4, k4, v4, sc, bool(causal), pv_dtype, out_dtype),
                lambda r: r.reshape(shape))
