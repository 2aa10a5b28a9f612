"""Current-dialect loops have Python semantics: a loop variable used as a Python value unrolls its loop.

NKI's current front end: the range helpers "are deprecated and behave as aliases of range()", whose
loops are "unrolled at specialization time" (aws-neuron-sdk nki/get-started/about). So `if i:`,
`int(i)`, `range(i + 1)`, `nl.affine_range(i)`, `i // 2` and `i < n - 1` are plain Python on ints.
nki_lite keeps loops symbolic and traces exactly those loops unrolled (lang/ranges.py `python_loop`,
lang/index.py `unroll_python_loops`). The legacy dialect's symbolic loops keep NL-E802.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite
import nki_lite.language as lnl
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors
from nki_lite.lang import trace as trace_mod

from . import markers

HERE, line_of, _expect = markers.marker_helpers(__file__)
MODES = ["interpret", "jit"]
RNG = np.random.default_rng(802)
F32 = np.float32


def f32(*shape):
    return RNG.uniform(0.5, 1.5, shape).astype(F32)


def both(kernel, *args):
    """Run in both backends; they agree bit for bit; return the JIT's result."""
    a = kernel(*args, mode="interpret")
    b = kernel(*args, mode="jit")
    assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    return b


def loops_in(kernel, *args) -> list[int]:
    """Trip counts of the loops left in the traced IR (outermost level)."""
    return [n.trip for n in kernel.trace(*args).body if type(n).__name__ == "Loop"]


@nki.jit
def first_block_kept(x):
    """`if i:` / `not i`: every block but the first is doubled; the first is copied."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 8):
        t = nl.ndarray((8, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(i * 8, 8), :])
        if i:
            nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        if not i and x.shape[1] > 1:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.0)
        nisa.dma_copy(dst=out[nl.ds(i * 8, 8), :], src=t)
    for k in nl.sequential_range(2):              # a loop whose variable stays symbolic stays a loop
        nisa.dma_copy(dst=out[nl.ds(k * 8, 8), 0:1], src=x[nl.ds(k * 8, 8), 0:1])
    return out


def test_truthiness_of_a_loop_variable_unrolls_its_loop():
    x = f32(32, 4)
    want = np.concatenate([x[:8], 2 * x[8:]])
    want[:16, 0] = x[:16, 0]
    np.testing.assert_array_equal(both(first_block_kept, x), want)
    assert loops_in(first_block_kept, x) == [2]   # the `if i:` loop unrolled, the other kept


@nki.jit
def prefix_sums(x):
    """Block i of the output is the sum of blocks 0..i: `range(i + 1)`, `int(i)` and an inner
    nl.affine_range bounded by the outer variable."""
    n = x.shape[0] // 4
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(n):
        acc = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(acc, value=0.0)
        for j in range(i + 1):
            t = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[nl.ds(j * 4, 4), :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(int(i) * 4, 4), :], src=acc)
    again = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n):
        acc = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(acc, value=0.0)
        for j in nl.affine_range(i + 1):
            t = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[nl.ds(j * 4, 4), :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.dma_copy(dst=again[nl.ds(i * 4, 4), :], src=acc)
    return out, again


def test_a_loop_variable_as_a_python_int_and_as_a_loop_bound():
    x = f32(12, 3)
    blocks = [x[4 * b:4 * b + 4] for b in range(3)]
    want = np.zeros_like(x)
    for i in range(3):
        acc = np.zeros_like(blocks[0])
        for j in range(i + 1):
            acc = (acc + blocks[j]).astype(F32)
        want[4 * i:4 * i + 4] = acc
    for mode in MODES:
        a, b = prefix_sums(x, mode=mode)
        np.testing.assert_array_equal(a, want)
        np.testing.assert_array_equal(b, want)


@nki.jit
def halves_and_last(x):
    """`i // 2` as an int, `i < n - 1` and `i == n - 1` as branches (the library's pairing and
    last-iteration patterns)."""
    n = x.shape[0] // 4
    out = nl.ndarray((x.shape[0] // 2, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n):
        half = i // 2
        t = nl.ndarray((4, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(i * 4, 4), :])
        if i == 0 or i == n - 1:               # `or` of two comparisons: Python's, once unrolled
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.0)
        if i < n - 1 and i % 2 == 0:
            nisa.dma_copy(dst=out[nl.ds(half * 4, 4), :], src=t)
        if i == n - 1:
            nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
            nisa.dma_copy(dst=out[nl.ds((n // 2 - 1) * 4, 4), :], src=t)
    return out


def test_floor_division_and_comparisons_of_loop_variables():
    x = f32(16, 2)
    want = np.concatenate([x[0:4], 2 * x[12:16]])
    np.testing.assert_array_equal(both(halves_and_last, x), want)


@nki.jit
def deep_nest(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for a in nl.affine_range(1):
        for b in nl.affine_range(1):
            for c in nl.affine_range(1):
                for d in nl.affine_range(1):
                    for e in nl.affine_range(1):
                        for f in nl.affine_range(1):
                            for g in nl.affine_range(1):
                                for h in nl.affine_range(1):
                                    for k in nl.affine_range(1):
                                        if a or b or c or d or e or f or g or h or k:  # MARK-CAP
                                            pass
    nisa.dma_copy(dst=out, src=x)
    return out


def test_the_retrace_cap_keeps_its_error_at_the_line(monkeypatch):
    # each `or` operand asks for one more loop: nine loops need nine retraces, one over a cap of 8
    monkeypatch.setattr(trace_mod, "MAX_UNROLL_RETRACES", 8)
    with pytest.raises(errors.NkiLiteError) as ei:
        deep_nest(f32(2, 2))
    e = ei.value
    assert e.name == "control_flow_on_index", str(e)
    assert f"{HERE}:{line_of('MARK-CAP')}:" in str(e), str(e)


def test_nine_loops_unroll_under_the_default_cap():
    # qkv_cte asks for more than 8 retraces; another shape than the cap test's, so no trace is shared
    assert trace_mod.MAX_UNROLL_RETRACES >= 9
    x = f32(3, 2)
    np.testing.assert_array_equal(deep_nest(x), x)


@nki.jit
def pair_rows(x):
    """divmod(i, 2) of a loop variable: (i // 2, i % 2) as ints (the library's tiling arithmetic)."""
    out = nl.ndarray((x.shape[0] // 2, 2 * x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    w = x.shape[1]
    for i in nl.affine_range(x.shape[0] // 4):
        row, col = divmod(i, 2)
        t = nl.ndarray((4, w), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(i * 4, 4), :])
        nisa.dma_copy(dst=out[nl.ds(row * 4, 4), nl.ds(col * w, w)], src=t)
    return out


def test_divmod_of_a_loop_variable():
    x = f32(16, 3)
    want = np.concatenate([np.concatenate([x[8 * r:8 * r + 4], x[8 * r + 4:8 * r + 8]], axis=1) for r in range(2)])
    np.testing.assert_array_equal(both(pair_rows, x), want)


@nki.jit
def shard_branch(x):
    """The library's sharding idiom: `if prg_id > 0:` on nl.program_id(0)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    prg_id = nl.program_id(0)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if prg_id > 0 or prg_id == 1:  # MARK-PID
        nisa.memset(t, value=0.0)
    halves = [x[:, 0:1], x[:, 1:2]]
    if not prg_id:                                # a known int: truthiness and list index as Python's
        nisa.dma_copy(dst=t[:, 0:1], src=halves[prg_id + 1])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_program_id_of_a_one_program_launch_is_the_int_zero():
    x = f32(8, 4)
    want = x.copy()
    want[:, 0] = x[:, 1]
    for mode in MODES:
        np.testing.assert_array_equal(shard_branch[1](x, mode=mode), want)
    # two programs: the id is only known per program, which nki_lite does not trace one by one yet
    # (the `or` of two symbolic comparisons is NL-E806, as a mask would be)
    with pytest.raises(errors.NkiLiteError) as ei:
        shard_branch[2](x)
    assert ei.value.name == "bad_mask" and f"{HERE}:{line_of('MARK-PID')}:" in str(ei.value)


# ---------------------------------------------------------------------------------- legacy dialect

@nki_lite.jit
def legacy_truthiness(x):
    out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
    for i in lnl.affine_range(2):
        if i:  # MARK-LEGACY-BOOL
            lnl.store(out, lnl.load(x))
    return out


@nki_lite.jit
def legacy_range_bound(x):
    out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
    for i in lnl.affine_range(2):
        for _ in range(i):  # MARK-LEGACY-RANGE
            lnl.store(out, lnl.load(x))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,marker", [(legacy_truthiness, "MARK-LEGACY-BOOL"),
                                           (legacy_range_bound, "MARK-LEGACY-RANGE")])
def test_legacy_symbolic_loops_keep_nl_e802(kernel, marker, mode):
    # legacy behaviour unchanged: an affine_range body is traced once with a symbolic variable (the
    # legacy docs unroll with static_range), so Python needing its value stays an error
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(f32(4, 4), mode=mode)
    e = ei.value
    assert e.name == "control_flow_on_index" and e.code == "NL-E802", str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
