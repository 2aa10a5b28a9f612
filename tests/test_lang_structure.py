"""How the frontend is put together (issue #11): Tile reaches the nl ops through one table the op
modules fill (lang/tile.py TILE_OPS), hardware limits come from the target table
(core/targets.py) rather than literals, and the nki.compiler allocators plug into lang through
memory.ALLOCATOR_RESOLVERS."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.core.targets import TARGETS
from nki_lite.lang import memory, tile
from nki_lite.lang.trace import trace
from nki_lite.lang.tracer import Tracer
from nki_lite.loc import UNKNOWN_LOC


def _trace(kernel, *args, target="trn2"):
    return trace(kernel.fn, kernel.bind(args, {}), (), target)


def _with_target(monkeypatch, **facts):
    """trn2 with some hardware facts changed, for the duration of the test."""
    monkeypatch.setitem(TARGETS, "trn2", dataclasses.replace(TARGETS["trn2"], **facts))


# ---------------------------------------------------------------- the operator table

def test_tile_operators_call_the_function_in_the_table(monkeypatch):
    calls = []
    real = tile.TILE_OPS["add"]

    def spy(x, y):
        calls.append((x.shape, y.shape))
        return real(x, y)

    monkeypatch.setitem(tile.TILE_OPS, "add", spy)

    @nki.jit
    def k(a):
        t = nl.load(a)
        s = t + t
        return None

    kern = _trace(k, np.zeros((4, 8), np.float32))
    assert calls == [((4, 8), (4, 8))]
    assert any(n.op == "tensor_tensor" for n in kern.body if isinstance(n, ir.Instr))


def test_every_nl_function_the_operators_name_is_registered():
    names = {"add", "subtract", "multiply", "divide", "mod", "power", "bitwise_and", "bitwise_or", "bitwise_xor",
             "left_shift", "right_shift", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
             "negative", "abs", "invert", "broadcast_to", "sum", "max", "min", "prod", "mean", "all", "var",
             "transpose", "where", "matmul", "copy", "exp", "assign", "update_in_place", "reshape"}
    assert names <= set(tile.TILE_OPS)
    assert tile.TILE_OPS["add"] is nl.add and tile.TILE_OPS["exp"] is nl.exp


def test_a_missing_table_entry_is_an_internal_error_naming_the_op(monkeypatch):
    monkeypatch.delitem(tile.TILE_OPS, "subtract")

    @nki.jit
    def k(a):
        t = nl.load(a)
        s = t - t
        return None

    with pytest.raises(LookupError, match="'subtract'"):
        _trace(k, np.zeros((4, 8), np.float32))


# ---------------------------------------------------------------- hardware facts from the target table

def test_partition_limit_of_created_tiles_comes_from_the_target(monkeypatch):
    _with_target(monkeypatch, partitions=64)

    @nki.jit
    def k(a):
        t = nl.ndarray((96, 8), nl.float32, buffer=nl.sbuf)
        return None

    with pytest.raises(errors.ShapeError) as ei:
        _trace(k, np.zeros((2, 2), np.float32))
    assert "limit of 64 partitions" in str(ei.value) and "96" in str(ei.value)


def test_partition_limit_of_result_tiles_comes_from_the_target(monkeypatch):
    _with_target(monkeypatch, partitions=64)

    @nki.jit
    def k(a):
        t = nl.load(a)
        return None

    with pytest.raises(errors.ShapeError) as ei:
        _trace(k, np.zeros((96, 8), np.float32))
    assert "limit of 64 partitions" in str(ei.value)


def test_vector_transpose_limit_comes_from_the_target(monkeypatch):
    _with_target(monkeypatch, transpose_vector_max=16)

    @nki.jit
    def k(a):
        t = nl.load(a)
        u = nisa.nc_transpose(t, engine=nisa.vector_engine)
        return None

    with pytest.raises(errors.NkiLiteError) as ei:
        _trace(k, np.zeros((20, 20), np.float32))
    assert "16x16" in str(ei.value) and "20x20" in str(ei.value)


def test_tensor_transpose_limit_comes_from_the_target(monkeypatch):
    _with_target(monkeypatch, transpose_tensor_max=64)

    @nki.jit
    def k(a):
        t = nl.load(a)
        u = nisa.nc_transpose(t, engine=nisa.tensor_engine)
        return None

    _trace(k, np.zeros((64, 64), np.float32))
    with pytest.raises(errors.NkiLiteError) as ei:
        _trace(k, np.zeros((100, 64), np.float32))
    assert "64x64" in str(ei.value) and "100x64" in str(ei.value)


def test_nc_transposes_default_engine_follows_the_target(monkeypatch):
    """Without engine=, a tile within the Vector Engine's limit transposes there (SBUF result), a larger
    one on the Tensor Engine (PSUM result)."""
    @nki.jit
    def k(a):
        t = nl.load(a)
        u = nisa.nc_transpose(t)
        return None

    def result_space(kern):
        instr = next(n for n in kern.body if isinstance(n, ir.Instr) and n.op == "transpose")
        return {b.name: b for b in kern.buffers}[instr.outs[0].buffer].space, dict(instr.attrs)["engine"]

    assert result_space(_trace(k, np.zeros((20, 20), np.float32))) == (ir.Space.SBUF, "vector")
    _with_target(monkeypatch, transpose_vector_max=16)
    assert result_space(_trace(k, np.zeros((20, 20), np.float32))) == (ir.Space.PSUM, "tensor")


def test_max8_free_size_limits_come_from_the_target(monkeypatch):
    _with_target(monkeypatch, max8_fmin=4, max8_fmax=64)

    @nki.jit
    def k(a):
        t = nl.load(a)
        u = nisa.max8(src=t)
        return None

    _trace(k, np.zeros((2, 64), np.float32))           # 64 elements: within the changed limit
    with pytest.raises(errors.NkiLiteError) as ei:
        _trace(k, np.zeros((2, 65), np.float32))
    assert "4..64" in str(ei.value)


def test_nc_version_comes_from_the_target(monkeypatch):
    _with_target(monkeypatch, nc_version=4)

    @nki.jit
    def k(a):
        assert nisa.get_nc_version() == nisa.nc_version.gen4
        return None

    _trace(k, np.zeros((2, 2), np.float32))


def test_an_unknown_target_name_reads_the_default_targets_facts():
    assert Tracer("k", (), "trn2").hw is TARGETS["trn2"]
    assert Tracer("k", (), "trn1").hw is TARGETS["trn1"]
    assert Tracer("k", (), "not-a-target").hw is TARGETS["trn2"]


def test_tile_size_is_nkis_documented_table():
    """nl.tile_size reads core/targets.py (trn1); the values are NKI's (NKI_REFERENCE §1.6)."""
    ts = nl.tile_size
    assert (ts.pmax, ts.psum_fmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax, ts.bn_stats_fmax,
            ts.psum_bank_fmax, ts.psum_num_banks, ts.total_available_sbuf_size) == \
        (128, 512, 128, 512, 512, 512, 8, 192 * 1024 - 16 * 1024)


# ---------------------------------------------------------------- the allocator hook

def test_compiler_allocators_resolve_through_the_lang_hook():
    assert memory.as_space(ncc.sbuf.mod_alloc(base_addr=0), UNKNOWN_LOC) is nl.sbuf
    assert memory.as_space(ncc.psum.auto_alloc(), UNKNOWN_LOC) is nl.psum
    assert memory.allocator_space(object()) is None
    with pytest.raises(errors.NkiLiteError):
        memory.as_space(object(), UNKNOWN_LOC)
