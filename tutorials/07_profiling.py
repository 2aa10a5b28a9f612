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
# # 07 — Profiling: utilisation, the bottleneck line, timelines, Perfetto traces
#
# `nki.estimate(kernel, *args, target=...)` traces a kernel and schedules its IR on a model of one
# NeuronCore (docs/engine_model.md). Nothing runs, so arguments can be `nt.tensor[[shape], dtype]`
# placeholders of any size. The result speaks neuron-profile's language:
#
# * `summary()` — neuron-profile's field names: `total_time`, `<engine>_engine_active_time_percent`,
#   `dma_active_time_percent`, `hfu_estimated_percent` (Tensor Engine FLOPs / peak), `mbu_estimated_percent`
#   (HBM bytes / bandwidth), `mm_arithmetic_intensity`, byte and instruction counts;
# * `table()` — the same as text; `bottleneck` — one line saying what limits the kernel;
# * `save_trace(path)` — Chrome-trace / Perfetto JSON, one track per engine and DMA queue, every
#   event carrying its opcode, shape and your `file:line`;
# * `plot(path)` — a PNG timeline with utilisation bars.
#
# These are model numbers, not measurements: the model's constants and what it leaves out are in
# docs/engine_model.md and docs/differences_from_hardware.md.

# %%
import collections
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


# %% [markdown]
# ## Three kernels, three bottlenecks

# %%
@nki.jit
def add_big(x, y):
    """Elementwise: two loads and a store per add -> limited by DMA."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        a = nl.load(x[i * 128:(i + 1) * 128, :])
        b = nl.load(y[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.add(a, b))
    return out


@nki.jit
def matmul_resident(lhsT, rhs, reps):
    """Operands loaded once, many matmuls on them -> limited by the Tensor Engine."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhsT)
    b = nl.load(rhs)
    res = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for r in nl.sequential_range(reps):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(8):
            acc += nisa.nc_matmul(a, b)
        res[...] = nl.add(res, acc)
    nl.store(out, res)
    return out


@nki.jit
def matmul_streaming(lhsT, rhs):
    """Every matmul loads fresh operands: ~100 FLOP per HBM byte."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        acc += nisa.nc_matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]))
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def tiny_chain(x):
    """Eight dependent tiny instructions -> every step waits for the one before."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for _ in range(4):
        t = nl.exp(t)             # Scalar Engine
        t = nl.add(t, 1.0)        # Vector Engine: each hop crosses engines
    nl.store(out, t)
    return out


cases = {
    "add_big [8192, 2048] bf16": (add_big, [nt.tensor[[8192, 2048], nl.bfloat16]] * 2, {}),
    "matmul_resident x64 bf16": (matmul_resident, [nt.tensor[[128, 128], nl.bfloat16],
                                                    nt.tensor[[128, 512], nl.bfloat16]], {"reps": 64}),
    "tiny_chain [128, 8] fp32": (tiny_chain, [nt.tensor[[128, 8], nl.float32]], {}),
}
ests = {name: nki.estimate(k, *a, target="trn2", **kw) for name, (k, a, kw) in cases.items()}
for name, e in ests.items():
    print(f"{name:30s} {e.latency_us:9.2f} us   {e.bottleneck}")
assert ests["add_big [8192, 2048] bf16"].bottleneck.startswith("memory-bound")
assert ests["matmul_resident x64 bf16"].bottleneck.startswith("compute-bound")
assert ests["tiny_chain [128, 8] fp32"].bottleneck.startswith("latency-bound")

# %% [markdown]
# The full table of one of them: busy time and active percentage per engine, then the derived
# utilisations. HFU counts the Tensor Engine's FLOPs against its peak over the kernel's time.

# %%
print(ests["matmul_resident x64 bf16"].table())

# %% [markdown]
# ## Utilisation bars

# %%
engines = ["tensor", "vector", "scalar", "gpsimd"]
fig, ax = plt.subplots(figsize=(8, 3))
width = 0.15
names = list(ests)
y = np.arange(len(names))
colors = {"tensor": "tab:red", "vector": "tab:blue", "scalar": "tab:green", "gpsimd": "tab:purple"}
for k, eng in enumerate(engines + ["dma"]):
    field = "dma_active_time_percent" if eng == "dma" else f"{eng}_engine_active_time_percent"
    ax.barh(y + (k - 2) * width, [ests[n].summary()[field] for n in names], width, label=eng,
            color=colors.get(eng, "tab:orange"))
ax.set_yticks(y)
ax.set_yticklabels(names)
ax.invert_yaxis()
ax.set_xlim(0, 100)
ax.set_xlabel("active % of the kernel's time (trn2 model)")
ax.legend(fontsize=7)
show(fig, "07_utilisation.png")

# %% [markdown]
# ## The PNG timeline
#
# One row per engine and per DMA queue; grey marks the stretch of a loop the model extrapolated
# from its steady state instead of simulating every iteration.

# %%
display(Image(ests["add_big [8192, 2048] bf16"].plot("07_add_big_timeline.png")))
display(Image(ests["tiny_chain [128, 8] fp32"].plot("07_tiny_chain_timeline.png")))

# %% [markdown]
# ## A roofline
#
# Attainable FLOP/s = min(peak compute, arithmetic intensity × HBM bandwidth). Each kernel is a point
# at its intensity (Tensor Engine FLOPs per HBM byte) and its modelled FLOP/s. The summary's
# `peak_flops_bandwidth_ratio` is the ridge point.

# %%
est_mm = ests["matmul_resident x64 bf16"]
s0 = est_mm.summary()
peak = s0["hardware_flops"] / s0["total_time"] / (s0["hfu_estimated_percent"] / 100)     # FLOP/s
ridge = s0["peak_flops_bandwidth_ratio"]
bandwidth = peak / ridge
points = {}
for n in [2, 8, 32, 128]:
    e = nki.estimate(matmul_resident, nt.tensor[[128, 128], nl.bfloat16], nt.tensor[[128, 512], nl.bfloat16],
                     reps=n, target="trn2")
    s = e.summary()
    points[f"matmul_resident x{n}"] = (s["hardware_flops"] / (s["hbm_read_bytes"] + s["hbm_write_bytes"]),
                                       s["hardware_flops"] / s["total_time"])
e = nki.estimate(matmul_streaming, nt.tensor[[16384, 128], nl.bfloat16], nt.tensor[[16384, 512], nl.bfloat16],
                 target="trn2")
s = e.summary()
points["matmul_streaming K=16384"] = (s["hardware_flops"] / (s["hbm_read_bytes"] + s["hbm_write_bytes"]),
                                      s["hardware_flops"] / s["total_time"])
print("matmul_streaming:", e.bottleneck)
fig, ax = plt.subplots(figsize=(6.5, 4))
ai = np.logspace(-1, 5, 200)
ax.loglog(ai, np.minimum(peak, ai * bandwidth), "k-", label="roofline (trn2 model)")
ax.axvline(ridge, color="grey", ls=":", lw=1)
for name, (x_ai, flops) in points.items():
    ax.loglog(x_ai, flops, "o", label=name)
ax.set_xlabel("arithmetic intensity (FLOP / HBM byte)")
ax.set_ylabel("FLOP/s")
ax.legend(fontsize=7)
show(fig, "07_roofline.png")
for name, (x_ai, flops) in points.items():
    print(f"{name:22s} intensity {x_ai:8.1f}  {flops / 1e12:6.1f} TFLOP/s  ({100 * flops / peak:5.1f}% of peak)")
    assert flops <= min(peak, x_ai * bandwidth) * 1.0001

# %% [markdown]
# ## A Perfetto trace
#
# `save_trace` writes Chrome-trace JSON: open it at https://ui.perfetto.dev or `chrome://tracing`.
# Every event names the source line that issued it, so the trace answers "which line costs the most".

# %%
path = ests["add_big [8192, 2048] bf16"].save_trace("07_add_big_trace.json")
with open(path) as f:
    trace = json.load(f)
events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
print(len(events), "events on", len(tracks), "tracks, e.g.", json.dumps(events[0])[:300])
busy_by_line = collections.Counter()
for e in events:
    if e["cat"] != "steady state":        # skip the bars that stand for extrapolated loop iterations
        busy_by_line[e["args"]["nki_source_location"]] += e["dur"]
for loc, us in busy_by_line.most_common(5):
    print(f"  {us:10.2f} us  {loc}")
assert all("nki_source_location" in e["args"] for e in events)

# %% [markdown]
# ## NKI's spellings: `nki.benchmark` and `nki.profile`
#
# Code written for the real toolchain calls `nki.benchmark(warmup=, iters=)(kernel)(...)` and
# `nki.profile(working_directory=...)(kernel)(...)`; both work here over the same estimate
# (latencies in model microseconds, deterministic, so every percentile is the same).

# %%
bench = nki.benchmark(warmup=2, iters=10)(add_big)
bench(np.zeros((1024, 512), np.float32), np.zeros((1024, 512), np.float32))
p50 = bench.benchmark_result.nc_latency.get_latency_percentile(50)
prof_est = nki.profile(working_directory="07_profile")(add_big)(np.zeros((1024, 512), np.float32),
                                                                  np.zeros((1024, 512), np.float32))
with open("07_profile/summary.json") as f:
    saved = json.load(f)
print("benchmark p50:", p50, "us; profile wrote", sorted(__import__("os").listdir("07_profile")))
assert abs(p50 - prof_est.latency_us) < 1e-9 and saved["total_time"] == prof_est.summary()["total_time"]
print("notebook 07: all assertions passed")
