"""Verifier rules 10 (writes to immutable parameters) and 11 (outputs never written)."""
import warnings

import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors

from .markers import marker_helpers, spec
from nki_lite.lower.verify import OutputCoverageWarning

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


expect = _expect


# ------------------------------------------------------------------------------ rule 10

@nki.jit
def scale_in_place(x):
    t = nl.load(x)
    nl.store(x, value=nl.multiply(t, 2.0))  # MARK-IMMUTABLE
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_write_to_input_parameter(target):
    e = expect(scale_in_place, (spec((128, 64)),), errors.ImmutableParameterError, "immutable_parameter",
               "MARK-IMMUTABLE", target)
    assert "'x'" in str(e) and "nt.mutable_tensor" in e.hint and isinstance(e, TypeError)


def test_write_through_a_reshaped_view_of_an_input():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x.reshape((128, 64)))
        nl.store(out, value=t)
        nl.store(x.reshape((128, 64)), value=t)  # MARK-VIEW
        return out
    e = expect(k, (spec((64, 128)),), errors.ImmutableParameterError, "immutable_parameter", "MARK-VIEW")
    assert "through the view" in str(e)


@pytest.mark.parametrize("target", TARGETS)
def test_mutable_parameter_may_be_written(target):
    @nki.jit
    def k(x: nt.mutable_tensor):
        t = nl.load(x)
        nl.store(x, value=nl.multiply(t, 2.0))
        return x
    k.trace(spec((128, 64)), target=target)


def test_reading_inputs_and_writing_outputs_passes():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out
    k.trace(spec((128, 64)), target="trn1")


# ------------------------------------------------------------------------------ rule 11

@nki.jit
def tiles_of(x, tile):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // tile):  # MARK-DEAD-LOOP
        nl.store(out[i * tile:(i + 1) * tile, :], value=nl.load(x[i * tile:(i + 1) * tile, :]))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_output_written_only_in_a_zero_trip_loop(target):
    e = expect(tiles_of, (spec((100, 64)), 128), errors.OutputNotWrittenError, "output_not_written",
               "MARK-DEAD-LOOP", target)
    assert "runs 0 times" in str(e) and "math.ceil" in e.hint and isinstance(e, ValueError)


def test_output_with_full_loop_passes_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiles_of.trace(spec((256, 64)), 128, target="trn2")


def test_output_never_written():
    @nki.jit
    def k(x, store):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)  # MARK-NEVER
        t = nl.load(x)
        if store:
            nl.store(out, value=t)
        return out
    e = expect(k, (spec((128, 64)), False), errors.OutputNotWrittenError, "output_not_written", "MARK-NEVER")
    assert "'out'" in str(e)
    k.trace(spec((128, 64)), True, target="trn2")


def test_output_whose_only_store_is_masked_off():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x), mask=False)  # MARK-MASKED-OFF
        return out
    e = expect(k, (spec((128, 64)),), errors.OutputNotWrittenError, "output_not_written", "MARK-MASKED-OFF")
    assert "never true" in str(e)


@nki.jit
def first_rows(x, n):
    out = nl.ndarray((256, 64), x.dtype, buffer=nl.shared_hbm)  # MARK-PARTIAL
    for i in nl.affine_range(n):
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(x[i * 128:(i + 1) * 128, :]))
    return out


def test_partial_coverage_is_a_warning():
    with pytest.warns(OutputCoverageWarning) as rec:
        first_rows.trace(spec((256, 64)), 1, target="trn2")
    msg = str(rec[0].message)
    assert "out[128:256, :]" in msg and "8192 of 16384" in msg
    assert rec[0].filename == HERE and rec[0].lineno == line_of("MARK-PARTIAL")


def test_partial_coverage_through_masks_is_a_warning():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        iy = nl.arange(64)[None, :]
        for i in nl.affine_range(3):
            t = nl.load(x[i * 128 + ip, iy], mask=(i * 128 + ip < 300))
            nl.store(out[i * 128 + ip, iy], value=t, mask=(i * 128 + ip < 290))
        return out
    with pytest.warns(OutputCoverageWarning, match=r"out\[290:300, 0:64\]"):
        k.trace(spec((300, 64)), target="trn2")


def test_full_coverage_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first_rows.trace(spec((256, 64)), 2, target="trn2")
