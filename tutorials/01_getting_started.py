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
# # 01 — Getting started: vector add, the three memories, SPMD grids, JIT vs interpreter
#
# An NKI kernel is a Python function that moves *tiles* between memories and runs instructions on
# them. nki_lite traces it once into a small tile IR, checks the hardware rules at your source line,
# and runs it on the CPU, either compiled by an LLVM JIT (the default) or in a numpy interpreter
# that defines every op's numerics. The two agree bit for bit.
#
# The three memories of a NeuronCore (docs/concepts.md):
#
# | memory | where | shape rule | what lives there |
# |---|---|---|---|
# | HBM (`nl.shared_hbm`) | device DRAM | any shape | kernel inputs and outputs |
# | SBUF (`nl.sbuf`) | on-chip, 128 partitions | dim 0 = partitions, ≤ 128 | tiles the engines read and write |
# | PSUM (`nl.psum`) | on-chip, 128 partitions, 8 banks of 2 KiB | ≤ 128 × 512 fp32 | matmul accumulators |
#
# A kernel *loads* from HBM into SBUF, computes, and *stores* back.

# %%
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


def show(fig, name):
    """Save a matplotlib figure as PNG (Agg backend) and display it inline."""
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


rng = np.random.default_rng(0)

# %% [markdown]
# ## A first kernel: one tile
#
# `nl.load` copies an HBM tensor into an SBUF tile (the partition axis first), `+` runs on the
# Vector Engine, `nl.store` writes the result to an HBM output the kernel allocated and returns.

# %%
@nki.jit
def add_one_tile(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.load(a)          # HBM -> SBUF tile [128, 512]
    tb = nl.load(b)
    nl.store(out, ta + tb)   # SBUF -> HBM
    return out


a = rng.standard_normal((128, 512)).astype(np.float32)
b = rng.standard_normal((128, 512)).astype(np.float32)
c = add_one_tile(a, b)
assert np.array_equal(c, a + b)
print("one tile: ok", c.shape, c.dtype)

# %% [markdown]
# The kernel became a small IR in which every instruction carries this notebook's line:

# %%
print(add_one_tile.inspect_ir(a, b))

# %% [markdown]
# ## Bigger than one tile: loops and SPMD grids
#
# SBUF tiles have at most 128 partitions. A [1024, 512] tensor is eight tiles. There are two ways to
# cover it: an `nl.affine_range` loop inside one program, or an **SPMD grid** — `kernel[8](...)`
# launches 8 programs, and each one asks `nl.program_id(0)` which slice is its own.

# %%
@nki.jit
def add_loop(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(a.shape[1])[None, :]
    for i in nl.affine_range(a.shape[0] // 128):     # iterations are independent: may run in any order
        rows = i * 128 + ip
        nl.store(out[rows, jf], nl.load(a[rows, jf]) + nl.load(b[rows, jf]))
    return out


@nki.jit
def add_spmd(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    jf = nl.arange(a.shape[1])[None, :]
    nl.store(out[rows, jf], nl.load(a[rows, jf]) + nl.load(b[rows, jf]))
    return out


A = rng.standard_normal((1024, 512)).astype(np.float32)
B = rng.standard_normal((1024, 512)).astype(np.float32)
assert np.array_equal(add_loop(A, B), A + B)
assert np.array_equal(add_spmd[8](A, B), A + B)
print("loop and SPMD grid agree with numpy")

# %% [markdown]
# Which program wrote which rows? A 2-D grid makes it visible: each program writes its own id.

# %%
@nki.jit
def who_wrote(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    p0, p1 = nl.program_id(0), nl.program_id(1)
    rows = p0 * 128 + nl.arange(128)[:, None]
    cols = p1 * 64 + nl.arange(64)[None, :]
    # nisa.iota materialises an index expression as tile data (on the GpSimd engine)
    ident = nisa.iota(0 * nl.arange(128)[:, None] + 0 * nl.arange(64)[None, :] + p0 * nl.num_programs(1) + p1,
                      dtype=nl.float32)
    nl.store(out[rows, cols], ident)
    return out


ids = who_wrote[4, 3](np.zeros((512, 192), np.float32))
fig, ax = plt.subplots(figsize=(5, 5))
im = ax.imshow(ids, aspect="auto", cmap="tab20")
ax.set_title("program id that wrote each element (grid [4, 3])")
ax.set_xlabel("column")
ax.set_ylabel("row")
fig.colorbar(im, ax=ax)
show(fig, "01_spmd_grid.png")
expected_ids = np.add.outer(np.repeat(np.arange(4) * 3, 128), np.repeat(np.arange(3), 64)).astype(np.float32)
assert np.array_equal(ids, expected_ids)

# %% [markdown]
# ## JIT and interpreter
#
# The default backend compiles the IR with LLVM. `mode="interpret"` runs the numpy interpreter, the
# definition of every op's numerics. They agree bit for bit. The JIT compiles once per argument
# signature; later calls go straight to the compiled code (`cache_info()` counts hits and compiles).

# %%
jit_out = add_spmd[8](A, B, mode="jit")
ref_out = add_spmd[8](A, B, mode="interpret")
assert jit_out.tobytes() == ref_out.tobytes()


def best_of(f, n=5):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


grid = add_spmd[8]
t_jit = best_of(lambda: grid(A, B, mode="jit"))
t_int = best_of(lambda: grid(A, B, mode="interpret"), n=3)
t_np = best_of(lambda: A + B)
print(f"JIT {t_jit * 1e6:.0f} us, interpreter {t_int * 1e6:.0f} us, numpy {t_np * 1e6:.0f} us")
print("cache:", grid.cache_info())

fig, ax = plt.subplots(figsize=(6, 2.5))
ax.barh(["numpy A + B", "nki_lite JIT", "nki_lite interpreter"], [t_np * 1e6, t_jit * 1e6, t_int * 1e6],
        color=["grey", "tab:blue", "tab:orange"])
ax.set_xscale("log")
ax.set_xlabel("microseconds per call (best of a few, this CPU)")
show(fig, "01_jit_vs_interpreter.png")

# %% [markdown]
# ## What you have seen
# * `nl.load` / compute / `nl.store` between HBM and SBUF; at most 128 partitions per tile.
# * `nl.affine_range` loops and `kernel[grid]` SPMD programs with `nl.program_id`.
# * `inspect_ir` shows the traced IR; `mode="interpret"` is the bit-exact oracle of the JIT.
#
# Next: 02 — tiles, masks, placement and what each mistake looks like.

# %%
assert np.array_equal(add_loop(A, B, mode="interpret"), A + B)
assert np.array_equal(who_wrote[4, 3](np.zeros((512, 192), np.float32), mode="interpret"), expected_ids)
print("notebook 01: all assertions passed")
