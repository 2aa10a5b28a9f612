"""Block tensors allocated as used (lower/blocks.py, lower/passes/compact_blocks.py): a block-dimension
tensor whose blocks each belong to one loop iteration holds only that iteration's blocks, in the
interpreter and the JIT alike, with results bit for bit those of the declared tensor.

The patterns re-create NKIBench's (zhang677/AccelOpt) matmul/lora shapes in small: SBUF/PSUM
tensors with block dimensions declared before the loops, each block written and read inside one
iteration; a block read after its loop (every block stays); several loop levels; an SPMD grid.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.core import ir
from nki_lite.lower.passes import pipeline
from nki_lite.runtime.debug_checks import machine_class

from .test_jit_differential import run_both

F32 = np.float32
P, F = 128, 64


def _prepared(kernel, *args):
    traced = kernel.trace(*args)
    return traced, pipeline.prepared(traced, "interpret")


def _declared_run(traced, args, names):
    """The interpreter on the kernel as traced (no compaction): the declared tensors' results."""
    m = machine_class(traced)(traced, dict(zip(names, args)))
    m.run()
    return [m.mem[o] for o in traced.outputs]


def _shape(kernel: ir.Kernel, name: str) -> tuple:
    return kernel.buffer(name).shape


def _same(traced, args, names, kernel):
    """Compacted interpreter == declared interpreter == JIT, bit for bit; returns the result."""
    want = _declared_run(traced, [a.copy() for a in args], names)
    got = run_both(kernel, [a.copy() for a in args])
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w.view(np.uint32), np.asarray(g).view(np.uint32))
    return got


@nki.jit
def per_block(a):
    nb = a.shape[0]
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    blk = nl.ndarray((nb, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="blk")
    for i in nl.affine_range(nb):
        blk[i] = nl.load(a[i])
        nl.store(out[i], value=nl.multiply(blk[i], 3.0))
    return out


@pytest.mark.parametrize("nb", [2, 5, 16])
def test_block_count_varies_compacted_to_one_block(nb):
    a = np.random.default_rng(nb).standard_normal((nb, P, F)).astype(F32)
    traced, prep = _prepared(per_block, a)
    assert _shape(traced, "blk") == (nb, P, F)
    assert _shape(prep, "blk") == (P, F)                     # one block: the running iteration's
    got = _same(traced, [a], ["a"], per_block)
    np.testing.assert_array_equal(got[0], a * F32(3))


@nki.jit
def nested(a):
    """(4, 3, par, F): blocks of the i loop's iteration are (i, 0..2), written by one inner loop and
    read by the next; the i dimension is dropped, the j dimension kept (3 blocks live)."""
    out = nl.ndarray((4, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 3, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="t")
    acc = nl.zeros((4, nl.par_dim(P), F), dtype=nl.float32, buffer=nl.psum, name="acc")
    for i in nl.affine_range(4):
        for j in nl.affine_range(3):
            t[i, j] = nl.load(a[3 * i + j])
        for j in nl.affine_range(3):
            acc[i] += nl.multiply(t[i, 2 - j], 1.5)
        nl.store(out[i], value=acc[i])
    return out


def test_nested_loops_keep_the_dimension_that_varies_within_an_iteration():
    a = np.random.default_rng(1).standard_normal((12, P, F)).astype(F32)
    traced, prep = _prepared(nested, a)
    assert _shape(prep, "t") == (3, P, F)
    assert _shape(prep, "acc") == (P, F)                     # the zero fill is redone per iteration
    fills = [n for n in prep.body[0].body if isinstance(n, ir.Instr) and n.op == "memset"]
    assert len(fills) == 1 and fills[0].out.buffer == "acc"
    _same(traced, [a], ["a"], nested)


@nki.jit
def read_after_loop(a):
    """Every block is read again after the loop that wrote it: all blocks stay live."""
    out = nl.ndarray((4, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="t")
    for i in nl.affine_range(4):
        t[i] = nl.load(a[i])
    for i in nl.affine_range(4):
        nl.store(out[i], value=nl.add(t[i], t[3 - i]))
    return out


def test_block_read_after_its_loop_keeps_every_block():
    a = np.random.default_rng(2).standard_normal((4, P, F)).astype(F32)
    traced, prep = _prepared(read_after_loop, a)
    assert _shape(prep, "t") == (4, P, F)
    got = _same(traced, [a], ["a"], read_after_loop)
    np.testing.assert_array_equal(got[0], a + a[::-1])


@nki.jit
def two_per_iteration(a):
    """Iteration i touches blocks 2i and 2i+1: the dimension is kept (the two differ)."""
    out = nl.ndarray((4, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="t")
    for i in nl.affine_range(4):
        t[2 * i] = nl.load(a[i])
        t[2 * i + 1] = nl.multiply(t[2 * i], 2.0)
        nl.store(out[i], value=nl.add(t[2 * i], t[2 * i + 1]))
    return out


def test_two_blocks_per_iteration_stay_distinct():
    a = np.random.default_rng(3).standard_normal((4, P, F)).astype(F32)
    traced, prep = _prepared(two_per_iteration, a)
    assert _shape(prep, "t") == (8, P, F)                    # not provably fixed: kept whole
    got = _same(traced, [a], ["a"], two_per_iteration)
    np.testing.assert_array_equal(got[0], a * F32(3))


@nki.jit(grid=(2,))
def gridded(a):
    out = nl.ndarray((2, 3, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    t = nl.ndarray((2, 3, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="t")
    for i in nl.affine_range(3):
        t[pid, i] = nl.load(a[pid, i])
        nl.store(out[pid, i], value=nl.exp(t[pid, i]))
    return out


def test_grid_programs_each_hold_their_own_blocks():
    a = np.random.default_rng(4).standard_normal((2, 3, P, F)).astype(F32)
    traced, prep = _prepared(gridded, a)
    assert _shape(prep, "t") == (P, F)
    _same(traced, [a], ["a"], gridded)


@nki.jit
def many_blocks(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    blk = nl.ndarray((64, nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf, name="blk")
    acc = nl.zeros((nl.par_dim(P), F), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.sequential_range(64):
        blk[i] = nl.load(a)
        acc[...] = nl.add(acc, blk[i])
    nl.store(out, value=acc)
    return out


def test_host_memory_follows_the_on_chip_footprint(monkeypatch):
    """A declared tensor larger than the host allocation limit runs: only one block is allocated."""
    a = np.random.default_rng(5).standard_normal((P, F)).astype(F32)
    declared = 64 * P * F * 4
    monkeypatch.setenv("NKI_LITE_MAX_ALLOC_BYTES", str(declared // 2))
    got = run_both(many_blocks, [a])
    want = np.zeros_like(a)
    for _ in range(64):
        want = want + a
    np.testing.assert_array_equal(got[0], want)


def test_capacity_rule_and_compaction_agree_on_the_loop():
    """The verifier charges the blocks of one iteration (lower/footprints.py) by the same scope."""
    from nki_lite.lower.blocks import block_scopes
    from nki_lite.lower.verify_common import Ctx
    a = np.random.default_rng(1).standard_normal((12, P, F)).astype(F32)
    sc = block_scopes(Ctx.build(nested.trace(a)))
    assert sc["t"].blocks == 3 and sc["t"].keep == (1,) and sc["t"].loops[-1].trip == 4
    assert sc["acc"].blocks == 1 and len(sc["acc"].fills) == 1


def test_huge_llvm_ir_is_optimised_at_o1_with_the_same_results(monkeypatch):
    """Compile time of kernels Python loops unroll (lower/llvm/target.py effective_opt): over the size
    threshold LLVM runs at -O1; the kernel computes the same bits."""
    from nki_lite.lower.llvm import target
    from nki_lite.runtime.compiled import CompiledKernel
    a = np.random.default_rng(6).standard_normal((5, P, F)).astype(F32)
    small = CompiledKernel(per_block.trace(a), False, opt=3)
    assert small.module.opt_used == 3
    monkeypatch.setattr(target, "HUGE_IR_CHARS", 1000)
    huge = CompiledKernel(per_block.trace(a), False, opt=3)
    assert huge.module.opt_used == 1 and huge.opt == 3           # the requested level keys the caches
    outs = [ck.launch({"a": a.copy()}) for ck in (small, huge)]
    assert outs[0].keys() == outs[1].keys() and outs[0]
    for name in outs[0]:
        np.testing.assert_array_equal(outs[0][name].view(np.uint32), outs[1][name].view(np.uint32))
        np.testing.assert_array_equal(outs[0][name], a * F32(3))
