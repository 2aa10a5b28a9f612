"""Op traits (nki_lite/core/ops.py): every op declares every trait, and every consumer of a trait
answers the way the registry says, op by op (a consumer that kept a private op list, or ignored the
trait, would disagree for some op here)."""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from nki_lite.core import ir, ops
from nki_lite.core.affine import Affine, axis_var
from nki_lite.core.ops import ALL, KINDS, OPS, TRAITS
from nki_lite.lower import parallel
from nki_lite.lower.analysis import dependence
from nki_lite.lower.llvm import fusion, rowmajor, rules_common
from nki_lite.lower.passes import forward_loads as forward
from nki_lite.lower.verify_common import iteration_space
from nki_lite.stdlib.elementwise import spmd_add

NAMES = sorted(OPS)
P, F = 4, 32                     # F >= the JIT's vector width (16)


def _acc(buf: str, shape=(P, F)) -> ir.Access:
    return ir.Access(buf, tuple(Affine.var(axis_var(k)) for k in range(len(shape))), shape)


def _instr(op: str, out: str, src: str, attrs=()) -> ir.Instr:
    return ir.Instr(op, (_acc(out),), (_acc(src),), attrs)


class _Em:
    """The few emitter questions fusion/rowmajor/_vectorizable ask: no views, row-major layout."""
    vectorize = True

    def root(self, name):
        return name

    def flat_index(self, acc):
        return acc.index[-1]


# ---------------------------------------------------------------- declarations

def test_every_op_declares_every_trait():
    for name, op in OPS.items():
        assert {f for f in TRAITS if hasattr(op, f)} == set(TRAITS), name
    before = dict(OPS)
    full = {t: getattr(OPS["tensor_copy"], t) for t in TRAITS}
    with pytest.raises(TypeError, match="must declare exactly the traits"):
        ops._op("new_op", "m", **{k: v for k, v in full.items() if k != "fusable"})    # one left out
    with pytest.raises(TypeError, match="must declare exactly the traits"):
        ops._op("new_op", "m", **full, cheap=True)                                     # an unknown one
    assert OPS == before


def test_trait_values_are_well_formed():
    for name, op in OPS.items():
        assert op.engine in ("tensor", "vector", "scalar", "gpsimd", "dma", "none"), name
        assert op.kind in KINDS, name
        for t in ("fusable", "vector", "row_local", "plain_reads", "input_space", "accumulates", "host_effect"):
            assert isinstance(getattr(op, t), bool), (name, t)
        assert op.unmasked_inputs == ALL or all(isinstance(k, int) for k in op.unmasked_inputs), name
        # a fused member's value is computed by the elementwise emitter, which is what vectorises
        assert not op.fusable or op.vector, name


# ---------------------------------------------------------------- consumers agree, op by op

def _fused(name) -> bool:
    return fusion._fusable(_instr(name, "o", "a"))


def _row_major(name) -> bool:
    return rowmajor.row_local(_Em(), [_instr(name, "o", "a"), _instr(name, "o2", "o")]) == P


def _vectorised(name) -> bool:
    instr = _instr(name, "o", "a")
    return rules_common._vectorizable(_Em(), instr, (P, F), instr.ins, False, None)


def _forwarded(name) -> bool:
    bufs = (ir.Buffer("x", ir.Space.HBM, (P, F), "float32", "input"),
            ir.Buffer("t", ir.Space.SBUF, (P, F), "float32"),
            ir.Buffer("o", ir.Space.SBUF, (P, F), "float32"))
    body = (ir.Instr("dma_copy", (_acc("t"),), (_acc("x"),)), _instr(name, "o", "t"))
    k = forward.forward_loads(ir.Kernel("k", ("x",), (), bufs, body), {})
    return k.body[1].ins[0].buffer == "x"


def _space_of_input(name) -> bool:
    return iteration_space(ir.Instr(name, (_acc("o", (P, 1)),), (_acc("a"),))) == (P, F)


# trait -> what its consumer decides for an op (the consumer's own answer, not the registry's)
CONSUMERS = {"fusable": _fused, "row_local": _row_major, "vector": _vectorised, "plain_reads": _forwarded,
             "input_space": _space_of_input}


@pytest.mark.parametrize("trait", sorted(CONSUMERS))
@pytest.mark.parametrize("name", NAMES)
def test_consumer_agrees_with_the_trait(trait, name):
    assert CONSUMERS[trait](name) == getattr(OPS[name], trait)


@pytest.mark.parametrize("trait", sorted(CONSUMERS))
def test_consumer_follows_a_changed_trait(trait, monkeypatch):
    """The consumer reads the registry (no private op list): flipping the trait flips its answer."""
    for name in ("tensor_tensor", "tensor_reduce", "iota"):
        was = getattr(OPS[name], trait)
        monkeypatch.setattr(OPS[name], trait, not was)
        assert CONSUMERS[trait](name) == (not was), name
        monkeypatch.setattr(OPS[name], trait, was)


@pytest.mark.parametrize("name", NAMES)
def test_reads_include_the_output_exactly_for_accumulating_ops(name):
    instr = _instr(name, "o", "a", (("accumulate", True),))
    acc = OPS[name].accumulates
    assert ops.accumulates(instr) == acc
    assert [o.buffer for o in ops.reads(instr)] == (["a", "o"] if acc else ["a"])
    assert not ops.accumulates(_instr(name, "o", "a"))            # only with the attribute
    bufs = tuple(ir.Buffer(b, ir.Space.SBUF, (P, F), "float32") for b in "ao")
    counts = fusion.read_counts(ir.Kernel("k", (), (), bufs, (instr,)))
    assert counts == Counter({"a": 1, **({"o": 1} if acc else {})})


@pytest.mark.parametrize("name", NAMES)
def test_mask_applies_follows_unmasked_inputs(name):
    instr = ir.Instr(name, (_acc("o", (P, 1)),), (_acc("a"), _acc("b")))
    unmasked = OPS[name].unmasked_inputs
    for k in (0, 1):
        assert ops.mask_applies(instr, "in", k) == (unmasked != ALL and k not in unmasked)
    assert ops.mask_applies(instr, "out", 0)


@pytest.mark.parametrize("name", NAMES)
def test_engine_and_kind_questions(name):
    op = OPS[name]
    plain = _instr(name, "o", "a")
    assert ops.engine_of(plain) == op.engine
    assert ops.engine_of(_instr(name, "o", "a", (("engine", "gpsimd"),))) == "gpsimd"
    assert ops.is_compute(plain) == (op.kind == "compute" and op.engine != "dma")
    assert ops.is_dma(plain) == (op.kind == "dma" or op.kind == "compute" and op.engine == "dma")
    if op.kind == "compute":        # a compute op sent to the DMA engines is a DMA (e.g. dma_transpose)
        on_dma = _instr(name, "o", "a", (("engine", "dma"),))
        assert ops.is_dma(on_dma) and not ops.is_compute(on_dma)


def test_the_parallel_planner_reads_host_effect(monkeypatch):
    a = np.zeros((256, 1024), np.float32)
    kernel = spmd_add[2, 2].trace(a, a)
    assert dependence.programs_independent(kernel) and not OPS["tensor_tensor"].host_effect
    monkeypatch.setattr(OPS["tensor_tensor"], "host_effect", True)
    assert not dependence.programs_independent(kernel)
    # a copy of the kernel: the analysis cache is per kernel object and must not answer for the old trait
    assert "prints" in parallel.explain(dataclasses.replace(kernel))


def test_host_effect_ops_keep_programs_serial():
    a = np.zeros((256, 1024), np.float32)
    kernel = spmd_add[2, 2].trace(a, a)
    for name in (n for n in NAMES if OPS[n].host_effect):
        extra = ir.Instr(name, (), (ir.Access.full(kernel.buffer(kernel.params[0])),))
        assert not dependence.programs_independent(dataclasses.replace(kernel, body=kernel.body + (extra,)))
