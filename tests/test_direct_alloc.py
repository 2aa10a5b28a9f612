"""Direct allocation honoured (core/placement.py, nki_lite/compiler.py `Allocator.place`).

Each logical block of a tensor declared with an nki.compiler allocator gets a physical tile: modulo
allocation rotates the blocks over num_free_tiles / num_bank_tiles tiles (legal reuse), alloc(func)
asks the kernel's function. A tile past the target's SBUF bytes or PSUM banks is NL-E506, a
malformed allocator NL-E909, both at the declaring line; a space placed entirely by the kernel gets
no automatic-allocation capacity estimate.
"""
import warnings

import functools

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import placement
from nki_lite.lower.verify_memory import CapacityWarning

from .markers import marker_helpers, spec

HERE, line_of, expect = marker_helpers(__file__)
TRN1 = dict(pmax=128, capacity=176 * 1024, banks=8, bank_bytes=2048)


def test_modulo_allocation_rotates_blocks_over_the_free_tiles():
    got = placement.place("mod_alloc", False, {"base_addr": 512, "num_free_tiles": (3,)}, (7,), 128, 1024, **TRN1)
    assert [got[(i,)].addr for i in range(7)] == [512 + (i % 3) * 1024 for i in range(7)]
    assert {got[(i,)].partition for i in range(7)} == {0}


def test_modulo_allocation_linearises_two_block_dimensions():
    got = placement.place("mod_alloc", True, {"base_bank": 1, "num_bank_tiles": (2, 3)}, (4, 3), 128, 2048, **TRN1)
    assert got[(0, 0)].bank == 1 and got[(0, 2)].bank == 3 and got[(1, 0)].bank == 4 and got[(3, 2)].bank == 6
    assert got[(2, 1)] == got[(0, 1)]             # index 2 wraps to 0 along the first dimension


def test_tile_counts_pair_with_block_indices_as_the_reference_zips_them():
    # the documented modulo_allocate_func zips indices with counts and linearises over the counts' shape:
    # one block dimension with counts (2, 3) steps by 3 tiles; no block dimension with (1,) is the base
    got = placement.place("mod_alloc", True, {"base_bank": 0, "num_bank_tiles": (2, 3)}, (4,), 128, 2048, **TRN1)
    assert [got[(i,)].bank for i in range(4)] == [0, 3, 0, 3]
    got = placement.place("mod_alloc", False, {"base_addr": 256, "num_free_tiles": (1,)}, (), 128, 512, **TRN1)
    assert got[()].addr == 256
    got = placement.place("mod_alloc", False, {"base_addr": 0, "num_free_tiles": (2,)}, (3, 2), 128, 512, **TRN1)
    assert [got[(i, j)].addr for i in range(3) for j in range(2)] == [0, 0, 512, 512, 0, 0]


def test_default_tile_counts_share_one_physical_tile():
    got = placement.place("mod_alloc", False, {"base_addr": 0}, (5,), 64, 256, **TRN1)
    assert len(set(got.values())) == 1


def test_alloc_function_gets_block_index_partitions_and_bytes():
    seen = []

    def where(idx, pdim, fdim):
        seen.append((idx, pdim, fdim))
        return (0, idx[0] * fdim)
    got = placement.place("alloc", False, {"func": where}, (2,), 96, 400, **TRN1)
    assert seen == [((0,), 96, 400), ((1,), 96, 400)] and got[(1,)].addr == 400


def _two_buffered(base, ntiles, width=512):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4 * width), a.dtype, buffer=nl.shared_hbm)
        st = nl.ndarray((4, nl.par_dim(128), width), a.dtype,  # MARK-ST
                        buffer=ncc.sbuf.mod_alloc(base_addr=base, num_free_tiles=(ntiles,)))
        for j in nl.affine_range(4):     # each block lives within its iteration: legal rotation
            acc = nl.ndarray((nl.par_dim(128), width), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
            st[j, :, :] = nl.load(a[:, j * width:(j + 1) * width])
            acc[...] = nl.add(st[j, :, :], st[j, :, :])
            nl.store(out[:, j * width:(j + 1) * width], value=acc)
        return out
    return k


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_rotating_direct_allocation_runs_and_gets_no_capacity_estimate(mode):
    a = np.random.default_rng(3).random((128, 4 * 512), dtype=np.float32)
    k = _two_buffered(2048, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        got = k(a, mode=mode)
    np.testing.assert_allclose(got, 2 * a, rtol=1e-6)


def test_sbuf_tiles_past_the_partition_are_an_error_at_the_declaration():
    # 4 free tiles of 32 KiB from byte 64 KiB end at 192 KiB; trn1 partitions have 176 KiB usable
    e = expect(_two_buffered(65536, 4, 8192), (spec((128, 4 * 8192)),), errors.MemoryCapacityError,
               "allocation_capacity", "MARK-ST", "trn1")
    assert "past the" in str(e)


def test_the_same_tiles_fit_a_larger_partition():
    _two_buffered(65536, 4, 8192).trace(spec((128, 4 * 8192)), target="trn2")     # 224 KiB per partition


def _psum(alloc):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((2, nl.par_dim(128), 512), nl.float32, buffer=alloc)   # MARK-PS
        x = nl.load(a)
        y = nl.load(b)
        for j in nl.affine_range(2):
            ps[j, :, :] = nisa.nc_matmul(x, y)
        nl.store(out, value=nl.add(ps[0, :, :], ps[1, :, :]))
        return out
    return k


def test_psum_bank_past_the_last_is_an_error():
    e = expect(_psum(ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(2,))), (spec((128, 128)), spec((128, 512))),
               errors.MemoryCapacityError, "allocation_capacity", "MARK-PS", "trn1")
    assert "bank 8" in str(e)


def test_psum_alloc_function_with_banks_runs():
    a = np.random.default_rng(4).random((128, 128), dtype=np.float32)
    b = np.random.default_rng(5).random((128, 512), dtype=np.float32)
    k = _psum(ncc.psum.alloc(lambda idx, p, f: (2 + idx[0], 0, 0)))
    np.testing.assert_allclose(k(a, b), 2 * (a.T @ b), rtol=1e-4)



def test_psum_alloc_function_bound_by_parameter_names_runs():
    # a partial whose leading parameter is bound by keyword takes the documented names only
    def where(bank_map, idx, pdim_size, fdim_size):
        return (bank_map[idx], 0, 0)
    a = np.random.default_rng(6).random((128, 128), dtype=np.float32)
    b = np.random.default_rng(7).random((128, 512), dtype=np.float32)
    k = _psum(ncc.psum.alloc(functools.partial(where, bank_map={(0,): 3, (1,): 6})))
    np.testing.assert_allclose(k(a, b), 2 * (a.T @ b), rtol=1e-4)

@pytest.mark.parametrize("alloc, words", [
    (ncc.psum.mod_alloc(num_bank_tiles=(2,)), "needs base_bank"),
    (ncc.psum.mod_alloc(base_bank=0, bank=3), "does not take bank"),
    (ncc.psum.alloc(lambda idx, p, f: (0, 0)), "must return (bank, start_partition, byte_addr)"),
    (ncc.psum.alloc(lambda idx, p, f: (0, 0, 64)), "starts at partition 0, byte 0"),
    (ncc.psum.alloc(None), "needs a function"),
    (ncc.psum.alloc(lambda idx, p, f: ({(0,): 1}[idx], 0, 0)), "raised KeyError"),
])
def test_malformed_allocators_are_reported_at_the_declaration(alloc, words):
    e = expect(_psum(alloc), (spec((128, 128)), spec((128, 512))), errors.ArgumentError, "malformed_allocation",
               "MARK-PS", "trn1")
    assert words in str(e)


def test_start_partition_follows_the_isa_rule():
    with pytest.raises(placement.MalformedAllocation, match="start partition 32"):
        placement.place("alloc", False, {"func": lambda i, p, f: (32, 0)}, (1,), 64, 128, **TRN1)
    placement.place("alloc", False, {"func": lambda i, p, f: (96, 0)}, (1,), 32, 128, **TRN1)
