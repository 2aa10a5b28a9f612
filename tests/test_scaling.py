"""Kernels of many unrolled instructions: the work of every stage grows linearly, memory stays bounded
(issue 10, "JIT compile time is quadratic"). No timing assertions: the tests count work and check the
structure of what is generated; benchmarks/compile_scaling.py measures the times."""
import tracemalloc

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.core import ir
from nki_lite.lower.analysis.liveness import live_ranges
from nki_lite.lower.llvm import codegen
from nki_lite.lower.llvm.parts import PART_WEIGHT
from nki_lite.runtime import interpreter


@nki.jit
def chain(a, n):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in range(n):
        t = t + 1.0
    nl.store(out, t)
    return out


@nki.jit
def mixed(a, b, n):
    """n unrolled ops over two tiles: tensor_scalar and tensor_tensor, in place and fresh tiles."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.load(b)
    for k in range(n // 4):
        t = t * 1.0001
        t = nl.maximum(t, u)
        v = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
        v[...] = nl.add(t, 0.25 * (k % 7))
        t = nl.subtract(v, u)
    nl.store(out, t)
    return out


def _a(shape=(128, 64)):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _functions(text: str) -> dict[str, int]:
    """LLVM function name -> number of instruction lines in its body."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("define "):
            name = line.split("@", 1)[1].split("(", 1)[0]
            out[name] = 0
        elif line == "}":
            name = None
        elif name is not None and line.startswith("  "):
            out[name] += 1
    return out


def test_codegen_work_is_linear(monkeypatch):
    """Instructions' outputs looked up by the code generator: about proportional to the kernel size
    (the fused-run bookkeeping compared every member with every later one: quadratic)."""
    calls = [0]
    prop = ir.Instr.out

    def counted(self):
        calls[0] += 1
        return prop.fget(self)
    monkeypatch.setattr(ir.Instr, "out", property(counted))
    counts = []
    for n in (200, 800):
        kernel = chain.trace(_a(), n)
        calls[0] = 0
        codegen.generate(kernel)
        counts.append(calls[0])
    assert counts[1] < 4 * counts[0] * 1.25, counts      # 4x the ops: ~4x the work, not 16x


def test_llvm_functions_stay_bounded():
    """A long body is cut into functions of at most PART_WEIGHT instructions, so no LLVM function grows
    with the kernel (LLVM's optimiser is superlinear in function size)."""
    sizes = {}
    for n in (300, 1200):
        fns = _functions(codegen.generate(chain.trace(_a(), n)).text)
        assert fns and all(k.startswith("nkl_") for k in fns)
        sizes[n] = (len(fns), max(fns.values()))
    assert sizes[1200][0] >= 1200 // PART_WEIGHT
    assert sizes[1200][1] <= sizes[300][1] * 1.1, sizes   # the largest function does not grow


def test_arena_does_not_grow_with_dead_temporaries():
    """Temporaries with disjoint live ranges share arena bytes: a chain of 1,000 ops needs about as
    much on-chip scratch as a chain of 100 (before: one tile per temporary, 1,000 x 32 KB). A part
    (parts.py) is one unit of the live-range order, so up to a part's tiles are live at once."""
    small = codegen.generate(chain.trace(_a(), 100)).arena_bytes
    big = codegen.generate(chain.trace(_a(), 1000)).arena_bytes
    tile = 128 * 64 * 4
    assert big <= small + 2 * tile and big <= (PART_WEIGHT + 8) * tile, (small / tile, big / tile)


def test_live_ranges_widen_across_loops():
    """A tile allocated before a loop and used inside it lives for the whole loop; a tile local to
    the loop body is dead after its last use in the body."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros(a.shape, nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(3):
            x = nl.load(a)
            y = nl.add(x, 1.0)
            acc[...] = nl.add(acc, y)
        nl.store(out, acc)
        return out
    kern = k.trace(_a())
    lv = live_ranges(kern)
    loop = next(n for n in kern.body if isinstance(n, ir.Loop))
    names = {i.out.buffer for i in loop.body if i.op == "alloc"}
    acc = next(i.out.buffer for i in kern.body if isinstance(i, ir.Instr) and i.op == "alloc")
    (s, e) = lv.ranges[acc]
    loop_positions = [p for p in range(lv.positions)]
    assert s == 0 and e >= max(lv.ranges[b][1] for b in names), (lv.ranges, loop_positions)
    assert id(loop) not in lv.free_after or acc in lv.free_after[id(loop)]
    freed_in_body = {b for i in loop.body for b in lv.free_after.get(id(i), ())}
    assert names <= freed_in_body                        # x and y die inside each iteration
    np.testing.assert_array_equal(k(_a(), mode="interpret"), k(_a(), mode="jit"))


def test_interpreter_memory_stays_bounded():
    """The interpreter drops a tile after its last use: peak memory of a 300-op chain is a few tiles
    (it held all 300 temporaries, 300 x 32 KB, before)."""
    a = _a()
    kernel = chain.trace(a, 300)
    tile = a.nbytes
    tracemalloc.start()
    try:
        interpreter.run(kernel, {"a": a})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * tile, peak / tile


@pytest.mark.parametrize("opt", ["0", "2"])
def test_long_unrolled_kernel_jit_equals_interpreter(monkeypatch, opt):
    """3,000 unrolled ops (many parts, runs cut at part boundaries, shared arena slots): bit for bit."""
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)
    a, b = _a(), _a((128, 64)) * 0.5
    want = mixed(a, b, 3000, mode="interpret")
    got = mixed(a, b, 3000, mode="jit")
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_long_kernels_fence_nan_canonicalisation():
    """Above FENCE_MIN_INSTRUCTIONS the NaN canonicalisations are fenced (LLVM compile time per op
    halves); shorter kernels keep the plain form (their run-time code is unchanged)."""
    n = codegen.FENCE_MIN_INSTRUCTIONS
    short = codegen.generate(chain.trace(_a(), n - 8)).text
    long = codegen.generate(chain.trace(_a(), n + 8)).text
    assert "llvm.arithmetic.fence" not in short and "fcmp uno" in short
    assert long.count("call <16 x float> @llvm.arithmetic.fence.v16f32") >= n


@pytest.mark.parametrize("opt", ["0", "2"])
def test_fenced_canonicalisation_keeps_nan_bits(monkeypatch, opt):
    """A fenced (long) kernel fed NaNs of every sign and payload, and infinities: bit for bit."""
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)
    a, b = _a(), _a((128, 64)) * 0.5
    bits = a.view(np.uint32)
    bits[::3, ::5] = 0x7F800001                          # signalling NaN, smallest payload
    bits[1::4, 2::7] = 0xFFC12345                        # negative quiet NaN with a payload
    bits[2::5, 1::3] = 0x7F800000                        # +inf (inf - inf gives NaN on the way)
    b.view(np.uint32)[5::6, ::4] = 0xFF800000            # -inf
    b.view(np.uint32)[::7, 3::6] = 0x7FFFFFFF
    want = mixed(a, b, 2 * codegen.FENCE_MIN_INSTRUCTIONS, mode="interpret")
    got = mixed(a, b, 2 * codegen.FENCE_MIN_INSTRUCTIONS, mode="jit")
    assert np.isnan(want).any()
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
