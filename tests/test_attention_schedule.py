"""The flash-attention kernel's instruction order (stdlib/attention_kernels.py): per key block, each
query tile's softmax step in turn, then every P transpose of the group before the P V matmuls (one
PSUM bank of four transposes per tile), and the running max updated after P V. The order is what
the engine model's in-order engines see; the results stay exact: JIT == interpreter bit for bit on
full blocks (the looped path), bf16 / fp8 inputs, GQA, causal and ragged keys."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_lite.core import ir
from nki_lite.stdlib import attention
from nki_lite.stdlib.attention_kernels import KB, QT

from .test_stdlib import _interpret_equals_jit, _rand


def _walk_ops(kernel):
    return [(i.op, tuple(lp.kind for lp in loops)) for i, loops in ir.walk(kernel.body)]


def test_transposes_of_a_group_run_back_to_back():
    q = _rand(40, (1, 1, 4 * QT, 64))
    k = _rand(41, (1, 1, 3 * KB, 64))
    c = attention.plan(q, k, k)
    ops = [op for op, loops in _walk_ops(c.kernel.trace(*c.args)) if "sequential" in loops]
    tensor = [op for op in ops if op in ("transpose", "nc_matmul")]
    per_block = 4 + 4 * (KB // QT) * 2          # 4 score matmuls, 16 transposes, 16 P V matmuls
    assert len(tensor) == per_block
    assert tensor[:4] == ["nc_matmul"] * 4
    assert tensor[4:4 + 4 * (KB // QT)] == ["transpose"] * (4 * (KB // QT))
    assert tensor[4 + 4 * (KB // QT):] == ["nc_matmul"] * (4 * (KB // QT))
    # the running max is written once per tile and block, after the P V phase
    body = [op for op in ops if op != "alloc"]
    last_matmul = max(i for i, op in enumerate(body) if op == "nc_matmul")
    assert body[last_matmul:].count("tensor_tensor") >= 4


@pytest.mark.parametrize("dt, causal, shapes", [
    (ml_dtypes.bfloat16, False, ((1, 2, 200, 32), (1, 1, 2 * KB, 32))),      # GQA, two full blocks
    (ml_dtypes.float8_e4m3, True, ((1, 1, 130, 16), (1, 1, KB + 40, 16))),   # causal, ragged tail
    (np.float32, False, ((1, 1, 2 * QT, 8), (1, 1, 2 * KB, 8))),
])
def test_attention_full_blocks_jit_equals_interpreter(dt, causal, shapes):
    qs, ks = shapes
    q, k, v = _rand(42, qs, dt), _rand(43, ks, dt), _rand(44, ks, dt)
    _interpret_equals_jit(attention, q, k, v, causal=causal)
