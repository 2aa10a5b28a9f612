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
# # 08 — Testing kernels: tolerances, property tests, JIT vs interpreter, bad inputs
#
# A kernel test compares the kernel with a numpy reference, on many shapes and values, with a
# tolerance that matches the output format. nki_lite gives you:
#
# * `nki_lite.testing.assert_close(actual, expected, dtype=None, rtol=None, atol=None)` — per-dtype
#   default tolerances (a few ulps of the output format) and a failure message that says where and
#   by how much;
# * two backends that must agree **bit for bit** — a free second opinion for every test;
# * debug knobs that turn silent garbage into errors at the line (`docs/debugging.md`).
#
# Property tests here use [hypothesis](https://hypothesis.readthedocs.io) (installed with the
# `test` extra).

# %%
import os
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from IPython.display import Image, display

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.testing import TOLERANCES, assert_close


def show(fig, name):
    fig.savefig(name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    display(Image(name))


# %% [markdown]
# ## The kernel under test: RMS norm over the last axis, any row count

# %%
@nki.jit
def rmsnorm(x, w, eps=1e-6):
    R, D = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jd = nl.arange(128)[:, None], nl.arange(D)[None, :]
    wt = nl.load(w.reshape((1, D)))                         # [1, D], broadcast over partitions below
    for i in nl.affine_range((R + 127) // 128):
        rows = i * 128 + ip
        inside = rows < R
        t = nl.load(x[rows, jd], mask=inside, dtype=nl.float32)
        ms = nl.mean(nl.square(t, mask=inside), axis=1, keepdims=True, mask=inside)
        r = nl.rsqrt(nl.add(ms, eps, mask=inside), mask=inside)
        y = nl.multiply(nl.multiply(t, r, mask=inside), nl.broadcast_to(wt, (128, D)), mask=inside, dtype=x.dtype)
        nl.store(out[rows, jd], y, mask=inside)
    return out


def rmsnorm_ref(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 ** 2, axis=1, keepdims=True) + eps) * w.astype(np.float64)


rng = np.random.default_rng(0)
x = rng.standard_normal((300, 256)).astype(np.float32)
w = rng.standard_normal(256).astype(np.float32)
assert_close(rmsnorm(x, w), rmsnorm_ref(x, w), rtol=2e-6, atol=1e-6)
print("rmsnorm [300, 256] fp32: ok")

# %% [markdown]
# ## `assert_close`: default tolerances and the failure message
#
# The defaults come from the *output* dtype: a few units in its last place.

# %%
for name, (rt, at) in TOLERANCES.items():
    print(f"{name:14s} rtol {rt:<8g} atol {at:g}")

broken = rmsnorm(x, w).copy()
broken[17, 3] += 1e-3                         # what a subtly wrong kernel looks like
try:
    assert_close(broken, rmsnorm_ref(x, w))
    raise RuntimeError("assert_close should have failed")
except AssertionError as e:
    message = str(e)
print(message)
assert "(17, 3)" in message and "1 of 76800" in message

# %% [markdown]
# ## Property tests with hypothesis
#
# Draw the shape and the data; every example is a new trace and compile (cached by signature), so
# keep the examples few and the shapes small in interactive work. `deadline=None` because a first
# compile takes longer than hypothesis's default deadline.

# %%
examples = []


@settings(max_examples=12, deadline=None, derandomize=True)
@given(rows=st.integers(1, 300), cols=st.sampled_from([8, 64, 200]),
       dtype=st.sampled_from([np.float32, ml_dtypes.bfloat16]), data=st.data())
def test_rmsnorm_matches_numpy(rows, cols, dtype, data):
    xs = data.draw(hnp.arrays(np.float32, (rows, cols), elements=st.floats(-100, 100, width=32)))
    ws = data.draw(hnp.arrays(np.float32, (cols,), elements=st.floats(-2, 2, width=32)))
    xs = xs.astype(dtype)
    got = rmsnorm(xs, ws)
    # fp32 arithmetic, one rounding to the output dtype: within the output format's tolerance
    ref = rmsnorm_ref(xs, ws)
    assert_close(got, ref, dtype=dtype, rtol=TOLERANCES[np.dtype(dtype).name][0] + 1e-5,
                 atol=1e-5 * np.abs(ws).max() + TOLERANCES[np.dtype(dtype).name][1])
    # and the interpreter, the definition of the numerics, gives the same bits
    assert got.tobytes() == rmsnorm(xs, ws, mode="interpret").tobytes()
    examples.append((rows, cols, np.dtype(dtype).name))


test_rmsnorm_matches_numpy()
print(len(examples), "examples passed, e.g.", examples[:4])
assert len(examples) >= 12

# %% [markdown]
# The shapes hypothesis tried (it prefers edge cases: 1 row, exactly 128, just past a tile):

# %%
fig, ax = plt.subplots(figsize=(6, 2.6))
for dt, marker in (("float32", "o"), ("bfloat16", "s")):
    pts = [(r, c) for r, c, d in examples if d == dt]
    if pts:
        ax.scatter(*zip(*pts), marker=marker, label=dt)
for b in (128, 256):
    ax.axvline(b, color="grey", ls=":", lw=1)
ax.set_xlabel("rows (tile boundaries dotted)")
ax.set_ylabel("columns")
ax.legend()
show(fig, "08_hypothesis_shapes.png")

# %% [markdown]
# ## Bad inputs and the debug knobs
#
# **NaN creation.** With `NKI_LITE_DEBUG_NANS=1` the first instruction that *creates* a NaN from
# non-NaN inputs raises at its line (the call runs in the interpreter while a knob is on).
# Here: rsqrt of a negative mean, from an `eps` that should never be negative.

# %%
os.environ["NKI_LITE_DEBUG_NANS"] = "1"
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # the knob changed between calls: warned once, silenced here
        rmsnorm(np.zeros((128, 8), np.float32), np.ones(8, np.float32), eps=-1.0)
    raise RuntimeError("expected NL-E903")
except nki.NkiLiteError as e:
    print(e)
    assert e.code == "NL-E903"
finally:
    del os.environ["NKI_LITE_DEBUG_NANS"]
# without the knob, the NaNs simply appear in the result
assert np.isnan(rmsnorm(np.zeros((128, 8), np.float32), np.ones(8, np.float32), eps=-1.0)).all()

# %% [markdown]
# **Uninitialised reads.** Forgetting the mask on the *store* of a ragged tile writes the tail
# rows' never-loaded garbage into the output: a tiny `nl.exp` kernel with that bug, caught by
# `NKI_LITE_DEBUG_UNINIT=1` at the line that read the unwritten memory.

# %%
@nki.jit
def exp_pad_bug(x):
    out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    t = nl.load(x[ip, jf], mask=ip < x.shape[0])          # rows past x.shape[0] are never written
    nl.store(out[ip, jf], nl.exp(t))                      # ... but all 128 rows reach the output
    return out


os.environ["NKI_LITE_DEBUG_UNINIT"] = "1"
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp_pad_bug(np.ones((100, 8), np.float32))
    raise RuntimeError("expected NL-E902")
except nki.NkiLiteError as e:
    print(e)
    assert e.code == "NL-E902"
finally:
    del os.environ["NKI_LITE_DEBUG_UNINIT"]

# %% [markdown]
# **Races only some orders show.** Inside one program, the static check already rejects
# `affine_range` iterations that touch each other's data, at trace time (notebook 02). Races
# *between SPMD programs* need the dynamic check: `NKI_LITE_SHUFFLE=<seed>` runs programs (and
# `affine_range` iterations) in a seeded random order and tracks who touched each element. The
# classic bug: a store that forgot its program's offset, so every program writes the same rows.
# On sequential CPU execution the last program simply wins and a test might even pass.

# %%
@nki.jit
def double_spmd_bug(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    rows = nl.program_id(0) * 128 + ip
    nl.store(out[ip, jf], nl.multiply(nl.load(x[rows, jf]), 2.0))    # should be out[rows, jf]
    return out


x4 = np.ones((512, 8), np.float32)
double_spmd_bug[4](x4)                        # no error without the knob: nothing checks program order
os.environ["NKI_LITE_SHUFFLE"] = "7"
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        double_spmd_bug[4](x4)
    raise RuntimeError("expected NL-E602")
except nki.NkiLiteError as e:
    print(e)
    assert e.code == "NL-E602"
finally:
    del os.environ["NKI_LITE_SHUFFLE"]

# %% [markdown]
# **Wrong arguments.** A kernel unpacking `R, D = x.shape` given a 3-D tensor says what it expected.

# %%
try:
    rmsnorm(np.ones((2, 128, 8), np.float32), np.ones(8, np.float32))
    raise RuntimeError("expected an error")
except nki.NkiLiteError as e:
    print(e)
    assert e.code == "NL-E901"
print("notebook 08: all assertions passed")
