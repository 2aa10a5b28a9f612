"""The IR: golden text, op-registry coverage, loop size independence, immutability."""
import dataclasses
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.core import ir
from nki_lite.core.ops import BACKENDS, OPS, missing_rules
from nki_lite.typing import tensor

from .kernels.tutorial_style import spmd_add, tiled_matmul

HERE = os.path.basename(__file__)
GOLDEN_ADD = """\
kernel spmd_add(a_input, b_input) -> (c_output) grid=[2,2] target=trn2
  buffer a_input: hbm[256,1024] float32 input  # elementwise.py:10
  buffer b_input: hbm[256,1024] float32 input  # elementwise.py:10
  buffer c_output: hbm[256,1024] float32 output shared_hbm  # elementwise.py:13
  buffer a_tile: sbuf[128,512] float32 local  # elementwise.py:16
  buffer b_tile: sbuf[128,512] float32 local  # elementwise.py:17
  buffer c_tile: sbuf[128,512] float32 local  # elementwise.py:18
  a_tile[@0, @1]<128x512> = alloc()  # elementwise.py:16
  a_tile[@0, @1]<128x512> = dma_copy(a_input[@0 + 128*pid0, @1 + 512*pid1]<128x512>) {engine=dma}  # elementwise.py:16
  b_tile[@0, @1]<128x512> = alloc()  # elementwise.py:17
  b_tile[@0, @1]<128x512> = dma_copy(b_input[@0 + 128*pid0, @1 + 512*pid1]<128x512>) {engine=dma}  # elementwise.py:17
  c_tile[@0, @1]<128x512> = alloc()  # elementwise.py:18
  c_tile[@0, @1]<128x512> = tensor_tensor(a_tile[@0, @1]<128x512>, b_tile[@0, @1]<128x512>) {op=add engine=vector}  # elementwise.py:18
  c_output[@0 + 128*pid0, @1 + 512*pid1]<128x512> = dma_copy(c_tile[@0, @1]<128x512>) {engine=dma}  # elementwise.py:19
"""


def test_golden_spmd_add():
    a = tensor[[256, 1024], nl.float32]
    assert spmd_add[2, 2].inspect_ir(a, a) == GOLDEN_ADD


def test_format_is_stable_across_traces():
    a = tensor[[256, 128], nl.bfloat16]
    b = tensor[[256, 512], nl.bfloat16]
    assert tiled_matmul.inspect_ir(a, b) == tiled_matmul.inspect_ir(a, b)


def test_every_op_has_every_backend():
    from nki_lite.lower.llvm.codegen import generate  # noqa: F401  (the llvm rules register on first use)
    from nki_lite.lower.llvm import rules_common, rules_compute, rules_data, rules_reduce  # noqa: F401
    assert BACKENDS == ("interpret", "llvm", "cost")
    assert missing_rules() == []
    assert len(OPS) >= 12


def test_registry_rejects_unknown_op():
    from nki_lite.core.ops import rule
    with pytest.raises(KeyError):
        rule("interpret", "no_such_op")(lambda m, i, e: None)


@nki.jit
def _looped(x, n_outer):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 4), nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(n_outer):
        for j in nl.affine_range(2):
            t = nl.load(x[:, j * 4:(j + 1) * 4])
            acc[...] = nl.add(acc, nl.exp(t))
    nl.store(out, acc)
    return out


def test_ir_size_independent_of_trip_count():
    x = tensor[[128, 8], nl.float32]
    small = _looped.trace(x, 10)
    big = _looped.trace(x, 10 ** 5)
    assert ir.count_instrs(small) == ir.count_instrs(big)
    loops = [n for n in small.body if isinstance(n, ir.Loop)]
    assert [lp.trip for lp in loops] == [10]
    assert [lp.trip for lp in (n for n in big.body if isinstance(n, ir.Loop))] == [10 ** 5]


def test_static_range_unrolls():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        for j in nl.static_range(3):
            t = nl.load(x[:, j:j + 4])
            nl.store(out, t)
        return out

    kern = k.trace(tensor[[128, 8], nl.float32])
    assert not any(isinstance(n, ir.Loop) for n in kern.body)
    assert sum(1 for i, _ in ir.walk(kern.body) if i.op == "dma_copy") == 6


def test_ir_is_frozen_and_hashable():
    kern = tiled_matmul.trace(tensor[[256, 128], nl.bfloat16], tensor[[256, 512], nl.bfloat16])
    instr = next(i for i, _ in ir.walk(kern.body) if i.op == "nc_matmul")
    with pytest.raises(dataclasses.FrozenInstanceError):
        instr.op = "x"  # type: ignore[misc]
    assert hash(instr) == hash(dataclasses.replace(instr))
    assert instr.attr("accumulate") is True
    assert all(i.loc is not None and i.loc.line > 0 for i, _ in ir.walk(kern.body))


def test_trace_cache_hits_per_signature():
    k = nki.jit(_looped.fn)
    x = np.zeros((128, 8), np.float32)
    k(x, 2)
    k(x, 2)
    k(x, 3)
    assert k.stats["traces"] == 2 and k.stats["hits"] == 1
