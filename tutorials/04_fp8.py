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
# # 04 — FP8: quantisation, matmul accuracy, bit-exactness
#
# Trainium's Tensor Engine multiplies 8-bit floats. nki_lite knows three formats, all from
# `ml_dtypes`: `float8_e4m3` (4 exponent bits, 3 mantissa bits, with infinities), `float8_e4m3fn`
# (no infinities, max 448) and `float8_e5m2` (more range, less precision). Every conversion in
# nki_lite is one rounding, bit-identical to ml_dtypes.
#
# This notebook: (1) converts values inside a kernel and checks every bit against ml_dtypes,
# (2) quantises matrices with per-row / per-column scales (`nki_lite.stdlib.quantize_fp8`),
# (3) compares an fp8 matmul with bf16 and fp32 ones against a float64 reference.

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.stdlib import matmul, matmul_fp8, quantize_fp8


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


rng = np.random.default_rng(0)
FORMATS = {"float8_e4m3": nl.float8_e4m3, "float8_e4m3fn": nl.float8_e4m3fn, "float8_e5m2": nl.float8_e5m2}
for name, dt in FORMATS.items():
    fi = ml_dtypes.finfo(dt)
    print(f"{name:14s} max {float(fi.max):8g}  smallest normal {float(fi.smallest_normal):.3g}  eps {float(fi.eps):g}")

# %% [markdown]
# ## 1. Conversions inside a kernel are bit-exact
#
# A kernel that rounds fp32 tiles to an fp8 format (`nl.copy(..., dtype=)`, one rounding on the
# way out of the engine) and one that widens fp8 back to fp32. We feed every one of the 256 codes,
# plus random values, ties, values beyond the range, subnormals, ±0, ±inf and NaN.

# %%
@nki.jit
def round_to(x, dtype):
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.copy(t, dtype=dtype))
    return out


@nki.jit
def widen(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.copy(t, dtype=nl.float32))
    return out


mismatches = {}
for name, dt in FORMATS.items():
    codes = np.arange(256, dtype=np.uint8).view(dt)
    every_code = codes.astype(np.float32)
    mx = float(ml_dtypes.finfo(dt).max)
    tiny = float(ml_dtypes.finfo(dt).smallest_subnormal)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, mx * 1.01, -mx * 4, tiny / 2, tiny * 0.75, 1e-30],
                       np.float32)
    ties = (every_code[np.isfinite(every_code)][:-1] + every_code[np.isfinite(every_code)][1:]) / 2
    rand = (rng.standard_normal(128 * 64) * rng.choice([1e-3, 1.0, 30.0, 1000.0], 128 * 64)).astype(np.float32)
    vals = np.concatenate([every_code, special, ties.astype(np.float32), rand])
    vals = np.resize(vals, -(-len(vals) // 512) * 512).reshape(-1, 4)     # rows: a multiple of 128
    got = round_to(vals, dt)
    want = vals.astype(dt)
    mismatches[name] = int(np.count_nonzero(got.view(np.uint8) != want.view(np.uint8)))
    back = widen(np.resize(codes, (128, 2)))
    assert back.tobytes() == np.resize(codes, (128, 2)).astype(np.float32).tobytes()
    print(f"{name:14s} {vals.size:6d} values rounded, {mismatches[name]} bit mismatches vs ml_dtypes; "
          f"all 256 codes widen exactly")
assert all(v == 0 for v in mismatches.values())

# %% [markdown]
# The rounding grid, for a feel of the precision: the gap between neighbouring fp8 values relative
# to the value (e4m3: 2⁻³ = 12.5%, e5m2: 25%), over each format's range.

# %%
fig, ax = plt.subplots(figsize=(7, 3))
for name, dt in FORMATS.items():
    v = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
    v = np.unique(v[np.isfinite(v) & (v > 0)])
    ax.loglog(v[:-1], np.diff(v) / v[:-1], ".", ms=3, label=name)
ax.set_xlabel("value")
ax.set_ylabel("relative gap to next value")
ax.legend()
ax.set_title("fp8 grids")
show(fig, "04_fp8_grid.png")

# %% [markdown]
# ## 2. Quantisation with scales
#
# An fp8 format holds values up to ±448 (e4m3fn) and loses precision near zero, so real data is
# *scaled*: `codes = round(x / scale)` with `scale = amax / fp8_max`, one scale per tensor, per row
# (for the left operand) or per column (for the right one).

# %%
M, K, N = 256, 512, 384
a = (rng.standard_normal((M, K)) * np.exp(3 * rng.standard_normal((M, 1)))).astype(np.float32)  # rows of varied scale
b = rng.standard_normal((K, N)).astype(np.float32)
codes_a, sa = quantize_fp8(a, axis=1)          # per-row scales [M, 1]
codes_b, sb = quantize_fp8(b, axis=0)          # per-column scales [1, N]
codes_t, st = quantize_fp8(a)                  # one scale for the whole tensor
print("codes dtype", codes_a.dtype, "| per-row scales", sa.shape, "| per-column", sb.shape, "| tensor scale", st)
row_err = {}
for label, recon in (("per-row", codes_a.astype(np.float32) * sa), ("per-tensor", codes_t.astype(np.float32) * st)):
    # each row's worst error relative to that row's largest element
    row_err[label] = np.abs(recon - a).max(1) / np.abs(a).max(1)
    print(f"{label:10s} scales: worst row error / row amax: median {np.median(row_err[label]):.4f}, "
          f"worst row {row_err[label].max():.4f}")
# rows far below the tensor's amax lose their precision under one scale (they fall into fp8's subnormals)
assert row_err["per-row"].max() <= 2 ** -4 < row_err["per-tensor"].max()
# amax scaling: the largest element of each row maps onto the format's largest finite value
assert np.allclose(np.abs(codes_a.astype(np.float32)).max(1), float(ml_dtypes.finfo(codes_a.dtype).max))

# %% [markdown]
# ## 3. fp8 matmul against bf16 and fp32
#
# `matmul_fp8` multiplies the codes exactly, accumulates in fp32 and applies the scales on the way
# out of PSUM. Errors are measured against float64 on the *original* fp32 data, so they include the
# quantisation.

# %%
ref = a.astype(np.float64) @ b.astype(np.float64)
c_fp8 = matmul_fp8(codes_a, codes_b, sa, sb)
c_bf16 = matmul(a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16))
c_fp32 = matmul(a, b)
scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)    # the natural size of each sum
errs = {name: np.abs(c.astype(np.float64) - ref) / scale
        for name, c in (("fp8 e4m3 (scaled)", c_fp8), ("bf16", c_bf16), ("fp32", c_fp32))}
for name, e in errs.items():
    print(f"{name:18s} max error / (|A| @ |B|) = {e.max():.2e}   median {np.median(e):.2e}")

# the fp8 kernel computes exactly the fp32 sum of the products of the codes, times the scales
exact = (codes_a.astype(np.float64) @ codes_b.astype(np.float64)) * sa * sb
assert np.all(np.abs(c_fp8 - exact) <= K * 2.0 ** -23 * (np.abs(codes_a.astype(np.float64)) @ np.abs(codes_b.astype(np.float64))) * sa * sb + 1e-30)
assert errs["fp32"].max() < K * 2.0 ** -23
assert errs["bf16"].max() < 2 ** -7 and errs["fp8 e4m3 (scaled)"].max() < 2 ** -3
assert np.median(errs["fp32"]) < np.median(errs["bf16"]) < np.median(errs["fp8 e4m3 (scaled)"])

# %% [markdown]
# Error heat-maps (same colour scale, log): fp8 errors are about an order of magnitude above bf16's,
# which are about four orders above fp32's.

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for ax, (name, e) in zip(axes, errs.items()):
    im = ax.imshow(np.log10(e + 1e-12), vmin=-9, vmax=-1, cmap="magma", aspect="auto")
    ax.set_title(f"{name}: log10 error / (|A|@|B|)", fontsize=9)
fig.colorbar(im, ax=axes.tolist())
show(fig, "04_error_heatmaps.png")

fig, ax = plt.subplots(figsize=(7, 3))
for name, e in errs.items():
    ax.hist(np.log10(e.ravel() + 1e-12), bins=80, histtype="step", label=name)
ax.set_xlabel("log10 relative error")
ax.legend()
show(fig, "04_error_histogram.png")
print("notebook 04: all assertions passed")
