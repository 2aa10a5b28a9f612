"""Kernels in our own code that exercise the patterns of AWS's NKI tutorials (legacy dialect), with
their numpy references.

The kernels are built by `build(nki, nl, nisa, nt)` so the same source can be traced through
nki_lite's own modules (`KERNELS`, built at import) or through the legacy `neuronxcc.nki.*`
aliases installed by nki_lite.compat (tests/test_tutorial_patterns.py builds a second set).

Patterns:
- `layernorm`          : bn_stats over <=512-wide chunks written at offsets, one bn_aggr, a two-op
                         tensor_scalar (x - mean) * rsqrt(var + eps), gamma/beta; ragged row tiles
                         with masks on every instruction.
- `selective_scan`     : mamba-style SSM: exp(delta * A) via activation(scale=[P,1] tile), a
                         tensor_tensor_scan carried across sequence tiles of a sequential_range,
                         SBUF accumulation `acc[...] += ...` over an affine_range state loop.
- `block_transpose`    : a transposed matrix from 128x128 Tensor Engine nc_transpose blocks (PSUM),
                         ragged edges masked.
- `causal_attention`   : QK^T with nc_matmul, affine_select causal mask (nl.fp32.min), softmax with
                         activation(bias=-max) and tensor_reduce, P.V with nc_matmul after nc_transpose.
- `avgpool2d`          : 2-D average pooling through a 5-D nl.mgrid view and nl.sum(axis=[2, 4]),
                         channel tiles of 128 with masks.
- `configured`         : a frozen-dataclass config and an Enum as trace-time constants, a helper
                         function called from the kernel, a tuple return.
- `axpy_inplace`       : an nt.mutable_tensor parameter updated in place.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

F32 = np.float32


@dataclass(frozen=True)
class TileConfig:
    """Trace-time configuration: rows per tile and the pre-activation scale."""
    rows: int
    scale: float


class Act(enum.Enum):
    EXP = "exp"
    TANH = "tanh"
    SILU = "silu"


def build(nki, nl, nisa, nt):
    """Trace-ready kernels written against the given nki / language / isa / typing modules."""

    @nki.jit
    def layernorm(x, gamma, beta, eps):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
        P = nl.tile_size.pmax
        FB = nl.tile_size.bn_stats_fmax
        chunks = math.ceil(d / FB)
        ip = nl.arange(P)[:, None]
        jd = nl.arange(d)[None, :]
        jb = nl.arange(FB)[None, :]
        js = nl.arange(6)[None, :]
        one = nl.arange(1)[:, None]
        g_row = nl.load(gamma.reshape((1, d))[one, jd])
        b_row = nl.load(beta.reshape((1, d))[one, jd])
        for i in nl.affine_range(math.ceil(n / P)):
            live = i * P + ip < n
            t = nl.load(x[i * P + ip, jd], mask=live)
            stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32)
            for c in nl.affine_range(chunks):
                stats[ip, c * 6 + js] = nisa.bn_stats(t[ip, c * FB + jb], mask=live & (c * FB + jb < d),
                                                      dtype=nl.float32)
            mv = nisa.bn_aggr(stats, mask=live)
            mean = mv[ip, 0]
            rstd = nl.rsqrt(nl.add(mv[ip, 1], eps, mask=live), mask=live)
            norm = nisa.tensor_scalar(data=t, op0=np.subtract, operand0=mean, op1=np.multiply, operand1=rstd,
                                      dtype=nl.float32, mask=live)
            scaled = nl.multiply(norm, g_row.broadcast_to((P, d)), mask=live)
            y = nl.add(scaled, b_row.broadcast_to((P, d)), dtype=x.dtype, mask=live)
            nl.store(out[i * P + ip, jd], y, mask=live)
        return out

    @nki.jit
    def selective_scan(delta, u, A, B, C, seq_tile):
        batch, channels, L = delta.shape
        S = A.shape[1]
        P = min(channels, nl.tile_size.pmax)
        assert channels % P == 0 and L % seq_tile == 0
        out = nl.ndarray((batch, channels, L), dtype=delta.dtype, buffer=nl.shared_hbm)
        for b in nl.affine_range(batch):
            for c in nl.affine_range(channels // P):
                lo_c = c * P
                d_t = nl.load(delta[b, lo_c:lo_c + P, 0:L], dtype=nl.float32)
                u_t = nl.load(u[b, lo_c:lo_c + P, 0:L], dtype=nl.float32)
                du = nisa.tensor_tensor(d_t, u_t, op=nl.multiply)
                acc = nl.zeros((P, L), dtype=nl.float32)
                for s in nl.affine_range(S):
                    a_s = nl.load(A[lo_c:lo_c + P, s], dtype=nl.float32)          # [P, 1]
                    carry = nl.zeros((P, 1), dtype=nl.float32)
                    for t in nl.sequential_range(L // seq_tile):
                        cols = nl.ds(t * seq_tile, seq_tile)
                        decay = nisa.activation(op=nl.exp, data=d_t[:, cols], scale=a_s)
                        b_s = nl.load(B[b, s:s + 1, cols], dtype=nl.float32).broadcast_to((P, seq_tile))
                        drive = nisa.tensor_tensor(du[:, cols], b_s, op=nl.multiply)
                        h = nisa.tensor_tensor_scan(decay, drive, initial=carry, op0=np.multiply, op1=np.add)
                        carry[...] = h[:, seq_tile - 1]
                        c_s = nl.load(C[b, s:s + 1, cols], dtype=nl.float32).broadcast_to((P, seq_tile))
                        acc[:, cols] += nisa.tensor_tensor(h, c_s, op=nl.multiply)
                nl.store(out[b, lo_c:lo_c + P, 0:L], nl.copy(acc, dtype=delta.dtype))
        return out

    @nki.jit
    def block_transpose(x):
        M, N = x.shape
        out = nl.ndarray((N, M), dtype=x.dtype, buffer=nl.shared_hbm)
        B = nl.tile_size.pmax
        ip = nl.arange(B)[:, None]
        jf = nl.arange(B)[None, :]
        for i in nl.affine_range(math.ceil(M / B)):
            for j in nl.affine_range(math.ceil(N / B)):
                blk = nl.load(x[i * B + ip, j * B + jf], mask=(i * B + ip < M) & (j * B + jf < N))
                tp = nisa.nc_transpose(blk, engine=nisa.tensor_engine)
                blk_t = nl.copy(tp, mask=(j * B + ip < N) & (i * B + jf < M))
                nl.store(out[j * B + ip, i * B + jf], blk_t, mask=(j * B + ip < N) & (i * B + jf < M))
        return out

    @nki.jit
    def causal_attention(q, k, v, mm_dtype):
        S, d = q.shape
        B = nl.tile_size.pmax
        assert S % B == 0 and d <= B
        T = S // B
        scale = 1.0 / math.sqrt(d)
        out = nl.ndarray((S, d), dtype=q.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(B)[:, None]
        jk = nl.arange(B)[None, :]
        id_ = nl.arange(d)[:, None]
        jd = nl.arange(d)[None, :]
        k_t = nl.ndarray((d, S), dtype=mm_dtype)                 # K^T, head dim on the partitions
        for j in nl.affine_range(T):
            k_t[id_, j * B + jk] = nl.load_transpose2d(k[j * B + ip, jd], dtype=mm_dtype)
        for i in nl.affine_range(T):
            q_t = nl.load_transpose2d(q[i * B + ip, jd], dtype=mm_dtype)          # [d, B]
            scores = nl.ndarray((B, S), dtype=nl.float32)
            for j in nl.affine_range(T):
                qk = nl.ndarray((B, B), dtype=nl.float32, buffer=nl.psum)
                qk[...] = nisa.nc_matmul(q_t, k_t[id_, j * B + jk])               # Q_i K_j^T
                scores[ip, j * B + jk] = nisa.affine_select(pred=(i * B + ip >= j * B + jk), on_true_tile=qk,
                                                            on_false_value=nl.fp32.min)
            neg_max = nisa.tensor_reduce(np.max, scores, axis=1, negate=True, keepdims=True)
            bias = nl.multiply(neg_max, scale)
            probs = nisa.activation(op=nl.exp, data=scores, bias=bias, scale=scale)
            denom = nisa.tensor_reduce(np.add, probs, axis=1, keepdims=True)
            o_acc = nl.zeros((B, d), dtype=nl.float32, buffer=nl.psum)
            for j in nl.affine_range(T):
                p_t = nisa.nc_transpose(probs[ip, j * B + jk])                    # [B keys, B queries] PSUM
                p_sb = nl.copy(p_t, dtype=mm_dtype)
                v_j = nl.load(v[j * B + ip, jd], dtype=mm_dtype)
                o_acc += nisa.nc_matmul(p_sb, v_j)
            o = nl.multiply(o_acc, nisa.reciprocal(denom), dtype=q.dtype)
            nl.store(out[i * B + ip, jd], o)
        return out

    @nki.jit
    def avgpool2d(x, pool):
        C, H, W = x.shape
        Ho, Wo = H // pool, W // pool
        P = nl.tile_size.pmax
        out = nl.ndarray((C, Ho, Wo), dtype=x.dtype, buffer=nl.shared_hbm)
        pc, ph, pw = nl.mgrid[0:P, 0:H, 0:W]
        oc, oh, ow = nl.mgrid[0:P, 0:Ho, 0:Wo]
        c5, r, dr, q, dq = nl.mgrid[0:P, 0:Ho, 0:pool, 0:Wo, 0:pool]
        for g in nl.affine_range(math.ceil(C / P)):
            plane = nl.load(x[g * P + pc, ph, pw], mask=(g * P + pc < C))
            window_sum = nl.sum(plane[c5, pool * r + dr, pool * q + dq], axis=[2, 4], mask=(g * P + c5 < C))
            nl.store(out[g * P + oc, oh, ow], window_sum / (pool * pool), mask=(g * P + oc < C))
        return out

    def activate(t, act, cfg, mask):
        """Helper called from a kernel: the configured activation of cfg.scale * t."""
        fn = {Act.EXP: nl.exp, Act.TANH: nl.tanh, Act.SILU: nl.silu}[act]
        return fn(nl.multiply(t, cfg.scale, mask=mask), mask=mask)

    def row_sums(t, mask):
        return nl.sum(t, axis=1, keepdims=True, dtype=nl.float32, mask=mask)

    @nki.jit
    def configured(x, cfg: TileConfig, act: Act):
        n, F = x.shape
        y_out = nl.ndarray((n, F), dtype=x.dtype, buffer=nl.shared_hbm)
        s_out = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        ip = nl.arange(cfg.rows)[:, None]
        jf = nl.arange(F)[None, :]
        for i in nl.affine_range(math.ceil(n / cfg.rows)):
            live = i * cfg.rows + ip < n
            t = nl.load(x[i * cfg.rows + ip, jf], mask=live)
            y = activate(t, act, cfg, live)
            nl.store(y_out[i * cfg.rows + ip, jf], y, mask=live)
            nl.store(s_out[i * cfg.rows + ip, nl.arange(1)[None, :]], row_sums(y, live), mask=live)
        return y_out, s_out

    @nki.jit
    def axpy_inplace(y: nt.mutable_tensor, x, alpha):
        """y += alpha * x in place (rows in 128-row tiles); returns y."""
        n, F = y.shape
        ip = nl.arange(128)[:, None]
        jf = nl.arange(F)[None, :]
        for i in nl.affine_range(math.ceil(n / 128)):
            live = i * 128 + ip < n
            yt = nl.load(y[i * 128 + ip, jf], mask=live)
            xt = nl.load(x[i * 128 + ip, jf], mask=live)
            yt[...] = nisa.scalar_tensor_tensor(data=xt, op0=np.multiply, operand0=alpha, op1=np.add, operand1=yt,
                                                mask=live)
            nl.store(y[i * 128 + ip, jf], yt, mask=live)
        return y

    return SimpleNamespace(layernorm=layernorm, selective_scan=selective_scan, block_transpose=block_transpose,
                           causal_attention=causal_attention, avgpool2d=avgpool2d, configured=configured,
                           axpy_inplace=axpy_inplace)


def _default():
    import nki_lite
    import nki_lite.isa
    import nki_lite.language
    import nki_lite.typing
    return build(nki_lite, nki_lite.language, nki_lite.isa, nki_lite.typing)


KERNELS = _default()


# ------------------------------------------------------------------------------------ references (float64)

def layernorm_ref(x, gamma, beta, eps):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma.astype(np.float64) + beta.astype(np.float64)


def selective_scan_ref(delta, u, A, B, C):
    """out[b, c, t] = sum_s C[b, s, t] h_s[b, c, t], h_s[t] = exp(delta A_s) h_s[t-1] + delta u B[b, s, t]."""
    delta, u, A, B, C = (a.astype(np.float64) for a in (delta, u, A, B, C))
    batch, channels, L = delta.shape
    out = np.zeros((batch, channels, L))
    for s in range(A.shape[1]):
        decay = np.exp(delta * A[None, :, s, None])
        drive = delta * u * B[:, s, None, :]
        h = np.zeros((batch, channels))
        for t in range(L):
            h = decay[:, :, t] * h + drive[:, :, t]
            out[:, :, t] += C[:, s, None, t] * h
    return out


def causal_attention_ref(q, k, v):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    S, d = q.shape
    s = q @ k.T / math.sqrt(d)
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def avgpool2d_ref(x, pool):
    C, H, W = x.shape
    Ho, Wo = H // pool, W // pool
    return x[:, :Ho * pool, :Wo * pool].astype(np.float64).reshape(C, Ho, pool, Wo, pool).mean(axis=(2, 4))


def configured_ref(x, cfg: TileConfig, act: Act):
    z = x.astype(np.float64) * cfg.scale
    y = {Act.EXP: np.exp, Act.TANH: np.tanh, Act.SILU: lambda v: v / (1.0 + np.exp(-v))}[act](z)
    return y, y.sum(axis=1, keepdims=True)
