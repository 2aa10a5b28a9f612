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
# # 02 — Tiles, masks and placement: the rules, and what breaking each one looks like
#
# Every tile lives in SBUF or PSUM, and its **first axis is the partition axis** (at most 128).
# The remaining axes are the *free* axes. PSUM is 8 banks of 2 KiB per partition: one accumulator
# tile is at most 512 fp32 values per partition. Instructions read and write on-chip tiles only;
# HBM is reached by `nl.load` / `nl.store` (DMA).
#
# nki_lite checks these rules while tracing and names **your line**. Every error below is raised
# for real in its cell, caught, and printed; the cell after it shows the fix.

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


def expect_error(code, fn, *args):
    """Call fn(*args), which must raise the nki_lite error `code`; print the message and return it."""
    try:
        fn(*args)
    except nki.NkiLiteError as e:
        print(e)
        assert e.code == code, (e.code, code)
        return e
    raise AssertionError(f"expected {code}, nothing was raised")


rng = np.random.default_rng(0)
x256 = rng.standard_normal((256, 64)).astype(np.float32)

# %% [markdown]
# ## Rule 1: at most 128 partitions per tile
#
# Loading a [256, 64] tensor into one tile asks for 256 partitions.

# %%
@nki.jit
def exp_too_tall(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)                     # a [256, 64] tile: 256 partitions
    nl.store(out, nl.exp(t))
    return out


err = expect_error("NL-E101", exp_too_tall, x256)

# %% [markdown]
# **Fix:** loop over 128-row tiles.

# %%
@nki.jit
def exp_tiled(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128 + ip, jf], nl.exp(nl.load(x[i * 128 + ip, jf])))
    return out


np.testing.assert_allclose(exp_tiled(x256), np.exp(x256), rtol=1e-6)
print("fixed: ok")

# %% [markdown]
# ## Rule 2: ragged tails need a mask
#
# 300 rows are two full tiles and a tail of 44. Looping `ceil(300 / 128)` times without a mask
# reads and writes past the end of the tensor.

# %%
x300 = rng.standard_normal((300, 64)).astype(np.float32)


@nki.jit
def exp_unmasked(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    for i in nl.affine_range((x.shape[0] + 127) // 128):
        nl.store(out[i * 128 + ip, jf], nl.exp(nl.load(x[i * 128 + ip, jf])))
    return out


err = expect_error("NL-E502", exp_unmasked, x300)

# %% [markdown]
# **Fix:** `mask=` with an affine comparison of the index; the masked-off rows are never touched.

# %%
@nki.jit
def exp_masked(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    ip, jf = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    for i in nl.affine_range((n + 127) // 128):
        inside = i * 128 + ip < n
        t = nl.load(x[i * 128 + ip, jf], mask=inside)
        nl.store(out[i * 128 + ip, jf], nl.exp(t, mask=inside), mask=inside)
    return out


np.testing.assert_allclose(exp_masked(x300), np.exp(x300), rtol=1e-6)
print("fixed: ok")

# %% [markdown]
# A picture of the tiling: which tile iteration covers which row, and the unused partitions of the
# last tile (masked off).

# %%
cover = np.full((3 * 128, 64), np.nan)
for i in range(3):
    rows = np.arange(i * 128, (i + 1) * 128)
    cover[rows[rows < 300]] = i
fig, ax = plt.subplots(figsize=(4, 5))
ax.imshow(cover, aspect="auto", cmap="viridis", interpolation="nearest")
ax.axhline(299.5, color="red", lw=1)
ax.text(2, 340, "masked off\n(rows 300..383)", color="red")
ax.set_title("tile iteration per row, 300 rows")
ax.set_ylabel("row (partition of tile i = row - 128 i)")
show(fig, "02_ragged_tiles.png")

# %% [markdown]
# ## Rule 3: compute reads on-chip tiles, not HBM
#
# Passing the HBM input straight to an instruction is a memory-space error.

# %%
@nki.jit
def exp_from_hbm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(x))           # x is in HBM
    return out


err = expect_error("NL-E301", exp_from_hbm, x256[:128])

# %% [markdown]
# **Fix:** `nl.load` it first (as in `exp_tiled`).
#
# ## Rule 4: a PSUM tile fits one 2 KiB bank
#
# A matmul accumulates in PSUM. [128, 1024] fp32 is 4 KiB per partition, two banks.

# %%
lhsT = rng.standard_normal((128, 128)).astype(np.float32)
rhs = rng.standard_normal((128, 1024)).astype(np.float32)


@nki.jit
def mm_wide_psum(lhsT, rhs):
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, rhs.shape[1]), nl.float32, buffer=nl.psum)   # 1024 fp32 per partition
    acc += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))
    nl.store(out, nl.copy(acc))
    return out


err = expect_error("NL-E404", mm_wide_psum, lhsT, rhs)

# %% [markdown]
# **Fix:** one accumulator per 512-column block.

# %%
@nki.jit
def mm_banked(lhsT, rhs):
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhsT)
    for j in nl.affine_range(rhs.shape[1] // 512):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(a, nl.load(rhs[:, j * 512:(j + 1) * 512]))
        nl.store(out[:, j * 512:(j + 1) * 512], nl.copy(acc))
    return out


np.testing.assert_allclose(mm_banked(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)
print("fixed: ok")

# %% [markdown]
# ## Rule 5: matmul shapes
#
# `nc_matmul(stationary[K, M], moving[K, N])` contracts over the partition axis K of *both*
# operands (the result is stationaryᵀ @ moving, [M, N]). Passing A itself instead of Aᵀ mismatches K.

# %%
a_64x128 = rng.standard_normal((64, 128)).astype(np.float32)


@nki.jit
def mm_wrong_k(a, rhs):
    out = nl.ndarray((a.shape[0], 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((a.shape[0], 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(nl.load(a), nl.load(rhs[:, 0:512]))   # a is [M=64, K=128]: K must lead
    nl.store(out, nl.copy(acc))
    return out


err = expect_error("NL-E105", mm_wrong_k, a_64x128, rhs)

# %% [markdown]
# **Fix:** load Aᵀ (`nl.load_transpose2d`, a transposing DMA) so K is the partition axis.

# %%
@nki.jit
def mm_right_k(a, rhs):
    out = nl.ndarray((a.shape[0], 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((a.shape[0], 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(nl.load_transpose2d(a), nl.load(rhs[:, 0:512]))
    nl.store(out, nl.copy(acc))
    return out


np.testing.assert_allclose(mm_right_k(a_64x128, rhs), a_64x128 @ rhs[:, :512], rtol=1e-4, atol=1e-4)
print("fixed: ok")

# %% [markdown]
# ## Rule 6: `affine_range` iterations must be independent
#
# `affine_range` promises the iterations can run in any order (the hardware overlaps them).
# Accumulating into the same HBM rows from every iteration breaks that promise.

# %%
@nki.jit
def row_sum_racy(x):
    out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.zeros((128, x.shape[1]), x.dtype))
    for i in nl.affine_range(x.shape[0] // 128):
        acc = nl.load(out)
        nl.store(out, acc + nl.load(x[i * 128:(i + 1) * 128, :]))
    return out


err = expect_error("NL-E601", row_sum_racy, x256)

# %% [markdown]
# **Fix:** carry the dependency in `nl.sequential_range`, or better, keep the running sum in SBUF.

# %%
@nki.jit
def row_sum_sbuf(x):
    out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    for i in nl.sequential_range(x.shape[0] // 128):
        acc[...] = acc + nl.load(x[i * 128:(i + 1) * 128, :])
    nl.store(out, acc)
    return out


np.testing.assert_allclose(row_sum_sbuf(x256), x256[:128] + x256[128:], rtol=1e-6)
print("fixed: ok")

# %% [markdown]
# ## Every error carries a code, the line and a hint
#
# Errors are Python exceptions with attributes; `docs/errors.md` lists every code with its fix.

# %%
e = expect_error("NL-E101", exp_too_tall, x256)
print("code:", e.code, "| name:", e.name, "| line:", e.loc.line, "| hint:", e.hint)
assert e.loc.line > 0 and e.hint
print("notebook 02: all assertions passed")
