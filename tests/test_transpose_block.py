"""The JIT's blocked 2-D transpose (lower/llvm/transpose_block.py) moves exactly the interpreter's bits:
full 16 x 16 blocks, ragged right and bottom edges, every storage width, views with row strides and
offsets, Tensor and Vector Engine transposes, and the cases that must keep the generic rule (masks,
conversions) still agree; the fast path is taken exactly when eligible."""
import numpy as np
import ml_dtypes
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.lower.llvm import transpose_block as TB
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.runtime import jit as J

from .both_backends import random_bits_f32
from .test_jit_differential import run_both

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")


@nki.jit
def _nc_t(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_transpose(nl.load(x), engine=nisa.tensor_engine))
    return out


@nki.jit
def _vec_t(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_transpose(nl.load(x), engine=nisa.vector_engine))
    return out


@nki.jit
def _view_t(x):
    """A strided window of a wider SBUF tile, transposed into a window of a wider PSUM tile."""
    t = nl.load(x)
    acc = nl.zeros((128, 96), dtype=x.dtype, buffer=nl.psum)
    acc[8:72, 16:80] = nisa.nc_transpose(t[16:80, 40:104], engine=nisa.tensor_engine)
    out = nl.ndarray((128, 96), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def _masked_t(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    i, j = nl.arange(x.shape[1])[:, None], nl.arange(x.shape[0])[None, :]
    t = nl.load(x)
    y = nl.zeros((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    y[i, j] = nisa.nc_transpose(t, engine=nisa.vector_engine, mask=(i < 20))
    nl.store(out, y)
    return out


@pytest.mark.parametrize("shape", [(16, 16), (128, 128), (32, 48), (128, 20), (17, 33), (100, 128), (64, 31)])
def test_fp32_bits_any_shape(shape):
    """Random bit patterns (NaN payloads, infinities, subnormals) move unchanged, every edge case."""
    x = random_bits_f32(sum(shape), shape)
    ref = run_both(_nc_t, [x], f"nc_transpose {shape}")[0]
    assert ref.view(np.uint32).tobytes() == np.ascontiguousarray(x.T).view(np.uint32).tobytes()


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16, np.int8, np.int32, ml_dtypes.float8_e4m3])
def test_storage_widths(dt):
    """Every storage width moves as bits (Vector Engine transposes: up to 32 x 32)."""
    x = np.random.default_rng(3).integers(0, 120, size=(32, 20)).astype(np.int8).astype(dt)
    ref = run_both(_vec_t, [x], f"vector transpose {np.dtype(dt)}")[0]
    assert ref.tobytes() == np.ascontiguousarray(x.T).tobytes()


def test_views_with_strides_and_offsets():
    x = random_bits_f32(7, (128, 128))
    ref = run_both(_view_t, [x], "windowed transpose")[0]
    want = np.zeros((128, 96), np.float32)
    want[8:72, 16:80] = x[16:80, 40:104].T
    assert ref.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()


def test_masked_keeps_the_generic_rule_and_agrees():
    x = np.arange(24 * 32, dtype=np.float32).reshape(24, 32)
    ref = run_both(_masked_t, [x], "masked transpose")[0]
    want = np.zeros((32, 24), np.float32)
    want[:20] = x.T[:20]
    assert np.array_equal(ref, want)


def _transposes(kernel, *args):
    """The kernel's transpose instructions after the backend passes, with the JIT emitter's verdict."""
    kir = kernel.trace(*args)
    seen = []
    orig = TB.eligible

    def spy(em, instr):
        ok = orig(em, instr)
        seen.append(ok)
        return ok
    TB.eligible = spy
    try:
        J.CACHE.clear()
        J.lookup(kir)
    finally:
        TB.eligible = orig
        J.CACHE.clear()
    return seen


def test_fast_path_taken_exactly_when_eligible():
    f32 = np.zeros((32, 48), np.float32)
    assert _transposes(_nc_t, f32) == [True]
    assert _transposes(_nc_t, np.zeros((8, 48), np.float32)) == [False]      # narrower than a block
    assert _transposes(_masked_t, np.zeros((24, 32), np.float32)) == [False]                             # masked: generic rule
