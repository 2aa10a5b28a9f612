"""Shared infrastructure: knobs, logging, assert_close, typing placeholders, mutable params, compat."""
import logging
import sys

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import config, errors
from nki_lite.testing import assert_close


# ---------------------------------------------------------------- knobs

def test_knobs_are_read_at_call_time(monkeypatch):
    monkeypatch.delenv("NKI_LITE_TARGET", raising=False)
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    assert config.default_target() == "trn2"
    monkeypatch.setenv("NKI_LITE_TARGET", "trn3")
    assert config.default_target() == "trn3"
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")   # NKI's own knob wins, aliases resolve
    assert config.default_target() == "trn1"


def test_target_knob_reaches_the_trace(monkeypatch):
    @nki.jit
    def k(x):
        return None

    monkeypatch.setenv("NKI_LITE_TARGET", "trn1")
    assert k.trace(nt.tensor[[4, 4], nl.float32]).target == "trn1"
    monkeypatch.setenv("NKI_LITE_TARGET", "trn3")
    assert k.trace(nt.tensor[[4, 4], nl.float32]).target == "trn3"


def test_malformed_knob_is_an_argument_error(monkeypatch):
    monkeypatch.setenv("NKI_LITE_MODE", "fast")
    with pytest.raises(errors.ArgumentError) as ei:
        config.get("NKI_LITE_MODE")
    assert "NKI_LITE_MODE" in str(ei.value) and "interpret" in str(ei.value)


def test_mode_is_an_argument_not_module_state(monkeypatch):
    @nki.jit(mode="jit")
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    a = k(x)
    assert k.cache_info()["compiles"] == 1
    b = k(x, mode="interpret")
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert k.cache_info()["compiles"] == 1          # the interpreter compiled nothing
    monkeypatch.setenv("NKI_LITE_MODE", "interpret")
    plain = nki.jit(k.fn)
    plain(x)
    assert plain.cache_info()["compiles"] == 0      # the knob, read at call time, chose the interpreter
    with pytest.raises(errors.ArgumentError):
        k(x, mode="fast")


def test_configuration_doc_is_generated():
    import os
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "configuration.md")).read()
    assert doc.strip() == config.render_docs().strip()


def test_logger_reports_traces(caplog):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    with caplog.at_level(logging.DEBUG, logger="nki_lite"):
        k(np.zeros((4, 4), np.float32))
    assert any("traced k" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- assert_close

def test_assert_close_per_dtype_tolerance_and_report():
    a = np.ones((4, 4), ml_dtypes.bfloat16)
    assert_close(a, np.full((4, 4), 1.004))            # within bf16 tolerance
    with pytest.raises(AssertionError) as ei:
        assert_close(np.ones((4, 4), np.float32), np.full((4, 4), 1.004))   # not within fp32's
    msg = str(ei.value)
    assert "16 of 16 elements" in msg and "max abs error 0.004" in msg and "(0, 0)" in msg


def test_assert_close_nan_and_inf_positions_must_match():
    assert_close(np.array([np.nan, np.inf, 1.0], np.float32), np.array([np.nan, np.inf, 1.0]))
    with pytest.raises(AssertionError):
        assert_close(np.array([np.nan, 1.0], np.float32), np.array([1.0, 1.0]))
    with pytest.raises(AssertionError):
        assert_close(np.array([np.inf], np.float32), np.array([-np.inf]))
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_close(np.zeros(3), np.zeros(4))


# ---------------------------------------------------------------- typing and parameters

def test_placeholders_trace_without_data():
    from nki_lite.stdlib.matmul_kernels import tiled_matmul
    kern = tiled_matmul.trace(nt.tensor[[8192, 4096], nl.bfloat16], nt.tensor[[8192, 8192], nl.bfloat16])
    assert kern.buffer("lhsT").shape == (8192, 4096) and kern.buffer("lhsT").dtype == "bfloat16"
    with pytest.raises(errors.ArgumentError, match="placeholder"):
        tiled_matmul(nt.tensor[[256, 128], nl.bfloat16], np.zeros((256, 512), ml_dtypes.bfloat16))


def test_mutable_tensor_parameter_is_written_back():
    @nki.jit
    def scale_in_place(x: nt.mutable_tensor):
        t = nl.load(x)
        nl.store(x, nl.multiply(t, 2.0))
        return x

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = scale_in_place(a)
    assert np.array_equal(a, np.arange(8, dtype=np.float32).reshape(2, 4) * 2)
    assert np.array_equal(out, a)


def test_mutable_tensor_must_be_returned():
    @nki.jit
    def k(x: nt.mutable_tensor):
        nl.store(x, nl.load(x))

    with pytest.raises(errors.ImmutableParameterError) as ei:
        k(np.zeros((2, 2), np.float32))
    assert ei.value.name == "mutable_not_returned"


def _copy_kernel():
    """A fresh kernel returning a copy of its input."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out
    return k


def test_inputs_are_never_mutated():
    k = _copy_kernel()

    a = np.ones((2, 2), np.float32)
    out = k(a)
    out[...] = 5
    assert np.all(a == 1)


def test_tuple_returns_and_constants():
    @nki.jit
    def k(x, factor, use_exp=False):
        o1 = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(o1, nl.multiply(t, factor))
        nl.store(o2, nl.add(t, factor))
        return o1, o2

    a = np.ones((2, 3), np.float32)
    r1, r2 = k(a, 3.0)
    assert np.all(r1 == 3) and np.all(r2 == 4)
    assert k.stats["traces"] == 1


def test_non_contiguous_and_array_like_inputs():
    k = _copy_kernel()

    base = np.arange(32, dtype=np.float32).reshape(4, 8)
    view = base[:, ::2]
    assert np.array_equal(k(view), view)
    assert np.array_equal(k(base.T), base.T)


# ---------------------------------------------------------------- legacy imports

def test_compat_install_and_uninstall():
    import nki_lite.compat as compat
    added = compat.install()
    try:
        from neuronxcc import nki as legacy
        import neuronxcc.nki.compiler as ncc
        import neuronxcc.nki.isa as nisa
        import neuronxcc.nki.language as lnl
        assert legacy is nki and lnl is nl and nisa is nki.isa
        assert ncc.sbuf.mod_alloc(base_addr=0).space is nl.sbuf
    finally:
        compat.uninstall()
    assert all(name not in sys.modules for name in added)


def test_compiler_allocators_are_accepted_as_buffers():
    import nki_lite.compiler as ncc

    @ncc.skip_middle_end_transformations
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(4), 8), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        with ncc.no_reorder():
            t[0] = nl.load(x)
        nl.store(out, t[0])
        return out

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(k(a), a)
    kern = k.trace(a)
    assert [b.par_axis for b in kern.buffers if b.space.value == "sbuf"] == [1]


def test_baremetal_and_simulate_kernel_run_on_cpu():
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) + nl.load(b))
        return out

    a = np.ones((2, 2), np.float32)
    assert np.all(nki.simulate_kernel(nki.jit(add), a, a) == 2)
    assert np.all(nki.baremetal(add)(a, a) == 2)
    assert np.all(nki.baremetal(save_neff_name="x.neff")(add)(a, a) == 2)


def test_out_argument_receives_results_on_both_backends():
    from nki_lite.stdlib.elementwise import spmd_add
    a = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024)
    for mode in ("jit", "interpret"):
        buf = np.zeros_like(a)
        res = spmd_add[2, 2](a, a, out=buf, mode=mode)
        assert res is buf and np.array_equal(buf, 2 * a)
    with pytest.raises(errors.ArgumentError, match="must be a writable C-contiguous float32"):
        spmd_add[2, 2](a, a, out=np.zeros((256, 1024), np.float16))
    with pytest.raises(errors.ArgumentError, match="overlaps an input"):
        spmd_add[2, 2](a, a, out=a)
    with pytest.raises(errors.ArgumentError, match="returns 1 new"):
        spmd_add[2, 2](a, a, out=(np.zeros_like(a), np.zeros_like(a)))
