"""Data movement and layout ops (lang/ops_memory.py, lang/isa_data.py, lang/ops_math.py's
transpose): nl.load_transpose2d, nl.transpose, nisa.nc_transpose, shared constants / nl.static_cast
and nl.device_print, against numpy references of the documented semantics, on both backends."""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir

from .oracle import F32, assert_bits, convert_ref, storage, values, widen

from .both_backends import backend, nice, random_bits_f32, rng_of  # noqa: F401 - backend: autouse fixture

BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


# =============================================================================== nl.load_transpose2d

@nki.jit
def load_t2d(a, dt):
    R, C = a.shape
    out = nl.ndarray((C, R), dtype=dt, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a, dtype=dt))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int16"])
def test_load_transpose2d_copies_bits(dt):
    """Same dtype: the DMA transposes and keeps every bit (NaN payloads included)."""
    a = random_bits_f32(1, (100, 70)) if dt == "float32" else values(rng_of(1), (100, 70), dt)
    out = load_t2d(a, dt)
    assert_bits(out, np.ascontiguousarray(a.T), f"load_transpose2d {dt}")


def test_load_transpose2d_with_dtype_converts_once():
    a = values(rng_of(2), (64, 48), "float32")
    assert_bits(load_t2d(a, "bfloat16"), convert_ref(a.T, "float32", "bfloat16"), "load_transpose2d f32->bf16")


@nki.jit
def load_t2d_view(a):
    out = nl.ndarray((32, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a[16:80, 8:40]))
    return out


def test_load_transpose2d_of_a_view():
    a = nice(3, (100, 50))
    assert_bits(load_t2d_view(a), np.ascontiguousarray(a[16:80, 8:40].T), "load_transpose2d view")


@nki.jit
def load_t2d_ragged(a):
    """[n, C] -> [C, n] in 64-row blocks; the last block is masked on the output's free axis."""
    n, C = a.shape
    out = nl.ndarray((C, n), dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(64)[:, None]
    jc = nl.arange(C)[None, :]
    oc = nl.arange(C)[:, None]
    orow = nl.arange(64)[None, :]
    for i in nl.affine_range((n + 63) // 64):
        t = nl.load_transpose2d(a[i * 64 + ip, jc], mask=(i * 64 + orow < n))
        nl.store(out[oc, i * 64 + orow], t, mask=(i * 64 + orow < n))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_load_transpose2d_ragged_blocks_with_masks(dt):
    a = values(rng_of(4), (150, 20), dt)
    assert_bits(load_t2d_ragged(a), np.ascontiguousarray(a.T), f"ragged load_transpose2d {dt}")


@nki.jit
def load_t2d_3d(a):
    out = nl.ndarray((4, 3), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(a))
    return out


def test_load_transpose2d_needs_a_2d_view():
    with pytest.raises(errors.ShapeError, match="2-D"):
        load_t2d_3d(np.zeros((2, 3, 4), F32))


# =============================================================================== nl.transpose

@nki.jit
def nl_transpose(a, dt):
    P, F = a.shape
    out = nl.ndarray((F, P), dtype=dt, buffer=nl.shared_hbm)
    nl.store(out, nl.transpose(nl.load(a), dtype=dt))
    return out


@pytest.mark.parametrize("shape", [(128, 100), (7, 3), (1, 128)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nl_transpose_copies_bits(dt, shape):
    a = random_bits_f32(5, shape) if dt == "float32" else values(rng_of(5), shape, dt)
    assert_bits(nl_transpose(a, dt), np.ascontiguousarray(a.T), f"nl.transpose {dt} {shape}")


def test_nl_transpose_with_dtype():
    a = values(rng_of(6), (40, 24), "float32")
    assert_bits(nl_transpose(a, "bfloat16"), convert_ref(a.T, "float32", "bfloat16"), "nl.transpose dtype=")


def test_nl_transpose_result_over_128_partitions_is_rejected():
    with pytest.raises(errors.ShapeError, match="partition"):
        nl_transpose(np.zeros((64, 256), F32), "float32")


@nki.jit
def nl_transpose_3d(a):
    out = nl.ndarray((4, 2), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.transpose(nl.load(a))
    nl.store(out, t)
    return out


def test_nl_transpose_needs_2d_tile():
    with pytest.raises(errors.ShapeError, match="2-D"):
        nl_transpose_3d(np.zeros((2, 3, 4), F32))


# =============================================================================== nisa.nc_transpose

def nc_transpose_kernel(engine, dtype=None):
    @nki.jit
    def k(a):
        P, F = a.shape
        out = nl.ndarray((F, P), dtype=dtype or a.dtype, buffer=nl.shared_hbm)
        t = nisa.nc_transpose(nl.load(a), engine=engine, dtype=dtype)
        k.spaces.append(t.space)
        nl.store(out, nl.copy(t))
        return out
    k.spaces = []
    return k


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
@pytest.mark.parametrize("shape", [(128, 128), (128, 64), (33, 100)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nc_transpose_on_the_tensor_engine_lands_in_psum(dt, shape):
    k = nc_transpose_kernel(None)
    a = random_bits_f32(7, shape) if dt == "float32" else values(rng_of(7), shape, dt)
    assert_bits(k(a), np.ascontiguousarray(a.T), f"nc_transpose tensor {dt} {shape}")
    assert k.spaces == [ir.Space.PSUM]


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
@pytest.mark.parametrize("shape", [(32, 32), (20, 7), (1, 32)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_nc_transpose_small_tiles_use_the_vector_engine(dt, shape):
    for engine in (None, nisa.vector_engine):
        k = nc_transpose_kernel(engine)
        a = values(rng_of(8), shape, dt)
        assert_bits(k(a), np.ascontiguousarray(a.T), f"nc_transpose vector {dt} {shape}")
        assert k.spaces == [ir.Space.SBUF]
        assert "transpose(" in k.inspect_ir(a) and "engine=vector" in k.inspect_ir(a)


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
def test_nc_transpose_small_tile_forced_onto_the_tensor_engine():
    k = nc_transpose_kernel(nisa.tensor_engine)
    a = nice(9, (16, 8))
    assert_bits(k(a), np.ascontiguousarray(a.T), "nc_transpose forced tensor")
    assert k.spaces == [ir.Space.PSUM]


@pytest.mark.filterwarnings("ignore::nki_lite.KernelPurityWarning")  # k.spaces records trace-time facts on purpose
def test_nc_transpose_dtype_converts():
    k = nc_transpose_kernel(None, dtype="bfloat16")
    a = values(rng_of(10), (64, 96), "float32")
    assert_bits(k(a), convert_ref(a.T, "float32", "bfloat16"), "nc_transpose dtype=")


@pytest.mark.parametrize("engine,shape,limit", [(nisa.vector_engine, (64, 32), "32x32"),
                                                (nisa.vector_engine, (32, 33), "32x32"),
                                                (None, (64, 256), "128x128"),
                                                (nisa.tensor_engine, (128, 129), "128x128")])
def test_nc_transpose_size_limits(engine, shape, limit):
    with pytest.raises(errors.ShapeError, match=limit) as ei:
        nc_transpose_kernel(engine)(np.zeros(shape, F32))
    assert ei.value.name == "free_size_limit"


@nki.jit
def nc_transpose_3d(a):
    out = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nisa.nc_transpose(nl.load(a))))
    return out


def test_nc_transpose_with_several_free_axes_is_not_built():
    with pytest.raises(errors.UnsupportedError, match="several free axes"):
        nc_transpose_3d(np.zeros((4, 2, 4), F32))


@nki.jit
def nc_transpose_masked(a):
    P, F = a.shape
    out = nl.ndarray((F, P), dtype=a.dtype, buffer=nl.shared_hbm)
    r = nl.arange(F)[:, None]
    c = nl.arange(P)[None, :]
    t = nisa.nc_transpose(nl.load(a), mask=(r < 10))
    res = nl.zeros((F, P), dtype=a.dtype)
    res[r, c] = nl.copy(t[r, c], mask=(r < 10))
    nl.store(out, res)
    return out


def test_nc_transpose_mask_limits_the_written_rows():
    a = nice(11, (128, 64))
    want = np.zeros((64, 128), F32)
    want[:10] = a.T[:10]
    assert_bits(nc_transpose_masked(a), want, "masked nc_transpose")


# =============================================================================== shared constants / static_cast

TABLE = (np.arange(96, dtype=np.float64).reshape(8, 12) - 40.0) / 8.0


@nki.jit
def add_constant(a, dt):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = nl.shared_constant(TABLE, dtype=dt)
    assert c.space == ir.Space.HBM and c.dtype_name == dt
    nl.store(out, nl.add(nl.load(a), nl.load(c), dtype=a.dtype))
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int8"])
def test_shared_constant_is_a_readable_hbm_tensor(dt):
    a = nice(50, (8, 12))
    c = TABLE.astype(storage(dt))
    assert_bits(add_constant(a, dt), (a + widen(c)).astype(F32), f"shared_constant {dt}")


@nki.jit
def identity_out(n, dt):
    out = nl.ndarray((n, n), dtype=dt, buffer=nl.shared_hbm)
    eye = nl.shared_identity_matrix(n) if dt == "uint8" else nl.shared_identity_matrix(n, dtype=dt)
    assert eye.dtype_name == dt
    nl.store(out, nl.load(eye))
    return out


@pytest.mark.parametrize("dt", ["uint8", "float32", "bfloat16"])
def test_shared_identity_matrix(dt):
    got = identity_out(16, dt)
    assert_bits(got, np.identity(16).astype(storage(dt)), f"identity {dt}")


@nki.jit
def transpose_by_identity_matmul(a):
    """x^T via the Tensor Engine: nc_matmul(stationary=x [K, M], moving=I [K, K]) = x^T @ I."""
    K, M = a.shape
    out = nl.ndarray((M, K), dtype=nl.float32, buffer=nl.shared_hbm)
    eye = nl.load(nl.shared_identity_matrix(K, dtype=nl.bfloat16))
    res = nl.ndarray((M, K), dtype=nl.float32, buffer=nl.psum)
    res[...] = nisa.nc_matmul(nl.load(a), eye)
    nl.store(out, nl.copy(res))
    return out


def test_shared_identity_matrix_feeds_the_tensor_engine():
    a = values(rng_of(51), (64, 96), "bfloat16", "nice")
    assert_bits(transpose_by_identity_matmul(a), widen(a).T.copy(), "identity-matmul transpose")


@nki.jit
def constant_of_tile(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nl.load(nl.shared_constant(t)))
    return out


def test_shared_constant_rejects_tiles():
    with pytest.raises(errors.ArgumentError, match="host data"):
        constant_of_tile(np.zeros((2, 2), F32))


def test_static_cast_on_the_host():
    r = nl.static_cast(np.array([1.7, -2.9, 100.0]), nl.int32)
    assert r.dtype == np.int32 and r.tolist() == [1, -2, 100]
    b = nl.static_cast([0.1, 3.0], "bfloat16")
    assert b.dtype == BF16 and np.array_equal(b, np.array([0.1, 3.0]).astype(BF16))
    h = nl.static_cast(0.1, nl.float16)
    assert np.asarray(h).dtype == np.float16 and float(h) == float(np.float16(0.1))


@nki.jit
def scale_by_static_cast(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    s = nl.static_cast(0.1, nl.float16)          # a trace-time constant, rounded to fp16
    nl.store(out, nl.multiply(nl.load(a), s, dtype=a.dtype))
    return out


def test_static_cast_scalar_as_a_kernel_operand():
    """A static_cast scalar is a trace-time constant with the cast value (0.1 -> fp16 0.0999755859375)."""
    a = nice(52, (4, 8))
    assert_bits(scale_by_static_cast(a), (a * F32(np.float16(0.1))).astype(F32), "x * static_cast(0.1, fp16)")


# =============================================================================== nl.device_print

@nki.jit
def printing(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.device_print("tile t = ", t)
    for i in nl.affine_range(2):
        nl.device_print("row block", t[i * 2:i * 2 + 2, 0:3])
    nl.store(out, t)
    return out


def test_device_print_shows_prefix_and_values(capsys):
    a = np.arange(12, dtype=F32).reshape(4, 3) + 0.5
    out = printing(a)
    assert np.array_equal(out, a)
    text = capsys.readouterr().out
    assert text.count("tile t = ") == 1 and text.count("row block") == 2
    whole, first, second = text.split("row block")

    def numbers(part):
        return [float(v) for v in re.findall(r"-?\d+\.\d+", part)]
    assert numbers(whole) == a.ravel().tolist()
    assert numbers(first) == a[0:2, 0:3].ravel().tolist()          # printed once per loop iteration,
    assert numbers(second) == a[2:4, 0:3].ravel().tolist()         # at run time, with that iteration's data


@nki.jit
def print_masked(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    ip = nl.arange(a.shape[0])[:, None]
    nl.device_print("masked:", t, mask=(ip < 1))
    nl.store(out, t)
    return out


def test_device_print_with_mask_prints_only_the_selected_values(capsys):
    a = np.full((2, 3), 7.25, F32)
    print_masked(a)
    text = capsys.readouterr().out
    assert "masked:" in text and text.count("7.25") == 3


def test_device_print_needs_a_tile():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.device_print("x", 3.0)
        nl.store(out, nl.load(a))
        return out
    with pytest.raises(errors.ArgumentError, match="prints tiles"):
        k(np.zeros((2, 2), F32))
