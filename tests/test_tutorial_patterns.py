"""The NKI tutorials' patterns, as our own kernels (tests/kernels/patterns.py), against numpy.

Each kernel runs on its natural dtype(s) and is compared with a float64 numpy reference
(nki_lite.testing.assert_close); where the fp32 step sequence is short enough to restate
(selective scan, average pooling, block transposes, in-place axpy) the result is also checked bit
for bit against that sequence. The last tests build the same kernels through the legacy
`neuronxcc.nki` imports (nki_lite.compat) and check they give identical bits.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.numerics import fp32math
from nki_lite.testing import assert_close

from .kernels.patterns import (KERNELS, Act, TileConfig, avgpool2d_ref, build, causal_attention_ref,
                               configured_ref, layernorm_ref, selective_scan_ref)
from .oracle import F32, assert_bits, canon, f32_to, reduce_fp32_ref, values, widen

BF16 = ml_dtypes.bfloat16
K = KERNELS


@pytest.fixture(autouse=True, params=["interpret", "jit"])
def backend(request, monkeypatch):
    """Every test here runs on both backends: the interpreter (the definition) and the JIT."""
    monkeypatch.setenv("NKI_LITE_MODE", request.param)


def rng_of(seed):
    return np.random.default_rng(seed)


def uniform(seed, shape, dt, lo, hi):
    return values(rng_of(seed), shape, dt, "uniform", lo, hi)


# =============================================================================== layernorm (bn_stats / bn_aggr)

def layernorm_inputs(rows, cols, dt, seed=0):
    x = (rng_of(seed).standard_normal((rows, cols)) * 2.5 + 1.5).astype(F32).astype(ml_dtypes.bfloat16
                                                                                    if dt == "bfloat16" else F32)
    gamma = uniform(seed + 1, (cols,), dt, 0.5, 1.5)
    beta = uniform(seed + 2, (cols,), dt, -0.5, 0.5)
    return x, gamma, beta


@pytest.mark.parametrize("rows,cols,dt", [(1, 64, "float32"), (130, 700, "float32"), (256, 512, "float32"),
                                          (300, 1030, "float32"), (77, 96, "bfloat16"), (129, 600, "bfloat16")])
def test_layernorm_ragged_rows(rows, cols, dt):
    x, gamma, beta = layernorm_inputs(rows, cols, dt, seed=rows + cols)
    out = K.layernorm(x, gamma, beta, 1e-5)
    assert out.shape == (rows, cols) and out.dtype == x.dtype and not np.isnan(widen(out)).any()
    ref = layernorm_ref(x, gamma, beta, 1e-5)
    if dt == "float32":
        assert_close(out, ref, rtol=2e-5, atol=2e-5)
    else:
        assert_close(out, ref, dtype="bfloat16", atol=2e-2)


def test_layernorm_eps_is_a_trace_time_constant():
    x, gamma, beta = layernorm_inputs(40, 32, "float32", seed=9)
    x[:, :] = x[:, :1]                               # constant rows: var = 0, so eps decides the scale
    a = K.layernorm(x, gamma, beta, 1e-5)
    b = K.layernorm(x, gamma, beta, 0.25)
    assert_close(a, layernorm_ref(x, gamma, beta, 1e-5), rtol=1e-5, atol=1e-5)
    assert_close(b, layernorm_ref(x, gamma, beta, 0.25), rtol=1e-5, atol=1e-5)
    assert np.array_equal(a, np.broadcast_to(beta, a.shape))   # (x - mean) == 0 exactly


# =============================================================================== mamba-style selective scan

def scan_inputs(batch, channels, L, S, dt, seed=0):
    rng = rng_of(seed)
    delta = uniform(seed, (batch, channels, L), dt, 0.01, 0.2)
    u = f32_to(rng.standard_normal((batch, channels, L)).astype(F32), dt)
    A = uniform(seed + 1, (channels, S), dt, -2.0, -0.5)
    B = f32_to(rng.standard_normal((batch, S, L)).astype(F32), dt)
    C = f32_to(rng.standard_normal((batch, S, L)).astype(F32), dt)
    return delta, u, A, B, C


def selective_scan_fp32(delta, u, A, B, C):
    """The kernel's fp32 sequence: du = delta*u; per state s (in order): decay = exp(delta*A_s),
    drive = du*B_s, h = sequential scan (fp32 carry), acc = acc + h*C_s."""
    d, u, A, B, C = (widen(a) for a in (delta, u, A, B, C))
    du = (d * u).astype(F32)
    acc = np.zeros(d.shape, F32)
    for s in range(A.shape[1]):
        decay = fp32math.exp((d * A[None, :, s, None]).astype(F32))
        drive = (du * B[:, s, None, :]).astype(F32)
        h = np.zeros(d.shape[:2], F32)
        for t in range(d.shape[2]):
            h = ((decay[:, :, t] * h).astype(F32) + drive[:, :, t]).astype(F32)
            acc[:, :, t] = (acc[:, :, t] + (h * C[:, s, None, t]).astype(F32)).astype(F32)
    return acc


@pytest.mark.parametrize("batch,channels,L,S,seq_tile", [(1, 128, 256, 3, 128), (2, 256, 128, 2, 32),
                                                         (1, 64, 96, 4, 96)])
def test_selective_scan_fp32(batch, channels, L, S, seq_tile):
    args = scan_inputs(batch, channels, L, S, "float32", seed=L + S)
    out = K.selective_scan(*args, seq_tile)
    assert_bits(out, selective_scan_fp32(*args), "selective scan (fp32 sequence)")
    assert_close(out, selective_scan_ref(*args), rtol=1e-4, atol=1e-5)


def test_selective_scan_does_not_depend_on_the_sequence_tiling():
    """The carry between sequence tiles is the fp32 scan state: 4 tiles of 64 == 1 tile of 256, bitwise."""
    args = scan_inputs(1, 128, 256, 2, "float32", seed=5)
    assert_bits(K.selective_scan(*args, 64), K.selective_scan(*args, 256), "seq tiling")


def test_selective_scan_bf16():
    args = scan_inputs(1, 128, 128, 3, "bfloat16", seed=6)
    out = K.selective_scan(*args, 64)
    assert out.dtype == BF16
    assert_bits(out, f32_to(selective_scan_fp32(*args), "bfloat16"), "selective scan bf16")
    assert_close(out, selective_scan_ref(*args), dtype="bfloat16", atol=2e-2)


# =============================================================================== transposes via the Tensor Engine

@pytest.mark.parametrize("shape,dt", [((256, 384), "float32"), ((128, 128), "bfloat16"), ((200, 300), "float32"),
                                      ((130, 129), "bfloat16"), ((5, 260), "float32")])
def test_block_transpose(shape, dt):
    x = values(rng_of(sum(shape)), shape, dt)
    out = K.block_transpose(x)
    assert_bits(out, np.ascontiguousarray(x.T), f"block transpose {shape} {dt}")


# =============================================================================== causal attention

@pytest.mark.parametrize("S,d", [(256, 64), (128, 128), (384, 32)])
def test_causal_attention_fp32(S, d):
    q, k, v = (values(rng_of(S + d + i), (S, d), "float32", "uniform", -2.0, 2.0) for i in range(3))
    out = K.causal_attention(q, k, v, nl.float32)
    assert out.dtype == F32
    assert_close(out, causal_attention_ref(q, k, v), rtol=1e-5, atol=1e-5)


def test_causal_attention_bf16():
    q, k, v = (values(rng_of(20 + i), (256, 64), "bfloat16", "uniform", -2.0, 2.0) for i in range(3))
    out = K.causal_attention(q, k, v, nl.bfloat16)
    assert out.dtype == BF16
    assert_close(out, causal_attention_ref(q, k, v), dtype="bfloat16", atol=2e-2)


def test_causal_attention_ignores_the_future():
    """Rows before position 200 do not see keys/values from 200 on: changing them leaves those rows' bits."""
    q, k, v = (values(rng_of(30 + i), (256, 32), "float32", "uniform", -1.0, 1.0) for i in range(3))
    base = K.causal_attention(q, k, v, nl.float32)
    k2, v2 = k.copy(), v.copy()
    k2[200:] *= -3.0
    v2[200:] += 5.0
    moved = K.causal_attention(q, k2, v2, nl.float32)
    assert_bits(moved[:200], base[:200], "causal rows")
    assert not np.array_equal(moved[200:], base[200:])
    assert_close(base[0], v[0].astype(np.float64), rtol=1e-6, atol=1e-6)     # row 0 attends to itself only


# =============================================================================== 2-D average pooling (5-D mgrid)

def avgpool_fp32(x, pool, dt):
    """nl.sum over axes [2, 4] in the reduction order (window row-major), rounded to dt, then / pool^2."""
    C, H, W = x.shape
    Ho, Wo = H // pool, W // pool
    win = widen(x)[:, :Ho * pool, :Wo * pool].reshape(C, Ho, pool, Wo, pool).transpose(0, 1, 3, 2, 4)
    s = f32_to(reduce_fp32_ref("add", win.reshape(C, Ho, Wo, pool * pool)), dt)
    return f32_to(canon((widen(s) / F32(pool * pool)).astype(F32)), dt)


@pytest.mark.parametrize("C,H,W,pool,dt", [(200, 10, 12, 2, "float32"), (64, 10, 11, 3, "float32"),
                                           (128, 8, 8, 4, "bfloat16"), (3, 6, 6, 2, "bfloat16")])
def test_avgpool2d(C, H, W, pool, dt):
    x = values(rng_of(C + H + W), (C, H, W), dt, "uniform", -4.0, 4.0)
    out = K.avgpool2d(x, pool)
    assert out.shape == (C, H // pool, W // pool)
    assert_bits(out, avgpool_fp32(x, pool, dt), f"avgpool {dt}")
    assert_close(out, avgpool2d_ref(x, pool), dtype=dt, rtol=2e-6 if dt == "float32" else None)


# =============================================================================== trace-time arguments, helpers, tuples

def test_config_dataclass_and_enum_are_trace_time_constants():
    ks = build(nki, nl, nisa, nt)                     # fresh kernels: clean stats
    kern = ks.configured
    x = values(rng_of(40), (100, 24), "float32", "uniform", -2.0, 2.0)
    a = TileConfig(rows=32, scale=0.5)

    def counts():
        return {key: kern.stats[key] for key in ("hits", "misses", "traces")}

    y1, s1 = kern(x, a, Act.TANH)                     # tuple return
    assert counts() == {"hits": 0, "misses": 1, "traces": 1}
    y2, s2 = kern(x, TileConfig(rows=32, scale=0.5), Act.TANH)       # an equal, new instance: cache hit
    assert counts() == {"hits": 1, "misses": 1, "traces": 1}
    assert_bits(y2, y1, "cached run y")
    assert_bits(s2, s1, "cached run sums")

    for cfg, act in [(TileConfig(rows=64, scale=0.5), Act.TANH), (TileConfig(rows=32, scale=2.0), Act.TANH),
                     (a, Act.EXP), (a, Act.SILU)]:
        before = counts()
        y, s = kern(x, cfg, act)
        assert counts() == {"hits": before["hits"], "misses": before["misses"] + 1, "traces": before["traces"] + 1}
        ry, rs = configured_ref(x, cfg, act)
        assert_close(y, ry, rtol=2e-6, atol=1e-7)
        assert_close(s, rs, rtol=1e-5, atol=1e-5)
        if (cfg.scale, act) != (a.scale, Act.TANH):
            assert not np.array_equal(y, y1)
        else:                                         # only the tiling changed: same values
            assert_bits(y, y1, "retiled")

    ir_a = kern.inspect_ir(x, a, Act.TANH)
    assert ir_a != kern.inspect_ir(x, a, Act.EXP) and "func=tanh" in ir_a and "func=exp" not in ir_a
    assert ir_a != kern.inspect_ir(x, TileConfig(rows=64, scale=0.5), Act.TANH)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_configured_on_its_dtypes(dt):
    x = values(rng_of(41), (70, 16), dt, "uniform", -2.0, 2.0)
    cfg = TileConfig(rows=16, scale=1.5)
    y, s = K.configured(x, cfg, Act.SILU)
    assert y.dtype == x.dtype and s.dtype == F32
    ry, rs = configured_ref(x, cfg, Act.SILU)
    assert_close(y, ry, dtype=dt, rtol=2e-6 if dt == "float32" else None, atol=1e-6 if dt == "float32" else None)
    # `t * cfg.scale` promotes a bf16 tile to float32 (a Python float counts as fp32), so the row sums
    # add the unrounded fp32 activations; only the store rounds y to bf16
    assert_close(s, rs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_mutable_tensor_updated_in_place(dt):
    y = values(rng_of(42), (200, 40), dt, "uniform", -1.0, 1.0)
    x = values(rng_of(43), (200, 40), dt, "uniform", -1.0, 1.0)
    y0 = y.copy()
    ret = K.axpy_inplace(y, x, 0.75)
    want = f32_to(canon(((widen(x) * F32(0.75)).astype(F32) + widen(y0)).astype(F32)), dt)
    assert_bits(y, want, "axpy in place")
    assert_bits(ret, want, "axpy returned")
    assert ret is not y0


@nki.jit
def cast_copy(x, dt):
    out = nl.ndarray(x.shape, dtype=dt, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nl.load(x), dtype=dt))
    return out


@pytest.mark.parametrize("dt", [nl.bfloat16, "bfloat16", BF16, np.float16])
def test_dtype_arguments_are_trace_time_constants(dt):
    """A dtype passed to a kernel (nl.bfloat16, a name, or a numpy scalar type) is a constant."""
    x = values(rng_of(44), (8, 8), "float32", "nice")
    out = cast_copy(x, dt)
    assert out.dtype == np.dtype(dt) and np.array_equal(out, x.astype(dt))


# =============================================================================== legacy imports (compat)

@pytest.fixture
def legacy_kernels():
    """The pattern kernels built from `neuronxcc.nki.*` imports; the aliases are removed afterwards."""
    import nki_lite.compat as compat
    compat.install()
    try:
        import neuronxcc.nki as lnki
        import neuronxcc.nki.isa as lnisa
        import neuronxcc.nki.language as lnl
        import neuronxcc.nki.typing as lnt
        from neuronxcc.nki.typing import tensor  # noqa: F401 - the tutorials' from-import form
        yield build(lnki, lnl, lnisa, lnt)
    finally:
        compat.uninstall()


def test_patterns_through_legacy_imports(legacy_kernels):
    L = legacy_kernels
    x, gamma, beta = layernorm_inputs(130, 96, "float32", seed=50)
    assert_bits(L.layernorm(x, gamma, beta, 1e-5), K.layernorm(x, gamma, beta, 1e-5), "legacy layernorm")
    args = scan_inputs(1, 128, 64, 2, "float32", seed=51)
    assert_bits(L.selective_scan(*args, 32), selective_scan_fp32(*args), "legacy selective scan")
    m = values(rng_of(52), (130, 260), "bfloat16")
    assert_bits(L.block_transpose(m), np.ascontiguousarray(m.T), "legacy block transpose")
    q, k, v = (values(rng_of(53 + i), (128, 32), "float32", "uniform", -1.0, 1.0) for i in range(3))
    assert_bits(L.causal_attention(q, k, v, nl.float32), K.causal_attention(q, k, v, nl.float32), "legacy attention")
    p = values(rng_of(56), (16, 6, 6), "float32", "uniform", -1.0, 1.0)
    assert_bits(L.avgpool2d(p, 2), avgpool_fp32(p, 2, "float32"), "legacy avgpool")
    y, s = L.configured(p[:, 0, :], TileConfig(rows=8, scale=1.0), Act.EXP)
    assert_close(y, np.exp(p[:, 0, :].astype(np.float64)), rtol=2e-6, atol=0)
    yy = p[:, 0, :].copy()
    L.axpy_inplace(yy, p[:, 1, :], 2.0)
    assert_bits(yy, ((p[:, 1, :] * F32(2.0)).astype(F32) + p[:, 0, :]).astype(F32), "legacy mutable")
