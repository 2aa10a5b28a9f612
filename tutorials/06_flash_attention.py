# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 — Flash attention: tiling, online softmax, causal skipping, GQA
#
# `softmax(Q Kᵀ / √d) V` without ever writing the [Sq, Sk] score matrix to HBM: for each 128-row
# query tile, stream K and V in blocks, keep the running row max `m`, row sum `l` and output `O` on
# chip, and rescale them when a block raises the max (the online softmax of notebook 05).
#
# Per query tile and key block (one head, d ≤ 128):
#
# | step | engine | tile |
# |---|---|---|
# | `S = Q Kᵀ / √d` (`nc_matmul(qT, kT)`: both operands with d on the partitions) | Tensor | [128 q, 128 k] fp32 in PSUM |
# | `m_new = max(m, rowmax(S))`, `P = exp(S - m_new)`, `l = l·α + rowsum(P)` | Vector / Scalar | [128, 1] and [128, 128] |
# | `Pᵀ` (`nc_transpose`), `O = O·α + P V` (`nc_matmul(pT, v)`) | Tensor | [128 q, d] |
#
# with `α = exp(m - m_new)`, and `O / l` at the end. We write this kernel, check it against numpy, then use the stdlib's
# production version (`nki_lite.stdlib.attention`: 512-key blocks, GQA, any shape) for speed and
# the trn2 profile.

# %%
import math
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.stdlib import attention
from nki_lite.testing import assert_close


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


def reference(q, k, v, causal=False):
    """float64 attention over the last two axes; k/v heads repeated for GQA."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    if q.ndim == 4 and k.shape[1] != q.shape[1]:
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
        v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


rng = np.random.default_rng(0)

# %% [markdown]
# ## A flash-attention kernel, one head
#
# Causal attention (key j visible to query i when j ≤ i) needs only the key blocks up to the
# diagonal: the query-tile loop is unrolled (`nl.static_range`) so each tile's key loop has its own
# trip count `i + 1`, and the blocks above the diagonal are never computed. Inside a block, the
# future keys are masked to -inf with `nisa.affine_select` (a no-op below the diagonal).

# %%
@nki.jit
def flash_attention(q, k, v, causal=False):
    Sq, d = q.shape
    Sk = k.shape[0]
    scale = 1.0 / math.sqrt(d)
    out = nl.ndarray((Sq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    ip, jd, jk = nl.arange(128)[:, None], nl.arange(d)[None, :], nl.arange(128)[None, :]
    for i in nl.static_range(Sq // 128):
        qT = nl.load_transpose2d(q[i * 128 + ip, jd])                     # [d, 128 q]
        m = nl.full((128, 1), nl.fp32.min, dtype=nl.float32, buffer=nl.sbuf)
        l = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        o = nl.zeros((128, d), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.sequential_range(i + 1 if causal else Sk // 128):
            kT = nl.load_transpose2d(k[j * 128 + ip, jd])                 # [d, 128 k]
            s = nl.multiply(nisa.nc_matmul(qT, kT), scale)               # [128 q, 128 k]
            if causal:
                s = nisa.affine_select(pred=(i * 128 + ip - (j * 128 + jk) >= 0), on_true_tile=s,
                                       on_false_value=-np.inf, dtype=nl.float32)
            m_new = nl.maximum(m, nl.max(s, axis=1, keepdims=True))
            p = nl.exp(nl.subtract(s, m_new))
            alpha = nl.exp(nl.subtract(m, m_new))
            l[...] = nl.add(nl.multiply(l, alpha), nl.sum(p, axis=1, keepdims=True))
            pT = nl.copy(nisa.nc_transpose(p), dtype=v.dtype)             # [128 k, 128 q]
            pv = nisa.nc_matmul(pT, nl.load(v[j * 128 + ip, jd]))         # [128 q, d]
            o[...] = nl.add(nl.multiply(o, alpha), pv)
            m[...] = m_new
        nl.store(out[i * 128 + ip, jd], nl.multiply(o, nl.reciprocal(l), dtype=q.dtype))
    return out


S, d = 512, 64
q1, k1, v1 = (rng.standard_normal((S, d)).astype(np.float32) for _ in range(3))
for causal in (False, True):
    got = flash_attention(q1, k1, v1, causal=causal)
    assert_close(got, reference(q1, k1, v1, causal), rtol=2e-5, atol=2e-6)
    assert got.tobytes() == flash_attention(q1, k1, v1, causal=causal, mode="interpret").tobytes()
    print(f"flash_attention causal={causal}: ok (JIT == interpreter bit for bit)")

# %% [markdown]
# What causal skipping saves, in the engine model (trn2): the blocks above the diagonal are not in
# the IR at all, so Tensor Engine work is (n + 1) / 2n of the full kernel for n query tiles.

# %%
ph = [nt.tensor[[2048, 128], nl.bfloat16]] * 3
e_full = nki.estimate(flash_attention, *ph, causal=False, target="trn2")
e_causal = nki.estimate(flash_attention, *ph, causal=True, target="trn2")
n = 2048 // 128
for label, e in (("full", e_full), ("causal", e_causal)):
    print(f"{label:7s} {e.latency_us:8.1f} us  Tensor busy {e.engine_busy_ns('tensor') / 1e3:7.1f} us  -  {e.bottleneck}")
ratio = e_causal.summary()["hardware_flops"] / e_full.summary()["hardware_flops"]
print(f"causal / full Tensor Engine flops = {ratio:.4f}  ((n + 1) / 2n = {(n + 1) / (2 * n):.4f})")
assert abs(ratio - (n + 1) / (2 * n)) < 1e-9
display(Image(e_causal.plot("06_flash_causal_timeline.png")))

# %% [markdown]
# ## The stdlib version: batches, GQA, any length
#
# `attention(q, k, v, causal=...)` takes q [B, H, Sq, d] and k, v [B, Hkv, Sk, d]; with Hkv < H
# each group of H / Hkv query heads shares one K/V head (grouped-query attention), loaded once per
# group. Sq and Sk need not be multiples of anything: here 4 query heads share one K/V head, and
# 700 keys are one full 512-key block and a ragged one of 188.

# %%
B, H, Hkv, Sq, Sk, d = 1, 4, 1, 256, 700, 64
q = rng.standard_normal((B, H, Sq, d)).astype(np.float32)
k = rng.standard_normal((B, Hkv, Sk, d)).astype(np.float32)
v = rng.standard_normal((B, Hkv, Sk, d)).astype(np.float32)
for causal in (False, True):
    assert_close(attention(q, k, v, causal=causal), reference(q, k, v, causal), rtol=2e-5, atol=2e-6)
print(f"stdlib attention, GQA {H} query heads / {Hkv} kv head, Sq={Sq}, Sk={Sk}: ok")

# %% [markdown]
# ## CPU speed against numpy
#
# numpy materialises the [Sq, Sk] scores per head (and repeats K and V per query head); the kernel
# never does.

# %%
def best_of(f, n=3):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def numpy_attention(q, k, v):
    kk = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    vv = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    s = q @ np.swapaxes(kk, -1, -2) * np.float32(1 / math.sqrt(q.shape[-1]))
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ vv


times = {"numpy (scores materialised)": best_of(lambda: numpy_attention(q, k, v)),
         "stdlib attention": best_of(lambda: attention(q, k, v)),
         "stdlib attention, causal": best_of(lambda: attention(q, k, v, causal=True))}
for name, t in times.items():
    print(f"{name:28s} {t * 1e3:7.2f} ms")
fig, ax = plt.subplots(figsize=(6, 2.4))
ax.barh(list(times), [t * 1e3 for t in times.values()], color=["grey", "tab:blue", "tab:green"])
ax.set_xlabel(f"ms per call, GQA {H}:{Hkv}, Sq={Sq}, Sk={Sk}, d={d}, fp32, this CPU")
show(fig, "06_cpu_speed.png")

# %% [markdown]
# ## trn2 profile of the stdlib kernel

# %%
shape_q = (1, 8, 2048, 128)
shape_kv = (1, 2, 2048, 128)
est = attention.estimate(np.zeros(shape_q, ml_dtypes.bfloat16), np.zeros(shape_kv, ml_dtypes.bfloat16),
                         np.zeros(shape_kv, ml_dtypes.bfloat16), causal=True, target="trn2")
print(est.table())
display(Image(est.plot("06_stdlib_attention_trn2.png")))
assert est.latency_us > 0 and est.summary()["hardware_flops"] > 0
print("notebook 06: all assertions passed")
