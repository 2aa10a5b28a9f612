"""Verifier rules 3 (matmul shapes and dtypes) and 4 (PSUM bank fit of matmul outputs)."""

import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


expect = _expect


# ------------------------------------------------------------------------------ rule 3: shapes

@nki.jit
def mm(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a)
    m = nl.load(b)
    r = nisa.nc_matmul(s, m)  # MARK-MM
    nl.store(out, value=nl.copy(r))
    return out


@pytest.mark.parametrize("target", ("trn1", "trn2"))
def test_moving_free_over_512(target):
    e = expect(mm, (spec((128, 128)), spec((128, 1024))), errors.ShapeError, "matmul_shape", "MARK-MM", target)
    msg = str(e)
    assert "N=1024" in msg and "512" in msg and "stationary 's' [128, 128]" in msg and "moving 'm' [128, 1024]" in msg


def test_moving_free_1024_passes_on_trn3():
    mm.trace(spec((128, 128)), spec((128, 1024)), target="trn3")


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_512_passes(target):
    mm.trace(spec((128, 128)), spec((128, 512)), target=target)


@nki.jit
def mm_bcast(a, b, k):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a).broadcast_to((k, 128))
    m = nl.load(b).broadcast_to((k, 512))
    r = nisa.nc_matmul(s, m)  # MARK-K
    nl.store(out, value=nl.copy(r))
    return out


def test_contraction_over_128():
    e = expect(mm_bcast, (spec((1, 128)), spec((1, 512)), 256), errors.ShapeError, "matmul_shape", "MARK-K")
    assert "K=256" in str(e)


def test_contraction_128_passes():
    mm_bcast.trace(spec((1, 128)), spec((1, 512)), 128, target="trn1")


# ------------------------------------------------------------------------------ rule 3: dtypes

@pytest.mark.parametrize("target", TARGETS)
def test_fp32_with_bf16_is_an_error(target):
    e = expect(mm, (spec((128, 128)), spec((128, 512), nl.bfloat16)), errors.KernelDTypeError, "dtype", "MARK-MM",
               target)
    assert "float32" in str(e) and "bfloat16" in str(e) and isinstance(e, TypeError)


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_fp8_formats(target):
    e = expect(mm, (spec((128, 128), nl.float8_e4m3), spec((128, 512), nl.float8_e4m3fn)), errors.KernelDTypeError,
               "dtype", "MARK-MM", target)
    assert "float8_e4m3fn" in str(e)


@pytest.mark.parametrize("target", ("trn1", "trn2"))
def test_e4m3fn_needs_trn3(target):
    e = expect(mm, (spec((128, 128), nl.float8_e4m3fn), spec((128, 512), nl.float8_e4m3fn)),
               errors.KernelDTypeError, "dtype", "MARK-MM", target)
    assert "trn3" in str(e)


def test_e4m3fn_passes_on_trn3():
    mm.trace(spec((128, 128), nl.float8_e4m3fn), spec((128, 512), nl.float8_e4m3fn), target="trn3")


@pytest.mark.parametrize("target", TARGETS)
def test_legal_dtype_pairs_pass(target):
    mm.trace(spec((128, 128), nl.bfloat16), spec((128, 512), nl.bfloat16), target=target)
    mm.trace(spec((128, 128), nl.float8_e4m3), spec((128, 512), nl.float8_e5m2), target=target)
    mm.trace(spec((128, 128), nl.tfloat32), spec((128, 512), nl.float32), target=target)


@nki.jit
def mm_bf16_acc(a, b):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a)
    m = nl.load(b)
    acc = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.psum)
    acc[...] = nisa.nc_matmul(s, m)  # MARK-BF16-ACC
    nl.store(out, value=nl.copy(acc, dtype=nl.float32))
    return out


@pytest.mark.parametrize("target", ("trn1", "trn2"))
def test_bf16_psum_output_needs_trn3(target):
    e = expect(mm_bf16_acc, (spec((128, 128), nl.bfloat16), spec((128, 512), nl.bfloat16)),
               errors.KernelDTypeError, "dtype", "MARK-BF16-ACC", target)
    assert "bfloat16" in str(e) and "float32" in str(e)


def test_bf16_psum_output_passes_on_trn3():
    mm_bf16_acc.trace(spec((128, 128), nl.bfloat16), spec((128, 512), nl.bfloat16), target="trn3")


# ------------------------------------------------------------------------------ rule 4: PSUM banks

@nki.jit
def mm_into(a, b, start, width):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a)
    m = nl.load(b)
    ps = nl.ndarray((128, width), nl.float32, buffer=nl.psum)
    ps[:, start:start + 512] = nisa.nc_matmul(s, m)  # MARK-BANK
    nl.store(out, value=nl.copy(ps[:, start:start + 512]))
    return out


@pytest.mark.parametrize("target", ("trn1", "trn2"))
def test_matmul_output_crossing_a_bank(target):
    e = expect(mm_into, (spec((128, 128)), spec((128, 512)), 256, 768), errors.MemoryCapacityError, "psum_bank",
               "MARK-BANK", target)
    assert "[1024, 3071]" in str(e) and "bank 0 into bank 1" in str(e) and isinstance(e, MemoryError)


def test_bank_crossing_allowed_on_trn3():
    mm_into.trace(spec((128, 128)), spec((128, 512)), 256, 768, target="trn3")


@pytest.mark.parametrize("target", TARGETS)
def test_bank_aligned_output_passes(target):
    mm_into.trace(spec((128, 128)), spec((128, 512)), 0, 512, target=target)


@pytest.mark.parametrize("start", (0, 512))
def test_bank_aligned_outputs_in_a_two_bank_tile_pass_on_trn3(start):
    # trn1/trn2 hold a PSUM tile to one bank (tests/test_capacity_liveness.py); trn3 does not
    mm_into.trace(spec((128, 128)), spec((128, 512)), start, 1024, target="trn3")


def test_bank_crossing_depends_on_loop_variable():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        s = nl.load(a)
        m = nl.load(b)
        ps = nl.ndarray((128, 768), nl.float32, buffer=nl.psum)
        for j in nl.sequential_range(2):
            ps[:, nl.ds(j * 384, 256)] = nisa.nc_matmul(s, m)  # MARK-BANK-LOOP
            nl.store(out, value=nl.copy(ps[:, nl.ds(j * 384, 256)]))
        return out
    e = expect(k, (spec((128, 128)), spec((128, 256))), errors.MemoryCapacityError, "psum_bank", "MARK-BANK-LOOP")
    assert "when j=1" in str(e) and "[1536, 2559]" in str(e)
