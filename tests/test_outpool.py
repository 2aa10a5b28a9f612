"""Recycled output memory (runtime/outpool.py): a large output reuses the block of a dead one of the
same byte size — never a block anything can still see — and recycled contents never reach a
result (outputs the plan does not prove fully written are still NaN-filled)."""
import gc

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.stdlib as S
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.runtime import outpool as P

from .oracle import assert_bits

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")

BIG = (1024, 512)            # 2 MiB of fp32: pooled


@pytest.fixture(autouse=True)
def _fresh_pool():
    gc.collect()
    P.clear()
    yield
    gc.collect()
    P.clear()


def test_dead_output_block_is_reused_for_the_same_size():
    a = P.empty(BIG, np.float32)
    ptr = a.ctypes.data
    del a
    b = P.empty(BIG, np.float32)
    assert b.ctypes.data == ptr and P.stats()["hits"] == 1
    assert b.shape == BIG and b.dtype == np.float32 and b.flags.c_contiguous and b.flags.writeable


@pytest.mark.parametrize("shape, dtype", [((1024, 512), np.float16), ((512, 512), np.float32),
                                          ((1024, 513), np.float32)])
def test_other_byte_sizes_get_other_blocks(shape, dtype):
    """Byte size decides (same bytes in another dtype or shape would be reused: (1024, 512) fp16 is
    1 MiB, not 2)."""
    a = P.empty(BIG, np.float32)
    ptr = a.ctypes.data
    del a
    b = P.empty(shape, dtype)
    assert b.ctypes.data != ptr and P.stats()["hits"] == 0


def test_same_bytes_other_dtype_and_shape_reuse_the_block():
    a = P.empty(BIG, np.float32)
    ptr = a.ctypes.data
    del a
    b = P.empty((2048, 512), ml_dtypes.bfloat16)
    assert b.ctypes.data == ptr and b.dtype == ml_dtypes.bfloat16 and b.shape == (2048, 512)


def test_a_live_view_keeps_the_block_out_of_the_pool():
    a = P.empty(BIG, np.float32)
    view = a[5:7, 3]
    view_of_view = view.reshape(-1)
    del a, view
    b = P.empty(BIG, np.float32)
    assert not np.shares_memory(b, view_of_view) and P.stats()["hits"] == 0
    ptr = view_of_view.__array_interface__["data"][0]
    del view_of_view
    c = P.empty(BIG, np.float32)                 # the block came back once its last view died
    assert c.ctypes.data <= ptr < c.ctypes.data + c.nbytes and P.stats()["hits"] == 1


def test_small_outputs_are_plain_arrays():
    a = P.empty((4, 4), np.float32)
    assert a.flags.owndata and P.stats()["misses"] == 0


def test_free_blocks_are_bounded(monkeypatch):
    monkeypatch.setattr(P, "MAX_BYTES", 5 << 20)
    arrays = [P.empty(BIG, np.float32) for _ in range(4)]         # 4 x 2 MiB
    ptrs = [a.ctypes.data for a in arrays]
    for k in range(4):                                            # die in order 0, 1, 2, 3
        arrays[k] = None
    s = P.stats()
    assert s["free_bytes"] <= 5 << 20 and s["free_blocks"] == 2
    assert P.empty(BIG, np.float32).ctypes.data == ptrs[2]        # the oldest were released


@nki.jit
def _fill(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]],
                 nl.load(x[i * 128 + nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]]))
    return out


@nki.jit
def _half(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out[nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]],
             nl.load(x[nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]]))
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")          # (the half-written output is the point)
def test_recycled_contents_never_reach_a_result():
    """A kernel writes a full output of ones, which dies; a kernel that writes only its first 128
    rows then gets that block: the rest reads as NaN, as the interpreter says, not as the ones."""
    x = np.ones(BIG, np.float32)
    first = _fill(x)
    ptr = first.ctypes.data
    del first
    got = _half(x * 2)
    assert got.ctypes.data == ptr                # the recycled block
    assert_bits(got, _half(x * 2, mode="interpret"), "half-written output in a recycled block")
    assert np.isnan(got[128:]).all() and (got[:128] == 2).all()


def test_stdlib_results_from_recycled_blocks_match_the_interpreter():
    x = np.random.default_rng(0).standard_normal((1024, 600)).astype(np.float32)
    first = S.softmax(x)
    ptr = first.ctypes.data
    del first
    again = S.softmax(x * 3)
    assert again.ctypes.data == ptr
    call = S.softmax.plan(x * 3)
    assert_bits(again, call.kernel(*call.args, mode="interpret"), "softmax in a recycled block")
