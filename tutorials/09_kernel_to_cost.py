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
# # 09 — From kernel to cost: a transformer layer on trn1, trn2 and trn3
#
# The engine model estimates the device time of each kernel on one NeuronCore of each target.
# Multiply by what a NeuronCore-second costs and you have a price per call. This notebook:
#
# 1. runs one transformer layer's kernels (nki_lite.stdlib) on the CPU and checks the layer
#    against numpy;
# 2. estimates every kernel's time on trn1, trn2 and trn3 for several sequence lengths;
# 3. turns times into **cost per million layer calls** from instance prices that are **inputs**:
#    each with its date and source, none built into nki_lite. Where no public price was found, the
#    input is `None` and the notebook computes the **break-even price** instead: the hourly price
#    at which that target costs the same per call as the cheapest priced one.
#
# Assumptions, stated once: every NeuronCore of the instance is kept busy with independent calls
# (cost per call = price per hour / 3600 / NeuronCores × device seconds); host time, launch
# overheads, collectives and idle time are not counted; times are the engine model's estimates
# (docs/engine_model.md, docs/differences_from_hardware.md), not measurements.

# %%
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
from IPython.display import Image, display

from nki_lite.stdlib import attention, matmul, rmsnorm
from nki_lite.testing import assert_close


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


# %% [markdown]
# ## Inputs: prices (edit these)
#
# `usd_per_hour` is the on-demand price of the whole instance; `neuroncores` its physical
# NeuronCores (chips × cores per chip, AWS Neuron architecture docs: Trainium has 2 NeuronCore-v2,
# Trainium2 8 NeuronCore-v3; trn1.32xlarge and trn2.48xlarge have 16 chips).
#
# * trn1.32xlarge: $21.50 per hour on demand, as quoted (with p4d.24xlarge's $32.77) in "AWS
#   Trainium vs GPU Instances: What Actually Costs Less for AI Training", usage.ai, updated
#   2026-06-25 — https://www.usage.ai/blogs/aws/ai-ml-cost/trainium-vs-gpu-instances/ .
#   Check it against https://aws.amazon.com/ec2/pricing/on-demand/ for your region before use.
# * trn2.48xlarge: no public on-demand price was found in the sources searched when this notebook
#   was written (2026-12-02); set it from the AWS pricing page for your region.
# * trn3: no instance price was found either; the 128 NeuronCores assume 16 Trainium3 chips of
#   8 NeuronCore-v4 like a trn2.48xlarge (an assumption: set both from AWS's page).

# %%
PRICES = {
    "trn1": {"instance": "trn1.32xlarge", "usd_per_hour": 21.50, "neuroncores": 32, "date": "2026-06-25",
             "source": "usage.ai, 'AWS Trainium vs GPU Instances' (on-demand rate quoted in the article)"},
    "trn2": {"instance": "trn2.48xlarge", "usd_per_hour": None, "neuroncores": 128, "date": None,
             "source": "not found (2026-12-02): set from aws.amazon.com/ec2/pricing/on-demand"},
    "trn3": {"instance": "trn3 (16 chips assumed)", "usd_per_hour": None, "neuroncores": 128, "date": None,
             "source": "not found (2026-12-02): set instance, price and NeuronCores yourself"},
}
TARGETS = list(PRICES)
for t, p in PRICES.items():
    price = f"${p['usd_per_hour']:.2f}/h" if p["usd_per_hour"] is not None else "no price"
    print(f"{t}: {p['instance']:24s} {price:>10s}  {p['neuroncores']:4d} NeuronCores  ({p['date']}, {p['source']})")

# %% [markdown]
# ## The layer
#
# A pre-norm decoder layer's kernels, one sequence of S tokens, model width D, grouped-query
# attention with H query heads and Hkv K/V heads of width 128, an MLP of width F (a plain
# up-projection / down-projection pair, activation omitted so every kernel is a stdlib one):
#
# `h = x + Wo · attn(rmsnorm(x) · Wqkv)`, `y = h + Wdown · (rmsnorm(h) · Wup)`.

# %%
D, H, HKV, DH, F = 1024, 8, 2, 128, 4096


def layer(x, p, run=True):
    """Run the layer's kernels (run=True) or return their engine-model estimates per target."""
    S = x.shape[0]
    calls = [
        ("rmsnorm 1", rmsnorm, (x, p["g1"]), {}),
        ("qkv matmul", matmul, (x, p["wqkv"]), {}),
        ("attention", attention, None, {"causal": True}),
        ("out matmul", matmul, (x, p["wo"]), {}),
        ("rmsnorm 2", rmsnorm, (x, p["g2"]), {}),
        ("mlp up", matmul, (x, p["wup"]), {}),
        ("mlp down", matmul, (np.zeros((S, F), x.dtype), p["wdown"]), {}),
    ]
    if not run:
        q = np.zeros((1, H, S, DH), x.dtype)
        kv = np.zeros((1, HKV, S, DH), x.dtype)
        out = {}
        for name, fn, args, kw in calls:
            args = (q, kv, kv) if args is None else args
            out[name] = {t: fn.estimate(*args, target=t, **kw) for t in TARGETS}
        return out
    # the real data flow, on the CPU
    n1 = rmsnorm(x, p["g1"])
    qkv = matmul(n1, p["wqkv"])
    q = qkv[:, :H * DH].reshape(S, H, DH).transpose(1, 0, 2)[None]
    k = qkv[:, H * DH:(H + HKV) * DH].reshape(S, HKV, DH).transpose(1, 0, 2)[None]
    v = qkv[:, (H + HKV) * DH:].reshape(S, HKV, DH).transpose(1, 0, 2)[None]
    a = attention(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), causal=True)
    a = np.ascontiguousarray(a[0].transpose(1, 0, 2).reshape(S, H * DH))
    h = x + matmul(a, p["wo"])
    n2 = rmsnorm(h, p["g2"])
    return h + matmul(matmul(n2, p["wup"]), p["wdown"])


def layer_ref(x, p):
    x = x.astype(np.float64)
    P = {k: v.astype(np.float64) for k, v in p.items()}
    S = x.shape[0]

    def rms(t, g):
        return t / np.sqrt(np.mean(t * t, axis=1, keepdims=True) + 1e-6) * g
    qkv = rms(x, P["g1"]) @ P["wqkv"]
    q = qkv[:, :H * DH].reshape(S, H, DH).transpose(1, 0, 2)
    k = np.repeat(qkv[:, H * DH:(H + HKV) * DH].reshape(S, HKV, DH).transpose(1, 0, 2), H // HKV, axis=0)
    v = np.repeat(qkv[:, (H + HKV) * DH:].reshape(S, HKV, DH).transpose(1, 0, 2), H // HKV, axis=0)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(DH)
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    a = ((w / w.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(S, H * DH)
    h = x + a @ P["wo"]
    return h + (rms(h, P["g2"]) @ P["wup"]) @ P["wdown"]


rng = np.random.default_rng(0)


def params(dtype):
    def w(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(dtype)
    return {"g1": np.ones(D, dtype), "g2": np.ones(D, dtype), "wqkv": w(D, (H + 2 * HKV) * DH),
            "wo": w(H * DH, D), "wup": w(D, F), "wdown": w(F, D)}


# %% [markdown]
# ## 1. The layer is right (CPU, fp32, S = 128)

# %%
p32 = params(np.float32)
x = rng.standard_normal((128, D)).astype(np.float32)
y = layer(x, p32)
ref = layer_ref(x, p32)
assert_close(y, ref, rtol=1e-4, atol=1e-4)
print("layer on the CPU matches numpy float64: max abs error", float(np.abs(y - ref).max()))

# %% [markdown]
# ## 2. Device time per kernel, per target, per sequence length (bf16)

# %%
pb = params(ml_dtypes.bfloat16)
SEQS = [128, 512, 1024]
est = {S: layer(np.zeros((S, D), ml_dtypes.bfloat16), pb, run=False) for S in SEQS}
kernels = list(est[SEQS[0]])
time_us = {S: {t: sum(est[S][k][t].latency_us for k in kernels) for t in TARGETS} for S in SEQS}
print(f"{'S':>6s} " + " ".join(f"{t + ' us':>12s}" for t in TARGETS))
for S in SEQS:
    print(f"{S:6d} " + " ".join(f"{time_us[S][t]:12.1f}" for t in TARGETS))

fig, axes = plt.subplots(1, len(SEQS), figsize=(13, 3.4))
colors = plt.cm.tab10(np.arange(len(kernels)))
for ax, S in zip(axes, SEQS):
    bottom = np.zeros(len(TARGETS))
    for c, k in zip(colors, kernels):
        vals = np.array([est[S][k][t].latency_us for t in TARGETS])
        ax.bar(TARGETS, vals, bottom=bottom, color=c, label=k)
        bottom += vals
    ax.set_title(f"S = {S}")
    ax.set_ylabel("estimated us per layer (one NeuronCore)")
axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
show(fig, "09_layer_time.png")

# %% [markdown]
# ## 3. Cost per million layer calls, and break-even prices

# %%
def usd_per_million(target, us):
    p = PRICES[target]
    if p["usd_per_hour"] is None:
        return None
    return p["usd_per_hour"] / 3600.0 / p["neuroncores"] * (us * 1e-6) * 1e6


def break_even_usd_per_hour(target, us, ref_cost):
    """The instance price at which `target` costs ref_cost per million calls."""
    return ref_cost / 1e6 / (us * 1e-6) * 3600.0 * PRICES[target]["neuroncores"]


rows = []
for S in SEQS:
    costs = {t: usd_per_million(t, time_us[S][t]) for t in TARGETS}
    priced = {t: c for t, c in costs.items() if c is not None}
    best = min(priced, key=priced.get)
    line = {"S": S, "cheapest priced": best}
    for t in TARGETS:
        if costs[t] is not None:
            line[t] = f"${costs[t]:.3f} per M calls"
        else:
            be = break_even_usd_per_hour(t, time_us[S][t], priced[best])
            line[t] = f"wins below ${be:.2f}/h"
            # consistency: at the break-even price the target costs exactly what the best one does
            saved = PRICES[t]["usd_per_hour"]
            PRICES[t]["usd_per_hour"] = be
            assert math.isclose(usd_per_million(t, time_us[S][t]), priced[best], rel_tol=1e-12)
            PRICES[t]["usd_per_hour"] = saved
    rows.append(line)
for r in rows:
    print(f"S={r['S']:5d}  " + "  ".join(f"{t}: {r[t]:28s}" for t in TARGETS))

# %% [markdown]
# Break-even prices depend on the shape: each kernel gains a different factor from one
# generation to the next, and the mix of kernels changes with S (attention grows as S², the
# matmuls as S). Read the plot as "below this line, that target is the cheaper one for this shape".

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.4))
for t in TARGETS:
    if PRICES[t]["usd_per_hour"] is not None:
        ax.plot(SEQS, [PRICES[t]["usd_per_hour"]] * len(SEQS), "k--", lw=1, label=f"{t} price (input)")
    else:
        ref_t = min((u for u in TARGETS if PRICES[u]["usd_per_hour"] is not None),
                    key=lambda u: usd_per_million(u, time_us[SEQS[0]][u]))
        be = [break_even_usd_per_hour(t, time_us[S][t], usd_per_million(ref_t, time_us[S][ref_t])) for S in SEQS]
        ax.plot(SEQS, be, "o-", label=f"{t}: break-even vs {ref_t}")
ax.set_xscale("log", base=2)
ax.set_xlabel("sequence length S")
ax.set_ylabel("USD per instance-hour")
ax.legend(fontsize=7)
show(fig, "09_break_even.png")

# %% [markdown]
# With every price filled in, the cheapest target per shape is simply the minimum of
# `usd_per_million` over targets; set `PRICES["trn2"]["usd_per_hour"]` and re-run.

# %%
for S in SEQS:
    assert all(est[S][k][t].latency_us > 0 for k in kernels for t in TARGETS)
# longer sequences take longer on every target
assert all(time_us[a][t] < time_us[b][t] for a, b in zip(SEQS, SEQS[1:]) for t in TARGETS)
print("notebook 09: all assertions passed")
