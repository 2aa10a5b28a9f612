"""Capacity by liveness (lower/analysis/liveness.py, verify_memory.check_capacity) and the PSUM one-bank tile rule.

Block-dimension tensors cost the blocks live at the same time; over-capacity in an automatically
allocated kernel is a CapacityWarning (NL-W401), an error only for one tile larger than a partition
and under NKI_LITE_STRICT_CAPACITY=1 (direct allocation is placed by its addresses: tests/test_direct_alloc.py).
"""
import warnings

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.lower.verify_memory import CapacityWarning

from .markers import marker_helpers, spec

HERE, line_of, expect = marker_helpers(__file__)


def no_capacity_warning(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        return fn(*args, **kw)


# ------------------------------------------------------------------------------ block dimensions

@nki.jit
def blocked_exp(x, nblk):
    """Every block of `stage` is written and read within one iteration of the loop over j: the
    compiler keeps one block live, not nblk."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    stage = nl.ndarray((nblk, nl.par_dim(128), 8192), x.dtype, buffer=nl.sbuf)
    res = nl.ndarray((nblk, 2, nl.par_dim(128), 4096), x.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(nblk):
        stage[j, :, :] = nl.load(x[:, j * 8192:(j + 1) * 8192])
        for h in nl.affine_range(2):
            res[j, h, :, :] = nl.exp(stage[j, :, h * 4096:(h + 1) * 4096])
            nl.store(out[:, j * 8192 + h * 4096:j * 8192 + (h + 1) * 4096], value=res[j, h, :, :])
    return out


def test_block_tensor_private_to_iterations_costs_one_block():
    # 16 blocks x 32 KiB = 512 KiB declared per tensor, far over trn1's 176 KiB; one block of each
    # live at a time: 32 KiB + 16 KiB
    no_capacity_warning(blocked_exp.trace, spec((128, 16 * 8192)), 16, target="trn1")


def test_block_tensor_runs_correctly():
    x = np.random.default_rng(0).standard_normal((128, 4 * 8192)).astype(np.float32)
    got = no_capacity_warning(blocked_exp, x, 4)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)


@nki.jit
def blocked_shared(x, nblk, reread):
    """A block tensor filled in one loop and read in a second: every block is live at once."""
    out = nl.ndarray((128, 8192), x.dtype, buffer=nl.shared_hbm)
    stage = nl.ndarray((nblk, nl.par_dim(128), 8192), x.dtype, buffer=nl.sbuf)
    acc = nl.zeros((128, 8192), nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(nblk):
        stage[j, :, :] = nl.load(x[:, j * 8192:(j + 1) * 8192])  # MARK-FILL
    for j in nl.sequential_range(nblk if reread else 1):
        acc[...] = nl.add(acc, stage[j, :, :])
    nl.store(out, value=acc)
    return out


def test_block_tensor_read_in_another_loop_costs_every_block_it_touches():
    with pytest.warns(CapacityWarning) as rec:
        blocked_shared.trace(spec((128, 8 * 8192)), 8, True, target="trn1")
    msg = str(rec[0].message)
    assert "NL-W401" in msg and "8 block(s) of 32768 B" in msg and "'stage'" in msg
    assert rec[0].filename == __file__


def test_untouched_blocks_are_not_counted():
    # only block 0 is ever read after the loop, but all 8 are written in it: still 8 live; with
    # nblk=4 (4 x 32 KiB + 32 KiB accumulator) it fits
    no_capacity_warning(blocked_shared.trace, spec((128, 4 * 8192)), 4, True, target="trn1")


def test_a_chain_across_iterations_costs_the_blocks_live_at_once():
    """Iteration j reads the block iteration j-1 wrote: no block belongs to one iteration, so the static
    estimate counts all 8 (256 KiB, over trn1's SBUF); in program order at most two hold a value at
    once (block j dies when iteration j reads it), which is what an allocator needs
    (footprints.refine_blocks): no warning."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8192), x.dtype, buffer=nl.shared_hbm)
        st = nl.ndarray((8, nl.par_dim(128), 8192), x.dtype, buffer=nl.sbuf)
        st[0, :, :] = nl.load(x[:, 0:8192])
        for j in nl.sequential_range(7):
            st[j + 1, :, :] = nl.exp(st[j, :, :])
        nl.store(out, value=st[7, :, :])
        return out
    no_capacity_warning(k.trace, spec((128, 8192)), target="trn1")


# ------------------------------------------------------------------------------ warning vs error

@nki.jit
def four_big(a):
    out = nl.ndarray((128, 8192), a.dtype, buffer=nl.shared_hbm)
    t = [nl.load(a[:, k * 8192:(k + 1) * 8192]) for k in range(6)]
    s = t[0]
    for k in range(1, 6):
        s = nl.add(s, t[k])
    nl.store(out, value=s)
    return out


def test_auto_allocation_over_capacity_warns_with_amount_and_tiles():
    with pytest.warns(CapacityWarning) as rec:
        four_big.trace(spec((128, 6 * 8192)), target="trn1")
    msg = str(rec[0].message)
    assert "bytes over" in msg and "'t" in msg and "allocated at test_capacity_liveness.py" in msg
    over = int(msg.split(" bytes over")[0].rsplit(" ", 1)[1])
    assert over > 0


def test_over_capacity_kernel_still_runs():
    a = np.arange(128 * 6 * 8192, dtype=np.float32).reshape(128, -1) % 7
    four_big._cache.clear()                # traced by the test above: its warning was given then
    with pytest.warns(CapacityWarning):
        got = four_big(a, target="trn1")
    np.testing.assert_array_equal(got, sum(a[:, k * 8192:(k + 1) * 8192] for k in range(6)))


def test_strict_knob_makes_it_an_error(monkeypatch):
    monkeypatch.setenv("NKI_LITE_STRICT_CAPACITY", "1")
    with pytest.raises(errors.MemoryCapacityError) as ei:
        four_big.trace(spec((128, 6 * 8192)), target="trn1")
    assert "NL-E401" in str(ei.value) and "test_capacity_liveness.py" in str(ei.value)


def test_one_tile_larger_than_a_partition_is_always_an_error():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 50000), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)  # MARK-HUGE
        nl.store(out, value=t)
        return out
    e = expect(k, (spec((128, 50000)),), errors.MemoryCapacityError, "sbuf_capacity", "MARK-HUGE", "trn1")
    assert "200000 bytes per partition" in str(e)


def test_just_fitting_tile_is_legal():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 45056), a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))      # 45056 x 4 = 180224 B: trn1's whole partition
        return out
    no_capacity_warning(k.trace, spec((128, 45056)), target="trn1")


def test_direct_allocation_is_placed_by_its_addresses_not_by_the_automatic_estimate():
    # six 32 KiB blocks would be 192 KiB live under automatic allocation (over trn1's 176 KiB), but
    # mod_alloc(base_addr=0) rotates them over one physical tile: the addresses decide, no estimate (each
    # block is read in its own iteration, so the rotation is legal: NL-E505 otherwise)
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 6 * 8192), a.dtype, buffer=nl.shared_hbm)
        st = nl.ndarray((6, nl.par_dim(128), 8192), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        for j in nl.affine_range(6):
            st[j, :, :] = nl.load(a[:, j * 8192:(j + 1) * 8192])
            nl.store(out[:, j * 8192:(j + 1) * 8192], value=st[j, :, :])
        return out
    no_capacity_warning(k.trace, spec((128, 6 * 8192)), target="trn1")


def test_direct_allocation_past_capacity_is_an_error_not_a_warning():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8192), a.dtype, buffer=nl.shared_hbm)
        st = nl.ndarray((6, nl.par_dim(128), 8192), a.dtype,  # MARK-DIRECT
                        buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(6,)))
        for j in nl.affine_range(6):
            st[j, :, :] = nl.load(a[:, j * 8192:(j + 1) * 8192])
        nl.store(out, value=nl.add(st[0, :, :], st[5, :, :]))
        return out
    expect(k, (spec((128, 6 * 8192)),), errors.MemoryCapacityError, "allocation_capacity", "MARK-DIRECT", "trn1")


def test_auto_alloc_allocator_is_automatic():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8192), a.dtype, buffer=nl.shared_hbm)
        st = nl.ndarray((6, nl.par_dim(128), 8192), a.dtype, buffer=ncc.sbuf.auto_alloc())
        for j in nl.affine_range(6):
            st[j, :, :] = nl.load(a[:, j * 8192:(j + 1) * 8192])
        acc = nl.zeros((128, 8192), a.dtype, buffer=nl.sbuf)
        for j in nl.sequential_range(6):          # every block read after all were loaded: all 6 live
            acc[...] = nl.add(acc, st[j, :, :])
        nl.store(out, value=acc)
        return out
    with pytest.warns(CapacityWarning, match="hardware compiler would spill"):
        k.trace(spec((128, 6 * 8192)), target="trn1")


# ------------------------------------------------------------------------------ PSUM tiles: one bank

def _psum_tile(cols, dtype, blocks=0):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, cols), nl.float32, buffer=nl.shared_hbm)
        shape = (blocks, nl.par_dim(128), cols) if blocks else (128, cols)
        ps = nl.zeros(shape, dtype, buffer=nl.psum)  # MARK-PSUM-TILE
        t = nl.load(a)
        if blocks:
            for b in nl.sequential_range(blocks):
                ps[b, :, :] = nl.add(ps[b, :, :], t)
                nl.store(out, value=nl.copy(ps[b, :, :], dtype=nl.float32))
        else:
            ps[...] = nl.add(ps, t)
            nl.store(out, value=nl.copy(ps, dtype=nl.float32))
        return out
    return k


@pytest.mark.parametrize("target", ("trn1", "trn2"))
def test_psum_tile_over_one_bank_is_an_error(target):
    e = expect(_psum_tile(1024, nl.float32), (spec((128, 1024)),), errors.MemoryCapacityError, "psum_bank",
               "MARK-PSUM-TILE", target)
    assert "4096 bytes per partition" in str(e) and "512 float32" in str(e)


@pytest.mark.parametrize("cols,dtype", ((512, nl.float32), (1024, nl.bfloat16), (8, nl.float32)))
def test_psum_tile_of_one_bank_is_legal(cols, dtype):
    _psum_tile(cols, dtype).trace(spec((128, cols)), target="trn2")


def test_psum_block_tensor_of_one_bank_blocks_is_legal():
    no_capacity_warning(_psum_tile(512, nl.float32, blocks=4).trace, spec((128, 512)), target="trn2")


def test_psum_tile_over_a_bank_is_legal_on_trn3():
    _psum_tile(1024, nl.float32).trace(spec((128, 1024)), target="trn3")
