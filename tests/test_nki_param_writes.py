"""In-place writes to kernel parameters: legal in the current dialect, NL-E701 in the legacy one.

torch-neuronx's "How to work with NKI kernels" registers kernels that update input tensors in place
(declared with `mutates_args`), and the NKI Library's tests pass output tensors as parameters and
write them (`nisa.dma_copy(dst=output, ...)`). A current-dialect kernel's written parameters are
written back into the caller's arrays after the call, returned or not (lang/trace.py
`write_back_params`). The legacy docs ("err_cannot_update_immutable_parameter": "By default, all
parameters to the top level nki kernels are immutable") keep NL-E701 there.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite
import nki_lite.language as lnl
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

from . import markers
from .nki_tiles import sbuf_of

HERE, line_of, _expect = markers.marker_helpers(__file__)
MODES = ["interpret", "jit"]
RNG = np.random.default_rng(701)
F32 = np.float32


def f32(*shape):
    return RNG.uniform(0.5, 1.5, shape).astype(F32)


@nki.jit
def accumulate_into(x, acc):
    """acc += x in place; returns a separate copy of x (the written parameter is not returned)."""
    t, a = sbuf_of(x), sbuf_of(acc)
    nisa.tensor_tensor(dst=a, data1=a, data2=t, op=nl.add)
    nisa.dma_copy(dst=acc, src=a)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out, out


@pytest.mark.parametrize("mode", MODES)
def test_a_written_parameter_is_written_back_and_not_returned(mode):
    x, acc = f32(8, 4), f32(8, 4)
    start, xs = acc.copy(), x.copy()
    for calls in (1, 2):                       # the second call runs the cached trace
        r = accumulate_into(x, acc, mode=mode)
        assert isinstance(r, tuple) and len(r) == 2   # the return value is what the kernel returned
        np.testing.assert_array_equal(r[0], x)
        np.testing.assert_array_equal(r[1], x)
        want = start
        for _ in range(calls):
            want = (want + xs).astype(F32)
        np.testing.assert_array_equal(acc, want)
    np.testing.assert_array_equal(x, xs)       # the parameter it only reads is untouched
    k = accumulate_into.trace(x, acc)
    assert k.written_back == ("acc",) and not k.buffer("x").mutable


@nki.jit
def store_into_output(x, output, scale: float):
    """The library harness's shape: the output tensor is a parameter, written and returned."""
    t = sbuf_of(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    nisa.dma_copy(dst=output, src=t)
    return output


@nki.jit
def fill_no_return(x, output):
    nisa.dma_copy(dst=output[0:4, :], src=sbuf_of(x[0:4, :]))


@pytest.mark.parametrize("mode", MODES)
def test_a_written_and_returned_parameter_and_a_kernel_returning_nothing(mode):
    x = f32(8, 4)
    output = np.zeros_like(x)
    r = store_into_output(x, output, 2.0, mode=mode)
    np.testing.assert_array_equal(output, (x * F32(2)).astype(F32))
    np.testing.assert_array_equal(r, output)
    out2 = np.full_like(x, 7.0)
    assert fill_no_return(x, out2, mode=mode) is None
    want = np.full_like(x, 7.0)
    want[0:4] = x[0:4]
    np.testing.assert_array_equal(out2, want)   # the rows it does not write keep the caller's data


@nki_lite.jit
def legacy_store_into_input(x):
    lnl.store(x, lnl.load(x))  # MARK-LEGACY-E701
    return x


@pytest.mark.parametrize("mode", MODES)
def test_legacy_inputs_stay_immutable(mode):
    with pytest.raises(errors.NkiLiteError) as ei:
        legacy_store_into_input(f32(4, 4), mode=mode)
    e = ei.value
    assert e.name == "immutable_parameter" and e.code == "NL-E701", str(e)
    assert f"{HERE}:{line_of('MARK-LEGACY-E701')}:" in str(e), str(e)
