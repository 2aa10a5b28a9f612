"""Verifier rules 5 (SBUF/PSUM capacity by liveness) and 6 (memory spaces)."""

import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec
from nki_lite.loc import Loc
from nki_lite.core import ir
from nki_lite.lower.verify import verify

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")
BIG = (128, 16384)      # 64 KiB per partition in fp32


expect = _expect


@pytest.fixture
def strict(monkeypatch):
    """Over-capacity is a warning for automatically allocated kernels; these tests check the error."""
    monkeypatch.setenv("NKI_LITE_STRICT_CAPACITY", "1")


# ------------------------------------------------------------------------------ rule 5: SBUF

@nki.jit
def three_live(a, b, c):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    tc = nl.load(c)  # MARK-SBUF-PEAK
    ta[...] = nl.add(ta, tb)
    ta[...] = nl.add(ta, tc)
    nl.store(out, value=ta)
    return out


def test_sbuf_over_capacity_on_trn1_lists_live_tiles(strict):
    e = expect(three_live, (spec(BIG),) * 3, errors.MemoryCapacityError, "sbuf_capacity", "MARK-SBUF-PEAK", "trn1")
    msg = str(e)
    assert isinstance(e, MemoryError)
    assert "196608" in msg and "180224" in msg and "trn1" in msg
    for name, marker in (("ta", "a"), ("tb", "b"), ("tc", "c")):
        assert f"65536 B/partition  '{name}'" in msg
    assert f"test_verify_memory.py:{line_of('MARK-SBUF-PEAK')}" in msg


@pytest.mark.parametrize("target", ("trn2", "trn3"))
def test_same_kernel_fits_trn2_and_trn3(target):
    three_live.trace(*(spec(BIG),) * 3, target=target)


@nki.jit
def loop_tiles(x, big_before):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    if big_before:
        keep = nl.load(x[0:128, :])
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        u = nl.exp(t)  # MARK-LOOP-PEAK
        nl.store(out[i * 128:(i + 1) * 128, :], value=u)
    if big_before:
        nl.store(out[0:128, :], value=nl.exp(keep))
    return out


def test_loop_local_tiles_are_live_one_iteration_at_a_time():
    loop_tiles.trace(spec((1024, 16384)), False, target="trn1")    # 8 iterations x 128 KiB, peak 128 KiB


def test_tile_used_after_loop_is_live_across_it(strict):
    e = expect(loop_tiles, (spec((1024, 16384)), True), errors.MemoryCapacityError, "sbuf_capacity",
               "MARK-LOOP-PEAK", "trn1")
    assert "'keep'" in str(e) and "196608" in str(e)


# ------------------------------------------------------------------------------ rule 5: PSUM

@nki.jit
def psum_tiles(x, n):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for j in nl.static_range(n):
        tiles.append(nl.zeros((128, 512), nl.float32, buffer=nl.psum))  # MARK-PSUM
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for j in nl.static_range(n):
        acc[...] = nl.add(acc, tiles[j])
    nl.store(out, value=acc)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_psum_over_capacity_shows_banks(target, strict):
    e = expect(psum_tiles, (spec((1, 1)), 9), errors.MemoryCapacityError, "psum_capacity", "MARK-PSUM", target)
    msg = str(e)
    assert "18432" in msg and "16384" in msg and "bank 8:" in msg and "beyond the last bank" in msg


@pytest.mark.parametrize("target", TARGETS)
def test_eight_psum_banks_fit(target):
    psum_tiles.trace(spec((1, 1)), 8, target=target)


def test_psum_tiles_round_up_to_banks(strict):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        tiles = [nl.zeros((128, 8), nl.float32, buffer=nl.psum) for _ in range(9)]  # MARK-SMALL-PSUM
        acc = nl.zeros((128, 8), nl.float32, buffer=nl.sbuf)
        for t in tiles:
            acc[...] = nl.add(acc, t)
        nl.store(out, value=acc)
        return out
    e = expect(k, (spec((1, 1)),), errors.MemoryCapacityError, "psum_capacity", "MARK-SMALL-PSUM")
    assert "18432" in str(e)     # 9 tiles of 32 bytes still take 9 banks


# ------------------------------------------------------------------------------ rule 6: spaces

@nki.jit
def mm_from(a, b, psum_operand):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    if psum_operand:
        s = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    else:
        s = nl.load(a)
    m = nl.load(b)
    r = nisa.nc_matmul(s, m)  # MARK-MM-SPACE
    nl.store(out, value=r)    # a store straight from PSUM is legal (nl.store copies it through SBUF)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_operand_in_psum(target):
    e = expect(mm_from, (spec((128, 128)), spec((128, 512)), True), errors.MemorySpaceError, "memory_space",
               "MARK-MM-SPACE", target)
    assert "'sbuf'" in str(e) and "'psum'" in str(e) and isinstance(e, TypeError)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_from_sbuf_and_store_from_psum_pass(target):
    mm_from.trace(spec((128, 128)), spec((128, 512)), False, target=target)


def _dma_ir(dst_space, src_space):
    loc = Loc(HERE, line_of("MARK-DMA-IR"), 4)  # MARK-DMA-IR
    x = ir.Buffer("x", ir.Space.HBM, (128, 64), "float32", "input", loc=loc)
    a = ir.Buffer("a", src_space, (128, 64), "float32", loc=loc)
    b = ir.Buffer("b", dst_space, (128, 64), "float32", loc=loc)
    out = ir.Buffer("out", ir.Space.HBM, (128, 64), "float32", "output", hbm_kind="shared_hbm", loc=loc)
    f = ir.Access.full
    dma = (("engine", "dma"),)
    body = (ir.Instr("alloc", (f(a),), (), (), None, loc),
            ir.Instr("alloc", (f(b),), (), (), None, loc),
            ir.Instr("dma_copy", (f(a),), (f(x),), dma, None, loc),
            ir.Instr("dma_copy", (f(b),), (f(a),), dma, None, loc),
            ir.Instr("dma_copy", (f(out),), (f(b),), dma, None, loc))
    return ir.Kernel("dma", ("x",), ("out",), (x, a, b, out), body, target="trn2")


def test_dma_between_sbuf_and_psum_is_rejected():
    with pytest.raises(errors.MemorySpaceError) as ei:
        verify(_dma_ir(ir.Space.PSUM, ir.Space.SBUF))
    assert ei.value.name == "memory_space" and f"{HERE}:{line_of('MARK-DMA-IR')}:" in str(ei.value)


def test_dma_sbuf_to_sbuf_is_legal():      # legacy nisa.dma_copy: src and dst may both be in SBUF
    verify(_dma_ir(ir.Space.SBUF, ir.Space.SBUF))
