"""The analysis layer (nki_lite/lower/analysis): facts computed once per traced kernel and shared.

Each test pins one contract: the per-kernel cache, root buffers and flat indexing, the liveness
widening rule that the JIT arena / interpreter and the capacity rule both read, coverage, and the
dependence facts the verifier, the parallel planner and the JIT read."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.core import ir
from nki_lite.core.affine import Affine
from nki_lite.lower import analysis
from nki_lite.lower.analysis import coverage, dependence
from nki_lite.lower.analysis.accesses import flat_index, root_name, root_of, roots_with_views
from nki_lite.lower.analysis.coverage import Write, uncovered, values_hit
from nki_lite.lower.analysis.liveness import live_interval, live_ranges
from nki_lite.lower.footprints import footprints
from nki_lite.lower.verify_common import Ctx

from .markers import spec


@nki.jit
def tiled_add(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, a.shape[1]), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        y = nl.add(x, 1.0)
        nl.store(out[i * 128:(i + 1) * 128, :], y)
    for j in nl.sequential_range(2):
        z = nl.load(a[0:128, :])
        acc[...] = nl.add(acc, z)
    nl.store(out[0:128, :], acc)
    return out


@nki.jit
def half_written(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:128, :])
    nl.store(out[0:128, :], x)
    return out


# ------------------------------------------------------------------------------ the cache

def test_one_analysis_per_kernel_shared_by_its_readers():
    kern = tiled_add.trace(spec((512, 64)))
    a = analysis.of(kern)
    assert analysis.of(kern) is a
    # the verifier already ran on this kernel (trace verifies) and left its program structure here
    assert "program" in a.__dict__
    assert Ctx.build(kern).sites is a.program.sites
    other = tiled_add.trace(spec((256, 64)))
    assert analysis.of(other) is not a and analysis.of(other).program is not a.program


def test_facts_are_computed_once(monkeypatch):
    kern = tiled_add.trace(spec((512, 64)))
    calls = []
    real = coverage.fully_written
    monkeypatch.setattr(coverage, "fully_written", lambda k, n: calls.append(n) or real(k, n))
    a = analysis.of(kern)
    (name,) = kern.outputs
    first = a.fully_written(name)
    assert a.fully_written(name) is first and calls == [name]
    assert a.programs_independent is a.programs_independent
    assert a.liveness is a.liveness


# ------------------------------------------------------------------------------ accesses

def test_root_follows_views_and_flat_index_is_row_major():
    bufs = {"r": SimpleNamespace(name="r", base=None), "v": SimpleNamespace(name="v", base="r"),
            "w": SimpleNamespace(name="w", base="v")}
    assert root_of(bufs, "w").name == "r" and root_name(bufs, "v") == "r" and root_name(bufs, "r") == "r"
    e = flat_index((4, 5, 6), [Affine.var("a"), Affine.var("b", 2), Affine(3)])
    assert e == Affine.make(3, {"a": 30, "b": 12})


def test_roots_with_views_names_reshaped_tensors():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), a.dtype, buffer=nl.shared_hbm)
        v = a.reshape((128, 64))
        nl.store(out, nl.load(v))
        return out
    kern = k.trace(spec((64, 128)))
    assert roots_with_views(kern) == {kern.params[0]}
    assert roots_with_views(tiled_add.trace(spec((256, 64)))) == set()


# ------------------------------------------------------------------------------ liveness

def test_live_interval_widens_to_the_loops_below_the_common_one():
    outer, a, b = object(), object(), object()
    span = {id(outer): (0, 20), id(a): (2, 5), id(b): (8, 12)}.__getitem__
    sp = lambda loop: span(id(loop))                     # noqa: E731
    assert live_interval((outer, a), 3, (outer, a), 4, sp) == (3, 4, None)      # one iteration of a
    assert live_interval((outer, a), 3, (outer, b), 9, sp) == (2, 12, b)        # across both loops
    assert live_interval((outer,), 1, (outer, b), 9, sp) == (1, 12, b)
    assert live_interval((), 0, (outer, a), 3, sp) == (0, 20, outer)


def test_capacity_footprints_and_live_ranges_agree():
    """The two consumers of liveness (JIT arena / interpreter freeing, and the verifier's capacity
    rule) see the same live range for every plain on-chip tile."""
    kern = tiled_add.trace(spec((512, 64)))
    ranges = live_ranges(kern).ranges
    fps = footprints(Ctx.build(kern))
    plain = [n for n, b in kern.buffer_map.items() if b.space != ir.Space.HBM and b.par_axis == 0 and n in ranges]
    assert len(plain) >= 4
    for n in plain:
        assert (fps[n].start, fps[n].end) == ranges[n], n


# ------------------------------------------------------------------------------ coverage

def test_fully_written_proves_only_complete_stores():
    full = tiled_add.trace(spec((512, 64)))
    assert analysis.of(full).fully_written(full.outputs[0])
    with pytest.warns(UserWarning):                     # the verifier's partial-coverage warning
        half = half_written.trace(spec((256, 64)))
    assert not analysis.of(half).fully_written(half.outputs[0])


def test_uncovered_names_the_gap():
    out = ir.Buffer("o", ir.Space.HBM, (4, 6), "float32", kind="output")
    acc = ir.Access("o", (Affine.var("@0"), Affine.var("@1")), (2, 6))
    gap = uncovered({"o": out}, out, [Write(acc, {"@0": 2, "@1": 6}, ())])
    assert gap == coverage.Gap(12, "2:4, :", "2, 0")
    assert values_hit(Affine.var("x", 2), {"x": 3}, (), 6).tolist() == [True, False, True, False, True, False]
    both = [Write(acc, {"@0": 2, "@1": 6}, ()),
            Write(ir.Access("o", (Affine.var("@0") + 2, Affine.var("@1")), (2, 6)), {"@0": 2, "@1": 6}, ())]
    assert uncovered({"o": out}, out, both) is None


# ------------------------------------------------------------------------------ dependence

def test_dependence_facts():
    kern = tiled_add.trace(spec((512, 64)))
    loop = next(n for n in kern.body if isinstance(n, ir.Loop) and n.kind == "affine")
    inside = dependence.allocated_in(kern, loop.body)
    assert inside and all(kern.buffer_map[n].space != ir.Space.HBM for n in inside)
    pvars, extents, body, prologue, epilogue = analysis.of(kern).program_space
    assert pvars == (loop.var,) and extents == (4,) and body is loop.body
    assert [i.op for i in prologue] == ["alloc", "memset"] and epilogue     # acc = nl.zeros before; the rest after
    # its iterations store disjoint row blocks: the programs may run on threads
    assert analysis.of(kern).programs_independent and dependence.private_buffers(kern) == inside
    single = half_written.trace(spec((128, 64)))
    assert analysis.of(single).program_space[0] == () and not analysis.of(single).programs_independent
    scratch = SimpleNamespace(kind="local", hbm_kind="private_hbm", loc=SimpleNamespace(file="f.py", line=9))
    assert dependence.hbm_shared_across(SimpleNamespace(kind="output", hbm_kind="", loc=None), loop)
    lp = SimpleNamespace(loc=SimpleNamespace(file="f.py", line=5))
    assert not dependence.hbm_shared_across(scratch, lp)           # declared inside the loop
    lp_after = SimpleNamespace(loc=SimpleNamespace(file="f.py", line=12))
    assert dependence.hbm_shared_across(scratch, lp_after)        # declared before the loop
