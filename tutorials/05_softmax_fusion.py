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
# # 05 — Softmax and fusion
#
# Softmax of a row is `exp(x - max(x)) / sum(exp(x - max(x)))`: a reduction, an elementwise pass,
# another reduction and a scaling. On Trainium each step is one instruction over a tile in SBUF;
# on the CPU, nki_lite's JIT **fuses** consecutive elementwise instructions into one loop whose
# intermediates stay in registers (docs/jit.md, "Speed techniques"), so a chain of operations costs
# about one pass over memory, where numpy makes one pass (and one temporary array) per operation.
# Fusion never changes a bit: each fused value is rounded to its tile's dtype exactly as the
# interpreter does.
#
# This notebook measures fusion, writes a row softmax, compares it with numpy, and writes the
# *online* softmax that wide rows need (a running max and sum over chunks).

# %%
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.stdlib import softmax as stdlib_softmax
from nki_lite.testing import assert_close


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


def best_of(f, n=5):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


rng = np.random.default_rng(0)

# %% [markdown]
# ## Fusion, measured
#
# A chain of `n` multiply-adds on a [512, 2048] fp32 tensor. The kernel is built by a Python loop
# at trace time (`n` is a trace-time constant), so the IR holds `2n` elementwise instructions.

# %%
@nki.jit
def fma_chain(x, n):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        for _ in range(n):                      # unrolled while tracing
            t = t * 0.999 + 0.001
        nl.store(out[i * 128:(i + 1) * 128, :], t)
    return out


def numpy_chain(x, n):
    t = x
    for _ in range(n):
        t = t * np.float32(0.999) + np.float32(0.001)
    return t


X = rng.standard_normal((512, 2048)).astype(np.float32)
lengths = [1, 2, 4, 8, 16]
t_jit, t_np = [], []
for n in lengths:
    got = fma_chain(X, n)
    assert got.tobytes() == numpy_chain(X, n).tobytes()      # same fp32 roundings, op by op
    if n == 4:
        assert got.tobytes() == fma_chain(X, n, mode="interpret").tobytes()
    t_jit.append(best_of(lambda: fma_chain(X, n), n=3))
    t_np.append(best_of(lambda: numpy_chain(X, n), n=3))
    print(f"n = {n:2d}: JIT {t_jit[-1] * 1e3:6.2f} ms   numpy {t_np[-1] * 1e3:6.2f} ms")

fig, ax = plt.subplots(figsize=(6, 3.2))
ax.plot(lengths, np.array(t_np) * 1e3, "o-", color="grey", label="numpy (one pass per op)")
ax.plot(lengths, np.array(t_jit) * 1e3, "o-", color="tab:blue", label="nki_lite JIT (fused)")
ax.set_xlabel("multiply-adds in the chain")
ax.set_ylabel("ms per call, [512, 2048] fp32")
ax.set_xscale("log", base=2)
ax.legend()
show(fig, "05_fusion.png")

# %% [markdown]
# Bit-identical results (asserted above) and a cost that grows far slower with the chain's length.
# (Timings are this machine's, on whatever threads it has; `make bench` has the controlled table.)
#
# ## Row softmax
#
# One 128-row tile at a time; every instruction works along the free axis. `mask=` handles a row
# count that is not a multiple of 128.

# %%
@nki.jit
def softmax_rows(x):
    R, C = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(128)[:, None], nl.arange(C)[None, :]
    for i in nl.affine_range((R + 127) // 128):
        rows = i * 128 + ip
        inside = rows < R
        t = nl.load(x[rows, jf], mask=inside)
        m = nl.max(t, axis=1, keepdims=True, mask=inside)           # [128, 1]
        e = nl.exp(nl.subtract(t, m, mask=inside), mask=inside)     # broadcast along the free axis
        s = nl.sum(e, axis=1, keepdims=True, mask=inside)
        y = nl.multiply(e, nl.reciprocal(s, mask=inside), mask=inside, dtype=x.dtype)
        nl.store(out[rows, jf], y, mask=inside)
    return out


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


S = (rng.standard_normal((1000, 1024)) * 4).astype(np.float32)
ref = np_softmax(S.astype(np.float64))
mine = softmax_rows(S)
lib = stdlib_softmax(S)
assert_close(mine, ref, rtol=2e-6, atol=1e-7)
assert_close(lib, ref, rtol=2e-6, atol=1e-7)
assert mine.tobytes() == softmax_rows(S, mode="interpret").tobytes()
print("row softmax: ok (max abs error", float(np.abs(mine - ref).max()), ")")

t_mine = best_of(lambda: softmax_rows(S))
t_lib = best_of(lambda: stdlib_softmax(S))
t_numpy = best_of(lambda: np_softmax(S))
fig, ax = plt.subplots(figsize=(6, 2.4))
ax.barh(["numpy", "this notebook's kernel", "nki_lite.stdlib.softmax"], [t_numpy * 1e3, t_mine * 1e3, t_lib * 1e3],
        color=["grey", "tab:blue", "tab:green"])
ax.set_xlabel("ms per call, softmax of [1000, 1024] fp32 (this CPU)")
show(fig, "05_softmax_speed.png")
print(f"numpy {t_numpy * 1e3:.2f} ms, kernel {t_mine * 1e3:.2f} ms, stdlib {t_lib * 1e3:.2f} ms")

# %% [markdown]
# ## Online softmax for wide rows
#
# A row of 32768 fp32 values is 128 KiB per partition: with its exponentials beside it, more than
# the SBUF has. The online form reads the row in chunks and keeps two numbers per row, the running
# max `m` and the running sum `s` of `exp(x - m)`; when a chunk raises the max, the old sum is
# rescaled by `exp(m_old - m_new)`. A second pass writes `exp(x - m) / s`. The chunks of the first
# pass depend on each other, so that loop is a `sequential_range`; the second pass is independent.

# %%
W = 2048   # chunk width


@nki.jit
def softmax_online(x):
    R, C = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jw = nl.arange(128)[:, None], nl.arange(W)[None, :]
    for i in nl.affine_range(R // 128):
        rows = i * 128 + ip
        m = nl.full((128, 1), nl.fp32.min, dtype=nl.float32, buffer=nl.sbuf)
        s = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.sequential_range(C // W):
            t = nl.load(x[rows, c * W + jw])
            m_new = nl.maximum(m, nl.max(t, axis=1, keepdims=True))
            s[...] = nl.add(nl.multiply(s, nl.exp(nl.subtract(m, m_new))),
                            nl.sum(nl.exp(nl.subtract(t, m_new)), axis=1, keepdims=True))
            m[...] = m_new
        r = nl.reciprocal(s)
        for c in nl.affine_range(C // W):
            t = nl.load(x[rows, c * W + jw])
            nl.store(out[rows, c * W + jw], nl.multiply(nl.exp(nl.subtract(t, m)), r))
    return out


# later chunks hold larger values, so the running max keeps moving and the rescaling matters
wide = (rng.standard_normal((256, 32768)) * 3 + np.linspace(0, 12, 32768)).astype(np.float32)
ref_w = np_softmax(wide.astype(np.float64))
got_w = softmax_online(wide)
assert_close(got_w, ref_w, rtol=1e-5, atol=1e-9)
assert_close(stdlib_softmax(wide), ref_w, rtol=1e-5, atol=1e-9)     # the stdlib switches to its online form
assert np.allclose(got_w.sum(axis=1), 1.0, atol=1e-4)
print("online softmax [256, 32768]: ok")

# %% [markdown]
# What the first pass sees, for row 0: the running max after each chunk, and the running sum
# measured against that max (it drops each time the max rises, then grows again).

# %%
row = wide[0].astype(np.float64)
ms, ss, m_run, s_run = [], [], -np.inf, 0.0
for c in range(row.size // W):
    chunk = row[c * W:(c + 1) * W]
    m_new = max(m_run, chunk.max())
    s_run = s_run * np.exp(m_run - m_new) + np.exp(chunk - m_new).sum()
    m_run = m_new
    ms.append(m_run)
    ss.append(s_run)
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(ms, "o-", color="tab:red", label="running max m")
ax.set_xlabel("chunk")
ax.set_ylabel("m", color="tab:red")
ax2 = ax.twinx()
ax2.semilogy(ss, "s-", color="tab:blue", label="running sum s")
ax2.set_ylabel("s = sum exp(x - m)", color="tab:blue")
ax.set_title("online softmax, row 0, 2048-wide chunks")
show(fig, "05_online_softmax.png")
assert np.isclose(ss[-1], np.exp(row - row.max()).sum())
print("notebook 05: all assertions passed")
