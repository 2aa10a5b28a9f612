"""NKI_LITE_DEBUG_NANS=1: NL-E903 at the first instruction that creates a NaN from non-NaN inputs
(BAD_INPUTS row 23), in interpret mode and for JIT calls (which then run in the interpreter)."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers

HERE, line, _ = marker_helpers(__file__)
MODES = ["interpret", "jit"]


@nki.jit
def log_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.log(t)  # MARK-log
    nl.store(out, value=u)
    return out


@nki.jit
def mul_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    z = nl.multiply(x, y)  # MARK-mul
    nl.store(out, value=nl.exp(z))
    return out


@nki.jit
def reduce_kernel(a):
    out = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    s = nl.sum(x, axis=1, keepdims=True)  # MARK-sum
    nl.store(out, value=s)
    return out


@nki.jit
def matmul_kernel(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    ps += nisa.nc_matmul(x, y)  # MARK-mm
    nl.store(out, value=nl.copy(ps))
    return out


@nki.jit
def uninit_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nl.store(out, value=nl.exp(t))
    return out


def _expect_nan(monkeypatch, mode, kernel, args, marker, element):
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    with pytest.raises(errors.KernelFloatingPointError) as ei:
        kernel(*args, mode=mode)
    e = ei.value
    assert e.code == "NL-E903" and isinstance(e, FloatingPointError)
    assert f"{HERE}:{line(marker)}:" in str(e), str(e)
    assert f"tile element {element}" in str(e), str(e)
    return e


@pytest.mark.parametrize("mode", MODES)
def test_log_of_negative_is_reported_with_op_and_element(monkeypatch, mode):
    a = np.ones((128, 64), np.float32)
    a[3, 5] = -2.0
    e = _expect_nan(monkeypatch, mode, log_kernel, (a,), "MARK-log", [3, 5])
    assert "activation(log)" in str(e)


@pytest.mark.parametrize("mode", MODES)
def test_knob_off_propagates_silently(monkeypatch, mode):
    monkeypatch.delenv("NKI_LITE_DEBUG_NANS", raising=False)
    a = np.ones((128, 64), np.float32)
    a[3, 5] = -2.0
    r = log_kernel(a, mode=mode)
    assert np.isnan(r[3, 5]) and np.isnan(r).sum() == 1


@pytest.mark.parametrize("mode", MODES)
def test_zero_times_inf_is_created(monkeypatch, mode):
    a = np.ones((128, 64), np.float32)
    b = np.ones((128, 64), np.float32)
    a[7, 1], b[7, 1] = 0.0, np.inf
    _expect_nan(monkeypatch, mode, mul_kernel, (a, b), "MARK-mul", [7, 1])


@pytest.mark.parametrize("mode", MODES)
def test_nan_inputs_propagate_without_error(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    a = np.ones((128, 64), np.float32)
    a[0, 0] = np.nan
    b = np.ones((128, 64), np.float32)
    b[5, 5] = np.nan
    r = mul_kernel(a, b, mode=mode)                       # NaN * 1 and 1 * NaN, then exp(NaN)
    assert np.isnan(r[0, 0]) and np.isnan(r[5, 5]) and np.isnan(r).sum() == 2
    s = reduce_kernel(a, mode=mode)                       # a NaN row reduces to NaN: propagation
    assert np.isnan(s[0, 0]) and np.isnan(s).sum() == 1


@pytest.mark.parametrize("mode", MODES)
def test_reduction_creating_nan(monkeypatch, mode):
    a = np.ones((128, 64), np.float32)
    a[9, 0], a[9, 1] = np.inf, -np.inf
    _expect_nan(monkeypatch, mode, reduce_kernel, (a,), "MARK-sum", [9, 0])


@pytest.mark.parametrize("mode", MODES)
def test_matmul_inf_times_zero(monkeypatch, mode):
    a = np.ones((128, 16), np.float32)         # stationary [K, M]
    b = np.ones((128, 32), np.float32)         # moving [K, N]
    a[4, 2] = np.inf
    b[4, 6] = 0.0
    _expect_nan(monkeypatch, mode, matmul_kernel, (a, b), "MARK-mm", [2, 6])


@pytest.mark.parametrize("mode", MODES)
def test_matmul_nan_operand_propagates(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    a = np.ones((128, 16), np.float32)
    a[4, 2] = np.nan
    r = matmul_kernel(a, np.ones((128, 32), np.float32), mode=mode)
    assert np.isnan(r[2]).all() and np.isnan(r).sum() == 32


@pytest.mark.parametrize("mode", MODES)
def test_uninitialised_memory_is_not_a_nan_creation(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "0")
    r = uninit_kernel(np.ones((128, 64), np.float32), mode=mode)
    assert np.isnan(r).all()


def test_cast_overflow_to_e4m3fn_creates_nan(monkeypatch):
    """ml_dtypes turns 1000.0 -> float8_e4m3fn into NaN (no inf in that format): a created NaN."""
    @nki.jit
    def cast_kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.float8_e4m3fn, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, value=nl.copy(t, dtype=nl.float8_e4m3fn))
        return out
    a = np.ones((128, 8), np.float32)
    a[1, 2] = 1000.0
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    with pytest.raises(errors.KernelFloatingPointError, match=r"tile element \[1, 2\]"):
        cast_kernel(a, mode="interpret")


def test_knob_set_after_a_cached_fast_path_call_is_honoured(monkeypatch):
    """Knobs are read at call time: a JIT launcher cached before the knob was set is not reused."""
    monkeypatch.delenv("NKI_LITE_DEBUG_NANS", raising=False)
    a = np.ones((128, 64), np.float32)
    a[3, 5] = -2.0
    for _ in range(2):
        assert np.isnan(log_kernel(a)[3, 5])          # default backend, cached launcher on the 2nd call
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    with pytest.raises(errors.KernelFloatingPointError):
        log_kernel(a)
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "0")
    assert np.isnan(log_kernel(a)[3, 5])


def test_generated_kernels_no_report_means_no_created_nan(monkeypatch):
    """Completeness on random kernels that read no uninitialised memory (tests/kernelgen.py,
    init_full=True): with NaN-free inputs, a checked run that raises nothing returns no NaN; and the
    checked run's results equal the unchecked ones."""
    from hypothesis import HealthCheck, given, settings

    from . import kernelgen as KG

    seen = {"raised": 0, "clean": 0}

    def has_nan(x):
        x = np.asarray(x)
        return x.dtype.kind not in "iub" and np.isnan(x.astype(np.float32)).any()

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=KG.kernels(init_full=True))
    def prop(case):
        if any(has_nan(a) for a in case.args):
            return
        monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "0")
        ref = case.kernel(*[a.copy() for a in case.args], mode="interpret")
        ref = ref if isinstance(ref, tuple) else (ref,)
        monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
        try:
            case.kernel(*[a.copy() for a in case.args], mode="interpret")
        except errors.KernelFloatingPointError:
            seen["raised"] += 1                     # a NaN created (perhaps later discarded)
            return
        seen["clean"] += 1
        assert not any(has_nan(x) for x in ref)
    prop()
    assert seen["clean"] >= 20, seen
