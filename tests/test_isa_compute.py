"""nisa compute instructions (lang/isa_compute.py, lang/isa_common.py): activation (+ reduce),
iota, affine_select, reciprocal, scalar_tensor_tensor, tensor_copy_predicated, nc_matmul perf_mode and
get_nc_version.

References restate nki_lite's fp32 step sequence in plain numpy (tests/oracle.py) and must match every
bit, or compare with float64 numpy approximately; each group ends with its error cases. Both backends."""
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
from nki_lite.numerics import fp32math
from nki_lite.testing import assert_close

from .oracle import (F32, assert_bits, canon, f32_to, map1_kernel, reduce_fp32_ref, ref_ops, Scalar, storage, values,
                     widen)

from .both_backends import REDUCE_OPS, backend, nice, random_bits_f32, rng_of  # noqa: F401 - backend: autouse fixture

BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


# =============================================================================== nisa.activation (+ reduce)

def act_ref(fn: str, x, scale=None, bias=None):
    """activation's fp32 steps: x*scale rounded, + bias rounded, then the function (fp32math)."""
    y = widen(x)
    with np.errstate(all="ignore"):
        if scale is not None:
            y = (y * widen(scale)).astype(F32)
        if bias is not None:
            y = (y + widen(bias)).astype(F32)
    return canon(getattr(fp32math, fn)(y) if fn != "copy" else y)


@nki.jit
def act_bias_scale(a, b, s, scale_kind, out_dt):
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    x = nl.load(a)
    bias = nl.load(b)
    scale = nl.load(s) if scale_kind == "tile" else scale_kind
    y = nisa.activation(op=np.exp, data=x, bias=bias, scale=scale, dtype=out_dt)
    nl.store(out, y)
    return out


@pytest.mark.parametrize("scale_kind", ["tile", 0.375, 1.0])
@pytest.mark.parametrize("dt,bias_dt", [("float32", "float32"), ("bfloat16", "bfloat16"), ("bfloat16", "float32")])
def test_activation_scale_then_bias_then_function(dt, bias_dt, scale_kind):
    a = values(rng_of(60), (96, 50), dt, "uniform", -6.0, 6.0)
    b = values(rng_of(61), (96, 1), bias_dt, "uniform", -2.0, 2.0)
    s = values(rng_of(62), (96, 1), "float32", "uniform", -1.5, 1.5)
    got = act_bias_scale(a, b, s, scale_kind, dt)
    scale = s if scale_kind == "tile" else (None if scale_kind == 1.0 else np.float32(scale_kind))
    assert_bits(got, f32_to(act_ref("exp", a, scale, b), dt), f"activation exp {dt} bias {bias_dt} {scale_kind}")
    s64 = s.astype(np.float64) if scale_kind == "tile" else float(scale_kind)
    assert_close(got, np.exp(a.astype(np.float64) * s64 + b.astype(np.float64)), dtype=dt,
                 rtol=2e-6 if dt == "float32" else None)


@nki.jit
def act_scalar_bias(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.activation(op=np.exp, data=nl.load(a), bias=1.0))
    return out


def test_activation_bias_must_be_a_tile():
    with pytest.raises(errors.KernelDTypeError, match=r"\[P, 1\] tile"):
        act_scalar_bias(np.zeros((4, 4), F32))




def act_reduce_kernel(api: str):
    @nki.jit
    def k(a, b, fn, rop, out_dt):
        P, F = a.shape
        out = nl.ndarray((P, F), dtype=out_dt, buffer=nl.shared_hbm)
        red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        bias = nl.load(b)
        r = nl.ndarray((P, 1), dtype=nl.float32)
        if api == "activation":
            y = nisa.activation(op=fn, data=x, bias=bias, scale=0.5, reduce_op=REDUCE_OPS[rop], reduce_res=r,
                                reduce_cmd=nisa.reduce_cmd.reset_reduce, dtype=out_dt)
        else:
            y = nisa.activation_reduce(op=fn, data=x, bias=bias, scale=0.5, reduce_op=REDUCE_OPS[rop],
                                       reduce_res=r, dtype=out_dt)
        nl.store(out, y)
        nl.store(red, r)
        return out, red
    return k


_ACT_REDUCE = {api: act_reduce_kernel(api) for api in ("activation", "activation_reduce")}


@pytest.mark.parametrize("rop", list(REDUCE_OPS))
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
@pytest.mark.parametrize("api", ["activation", "activation_reduce"])
def test_activation_with_reduction(api, dt, rop):
    """reduce_res = reduce_op over the free axis of the *fp32* activation results (nki_lite's order),
    the output tile is rounded to its dtype independently."""
    a = values(rng_of(63), (64, 70), dt, "uniform", -3.0, 3.0)
    b = values(rng_of(64), (64, 1), "float32", "uniform", -1.0, 1.0)
    fn = nl.tanh if rop == "multiply" else np.exp
    fname = "tanh" if rop == "multiply" else "exp"
    out, red = _ACT_REDUCE[api](a, b, fn, rop, dt)
    y = act_ref(fname, a, np.float32(0.5), b)
    assert_bits(out, f32_to(y, dt), f"{api} output")
    assert_bits(red, reduce_fp32_ref(rop, y)[:, None], f"{api} reduce_res {rop}")
    red64 = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}[rop](y.astype(np.float64), 1)
    assert_close(red, red64[:, None], rtol=1e-5)


@nki.jit
def act_reduce_masked(a):
    P, F = a.shape
    red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    r = nl.full((P, 1), 7.0, dtype=nl.float32)
    y = nl.zeros((P, F), dtype=nl.float32)
    y[ip, jf] = nisa.activation(op=nl.copy, data=nl.load(a), reduce_op=np.add, reduce_res=r,
                                mask=(ip < P - 2) & (jf < F - 5))
    nl.store(red, r)
    return red


def test_activation_reduce_respects_the_mask():
    """Masked-out elements do not contribute; partitions the mask excludes keep their reduce_res."""
    a = nice(65, (16, 20))
    want = np.full((16, 1), 7.0, F32)
    want[:14, 0] = reduce_fp32_ref("add", a[:14, :15])
    assert_bits(act_reduce_masked(a), want, "masked activation reduce")


@nki.jit
def act_reduce_bad(a, what):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    r = nl.ndarray((a.shape[0], 1), dtype=nl.float32)
    if what == "no_res":
        y = nisa.activation_reduce(op=np.exp, data=x, reduce_op=np.add, reduce_res=None)
    elif what == "bad_op":
        y = nisa.activation(op=np.exp, data=x, reduce_op=np.bitwise_and, reduce_res=r)
    else:
        y = nisa.activation(op=np.exp, data=x, reduce_op=np.add, reduce_res=nl.ndarray((a.shape[0], 2), nl.float32))
    nl.store(out, y)
    return out


@pytest.mark.parametrize("what,exc,msg", [("no_res", errors.ArgumentError, "reduce_res"),
                                          ("bad_op", errors.UnsupportedError, "reduce_op"),
                                          ("bad_shape", errors.ShapeError, "reduce_res must have shape")])
def test_activation_reduce_errors(what, exc, msg):
    with pytest.raises(exc, match=msg):
        act_reduce_bad(np.zeros((8, 4), F32), what)


# =============================================================================== nisa.iota

@nki.jit
def iota_kernel(dt):
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    row = nl.arange(512)[None, :]
    outs = []
    for expr, shape in ((row, (1, 512)), (ip, (128, 1)), (ip * 64 + jf, (128, 64)), (5 - 2 * ip + 3 * jf, (128, 64)),
                        (row * -1, (1, 512)), (jf - ip, (128, 64))):
        o = nl.ndarray(shape, dtype=dt, buffer=nl.shared_hbm)
        t = nisa.iota(expr, dtype=dt)
        assert t.shape == shape and t.dtype_name == dt
        nl.store(o, t)
        outs.append(o)
    return tuple(outs)


@pytest.mark.parametrize("dt", ["int32", "float32", "bfloat16", "int16"])
def test_iota_expressions(dt):
    """Values computed in int32 and cast once (bf16 rounds large values)."""
    p = np.arange(128)[:, None]
    f = np.arange(64)[None, :]
    r = np.arange(512)[None, :]
    wants = [r, p, p * 64 + f, 5 - 2 * p + 3 * f, -r, f - p]
    for got, want in zip(iota_kernel(dt), wants):
        want = np.broadcast_to(want, got.shape).astype(np.int64)
        ref = want.astype(storage(dt)) if dt.startswith("int") else f32_to(want.astype(F32), dt)
        assert_bits(got, ref, f"iota {dt}")


@nki.jit
def iota_in_loop(n):
    out = nl.ndarray((n, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(32)[:, None]
    jf = nl.arange(4)[None, :]
    for i in nl.affine_range((n + 31) // 32):
        m = i * 32 + ip < n
        t = nisa.iota(i * 32 + ip + 1000 * jf, dtype=nl.float32, mask=m)
        nl.store(out[i * 32 + ip, jf], t, mask=m)
    return out


def test_iota_with_loop_variable_and_mask():
    got = iota_in_loop(70)
    want = (np.arange(70)[:, None] + 1000 * np.arange(4)[None, :]).astype(F32)
    assert_bits(got, want, "iota loop/mask")


@nki.jit
def iota_1d():
    out = nl.ndarray((8, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, nisa.iota(nl.arange(8), dtype=nl.int32))
    return out


def test_iota_needs_a_2d_expression():
    with pytest.raises(errors.KernelSyntaxError, match="2-D"):
        iota_1d()


# =============================================================================== nisa.affine_select

@nki.jit
def causal_select(a, out_dt):
    n, _ = a.shape
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(128)[None, :]
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(n // 128):
            t = nl.load(a[i * 128 + ip, j * 128 + jf])
            s = nisa.affine_select(pred=(i * 128 + ip >= j * 128 + jf), on_true_tile=t, on_false_value=nl.fp32.min,
                                   dtype=out_dt)
            nl.store(out[i * 128 + ip, j * 128 + jf], s)
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_affine_select_causal_mask(dt):
    """Keep key <= query, else nl.fp32.min (rounded to the output dtype: bf16 gives -inf)."""
    a = values(rng_of(90), (256, 256), dt)
    got = causal_select(a, dt)
    q, k = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    want = f32_to(canon(np.where(q >= k, widen(a), F32(nl.fp32.min))), dt)
    assert_bits(got, want, f"causal affine_select {dt}")
    assert nl.fp32.min == FP32_MIN == nisa.fp32.min
    if dt == "bfloat16":
        assert np.isneginf(widen(got[0, 1]))


@nki.jit
def affine_select_strict(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    t = nl.load(a[ix, iy])
    nl.store(out[ix, iy], nisa.affine_select(pred=(iy < ix), on_true_tile=t[ix, iy], on_false_value=-3.5,
                                             mask=(ix < a.shape[0] - 1)))
    return out


def test_affine_select_strict_lower_with_mask():
    a = nice(91, (40, 40))
    got = affine_select_strict(a)
    want = np.where(np.tril(np.ones((40, 40), bool), -1), a, F32(-3.5))
    assert_bits(got[:-1], want[:-1], "strict-lower affine_select")
    assert np.isnan(got[-1]).all()          # the masked row is never written (fresh tile: NaN)


@nki.jit
def affine_select_bad(a, what):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    t = nl.load(a)
    if what == "compound":
        r = nisa.affine_select(pred=(iy < ix) & (ix < 3), on_true_tile=t, on_false_value=0.0)
    elif what == "tile_false":
        r = nisa.affine_select(pred=(iy < ix), on_true_tile=t, on_false_value=t)
    else:
        r = nisa.affine_select(pred=t, on_true_tile=t, on_false_value=0.0)
    nl.store(out, r)
    return out


@pytest.mark.parametrize("what,exc,msg", [("compound", errors.KernelSyntaxError, "cannot combine"),
                                          ("tile_false", errors.ArgumentError, "Python number"),
                                          ("not_affine", errors.KernelSyntaxError, "comparison")])
def test_affine_select_errors(what, exc, msg):
    with pytest.raises(exc, match=msg):
        affine_select_bad(np.zeros((8, 8), F32), what)


# =============================================================================== nisa.reciprocal

_RECIP = map1_kernel(lambda x, m: nisa.reciprocal(x, mask=m))
_RECIP_F32 = map1_kernel(lambda x, m: nisa.reciprocal(x, mask=m, dtype=nl.float32))


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_reciprocal_is_ieee_division(dt):
    a = values(rng_of(140), (70, 90), dt)
    a.reshape(-1)[:6] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]).astype(storage(dt))
    with np.errstate(all="ignore"):
        want = canon((F32(1.0) / widen(a)).astype(F32))
    assert_bits(_RECIP(a, 64, 50, dt), f32_to(want, dt), f"reciprocal {dt}")
    assert_bits(_RECIP_F32(a, 64, 50, "float32"), want, f"reciprocal {dt} -> f32")
    assert "engine=vector" in _RECIP.inspect_ir(a, 64, 50, dt)


# =============================================================================== nisa.scalar_tensor_tensor

@nki.jit
def stt(a, s, c, op0, op1, r0, r1, out_dt):
    out = nl.ndarray(a.shape, dtype=out_dt, buffer=nl.shared_hbm)
    operand0 = nl.load(s) if not isinstance(s, (int, float)) else s
    y = nisa.scalar_tensor_tensor(data=nl.load(a), op0=op0, operand0=operand0, op1=op1, operand1=nl.load(c),
                                  reverse0=r0, reverse1=r1, dtype=out_dt)
    nl.store(out, y)
    return out


@pytest.mark.parametrize("r0,r1", [(False, False), (True, True), (True, False)])
@pytest.mark.parametrize("operand", ["scalar", "tile"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_scalar_tensor_tensor(dt, operand, r0, r1):
    """(data op0 operand0) op1 operand1, each op one fp32 step, one output rounding."""
    a = values(rng_of(160), (48, 70), dt, "uniform", -3.0, 3.0)
    c = values(rng_of(161), (48, 70), dt, "uniform", 0.5, 3.0)
    s = 0.75 if operand == "scalar" else values(rng_of(162), (48, 1), "float32", "uniform", 0.5, 2.0)
    got = stt(a, s, c, np.subtract, np.divide, r0, r1, dt)
    o0 = Scalar(s) if operand == "scalar" else (s, "float32")
    want = ref_ops(["subtract", "divide"], a, dt, [o0, (c, dt)], dt, reverses=[r0, r1])
    assert_bits(got, want, f"scalar_tensor_tensor {dt} {operand} r0={r0} r1={r1}")


def test_scalar_tensor_tensor_integer_path():
    a = values(rng_of(163), (16, 20), "int32")
    c = values(rng_of(164), (16, 20), "int32")
    got = stt(a, 3, c, np.add, np.bitwise_xor, False, False, "int32")
    assert_bits(got, ((a.astype(np.int64) + 3) ^ c).astype(np.int32), "scalar_tensor_tensor int32")


@nki.jit
def stt_bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(out, nisa.scalar_tensor_tensor(data=x, op0=np.add, operand0=1.0, op1=np.add, operand1=x[:, 0:1]))
    return out


def test_scalar_tensor_tensor_operand1_must_match_data():
    with pytest.raises(errors.ShapeError, match="operand1 shape"):
        stt_bad(np.zeros((4, 4), F32))


# =============================================================================== nisa.tensor_copy_predicated

@nki.jit
def copy_pred(src_arr, dst_arr, pred_arr, scalar, reverse):
    P, F = dst_arr.shape
    out = nl.ndarray((P, F), dtype=dst_arr.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    dst = nl.load(dst_arr)
    pred = nl.load(pred_arr)
    src = scalar if scalar is not None else nl.load(src_arr)
    nisa.tensor_copy_predicated(src=src, dst=dst, predicate=pred, reverse_pred=reverse, mask=(jf < F - 2))
    nl.store(out, dst)
    return out


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("src_kind", ["tile", "scalar"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_tensor_copy_predicated(dt, src_kind, reverse):
    """dst = predicate ? src : dst in place (reverse_pred flips it); masked elements keep dst."""
    rng = rng_of(170)
    src = values(rng, (32, 40), dt)
    dst = values(rng, (32, 40), dt)
    pred = (rng.random((32, 40)) < 0.4).astype(np.uint8)
    scalar = -1.5 if src_kind == "scalar" else None
    got = copy_pred(src, dst, pred, scalar, reverse)
    take = (pred != 0) != reverse
    take[:, -2:] = False
    new = src if scalar is None else np.full(src.shape, scalar).astype(storage(dt))
    assert_bits(got, np.where(take, new, dst), f"copy_predicated {dt} {src_kind} reverse={reverse}")


# =============================================================================== nc_matmul perf_mode / get_nc_version

@nki.jit
def mm_perf(a, b, perf_mode):
    K, M = a.shape
    out = nl.ndarray((M, b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode=perf_mode)
    nl.store(out, nl.copy(acc))
    return out


@pytest.mark.parametrize("perf_mode", [None, "double_row", nisa.matmul_perf_mode.double_row,
                                       nisa.matmul_perf_mode.none])
def test_nc_matmul_perf_mode_is_accepted(perf_mode):
    a = values(rng_of(190), (128, 64), "bfloat16", "nice")
    b = values(rng_of(191), (128, 256), "bfloat16", "nice")
    got = mm_perf(a, b, perf_mode)
    zero = np.zeros((64, 256), F32)
    from .oracle import matmul_ref
    assert_bits(got, (zero + matmul_ref(a, b, fused=False)).astype(F32), f"nc_matmul perf_mode={perf_mode}")
    text = mm_perf.inspect_ir(a, b, perf_mode)
    assert ("perf_mode=double_row" in text) == (perf_mode in ("double_row", nisa.matmul_perf_mode.double_row))


@nki.jit
def nc_version_kernel():
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    v = nisa.get_nc_version()
    assert isinstance(v, nisa.nc_version)
    nl.store(out, nl.full((1, 1), int(v), dtype=nl.int32))
    return out


@pytest.mark.parametrize("target,gen", [("trn1", nisa.nc_version.gen2), ("trn2", nisa.nc_version.gen3),
                                        ("trn3", nisa.nc_version.gen4)])
def test_get_nc_version_per_target(target, gen):
    assert int(nc_version_kernel(target=target)[0, 0]) == int(gen)


def test_get_nc_version_is_a_trace_time_constant():
    """The version is known while tracing: it is baked into the traced IR as an immediate."""
    assert "memset(2:int32)" in nc_version_kernel.inspect_ir(target="trn1")
    assert "memset(4:int32)" in nc_version_kernel.inspect_ir(target="trn3")


def test_get_nc_version_outside_a_kernel():
    with pytest.raises(errors.KernelSyntaxError, match="outside"):
        nisa.get_nc_version()
