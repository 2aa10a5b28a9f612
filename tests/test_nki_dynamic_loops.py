"""Dynamic loops and virtual registers (issue #14; lang/registers.py): nisa.register_alloc / move / load /
store, nl.dynamic_range (register or int bounds, step > 1, the loop value as a scalar_offset), nl.fori_loop,
nl.while_loop and `while reg:`, in the interpreter and the JIT (one compiled kernel for every trip count),
the engine model's register cost, and the trace-time errors NL-E117 / NL-E118.
"""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors

MODES = ["interpret", "jit"]
RNG = np.random.default_rng(1417)
P = 128


def _scalar(v: int) -> np.ndarray:
    return np.array([[v]], dtype=np.int32)


def _register_from(t):
    """A register loaded from a [1, 1] int32 HBM tensor (the library's num_m_tiles idiom)."""
    sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=t)
    r = nisa.register_alloc()
    nisa.register_load(r, sb)
    return r


@nki.jit
def tiles_plus_one(a, n_tiles):
    """out[:n*128] = a + 1 for the run-time n: a tile offset carried in SBUF across iterations."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = _register_from(n_tiles)
    off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=off, value=0)
    pat = [[a.shape[1], P], [1, a.shape[1]]]
    for _ in nl.dynamic_range(0, n, 1):
        t = nl.ndarray((P, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap(pattern=pat, offset=0, scalar_offset=off, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out.ap(pattern=pat, offset=0, scalar_offset=off, indirect_dim=0), src=t)
        nisa.tensor_scalar(dst=off, data=off, op0=nl.add, operand0=P)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_run_time_trip_count_from_a_register(mode):
    a = RNG.standard_normal((4 * P, 8)).astype(np.float32)
    for n in (0, 1, 3, 4):              # one trace and one compiled kernel: only the data changes
        got = np.asarray(tiles_plus_one(a, _scalar(n), mode=mode))
        np.testing.assert_array_equal(got[:n * P], a[:n * P] + np.float32(1))
        assert np.isnan(got[n * P:]).all()        # rows the loop did not reach stay unwritten (NaN fill)
    assert tiles_plus_one.inspect_ir(a, _scalar(2)).count("dynamic_range(0, vreg") == 1


@nki.jit
def rows_by_loop_value(a, lo, hi, step: int):
    """Row r of a + 2 for r in range(lo, hi, step): the loop value register is the scalar_offset."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out, src=zeros)
    start, stop = _register_from(lo), _register_from(hi)
    pat = [[a.shape[1], 1], [1, a.shape[1]]]
    for i in nl.dynamic_range(start, stop, step):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap(pattern=pat, offset=0, scalar_offset=i, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=2.0)
        nisa.dma_copy(dst=out.ap(pattern=pat, offset=0, scalar_offset=i, indirect_dim=0), src=t)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lo,hi,step", [(1, 6, 2), (0, 7, 3), (5, 5, 1), (6, 2, 1), (2, 3, 4)])
def test_register_bounds_and_step_with_the_loop_value(mode, lo, hi, step):
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    want = np.zeros_like(a)
    for r in range(lo, hi, step):
        want[r] = a[r] + np.float32(2)
    np.testing.assert_array_equal(rows_by_loop_value(a, _scalar(lo), _scalar(hi), step, mode=mode), want)


@nki.jit
def count_with_fori(a, hi):
    """fori_loop(1, hi): acc += a once per iteration; the iteration count is stored from a register."""
    acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    last = nisa.register_alloc(-1)

    def body(i):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
        nisa.register_move(last, i)

    nl.fori_loop(1, _register_from(hi), body)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    seen = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(seen, last)
    last_out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=last_out, src=seen)
    return out, last_out


@pytest.mark.parametrize("mode", MODES)
def test_fori_loop_and_register_move_store(mode):
    a = RNG.standard_normal((4, 6)).astype(np.float32)
    for hi in (1, 4):
        got, last = count_with_fori(a, _scalar(hi), mode=mode)
        want = np.zeros_like(a)
        for _ in range(1, hi):
            want = want + a
        np.testing.assert_array_equal(np.asarray(got), want)
        assert int(np.asarray(last)[0, 0]) == (hi - 1 if hi > 1 else -1)


def _halving_kernel(style: str):
    """Halve a [1, 1] counter while it is nonzero, counting the iterations (as nl.while_loop or `while reg:`)."""
    @nki.jit
    def halving(n):
        v = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=v, src=n)
        steps = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=steps, value=0)
        cond = nisa.register_alloc()
        nisa.register_load(cond, v)
        if style == "while_loop":
            def body(r):
                nisa.tensor_scalar(dst=v, data=v, op0=nl.right_shift, operand0=1)
                nisa.tensor_scalar(dst=steps, data=steps, op0=nl.add, operand0=1)
                nisa.register_load(r, v)
                return r
            nl.while_loop(cond, body)
        else:
            while cond:
                nisa.tensor_scalar(dst=v, data=v, op0=nl.right_shift, operand0=1)
                nisa.tensor_scalar(dst=steps, data=steps, op0=nl.add, operand0=1)
                nisa.register_load(cond, v)
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=steps)
        return out
    return halving


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("style", ["while_loop", "while_statement"])
def test_while_loops_test_the_register_before_each_iteration(mode, style):
    k = _halving_kernel(style)
    for n in (0, 1, 5, 1000):
        assert int(np.asarray(k(_scalar(n), mode=mode))[0, 0]) == int(n).bit_length()


def test_engine_model_charges_register_ops():
    from nki_lite.lower.cost.rules_registers import REGISTER_NS
    from nki_lite.runtime.profile import estimate
    a = RNG.standard_normal((2 * P, 8)).astype(np.float32)
    est = estimate(tiles_plus_one, a, _scalar(1))
    regs = [e for e in est.events if e.name.startswith("register_move")]
    assert len(regs) == 1 and regs[0].dur == pytest.approx(REGISTER_NS) and regs[0].track.startswith("gpsimd")
    assert est.total_time_ns >= REGISTER_NS


@nki.jit
def bad_step(a, step):
    for _ in nl.dynamic_range(0, 4, step):
        nisa.dma_copy(dst=a, src=a)
    return a


@pytest.mark.parametrize("step", [0, -1, 1.5])
def test_step_must_be_a_positive_int(step):
    with pytest.raises(errors.NkiLiteError) as e:
        bad_step(np.zeros((1, 1), np.float32), step)
    assert e.value.code == "NL-E117"


@nki.jit
def register_step(a):
    r = nisa.register_alloc(2)
    for _ in nl.dynamic_range(0, 4, r):
        nisa.dma_copy(dst=a, src=a)
    return a


@nki.jit
def huge_bound(a):
    for _ in nl.dynamic_range(0, 1 << 31):
        nisa.dma_copy(dst=a, src=a)
    return a


@pytest.mark.parametrize("kernel", [register_step, huge_bound])
def test_register_step_and_out_of_range_bound(kernel):
    with pytest.raises(errors.NkiLiteError) as e:
        kernel(np.zeros((1, 1), np.float32))
    assert e.value.code == "NL-E117"
    assert "test_nki_dynamic_loops.py" in str(e.value)


@nki.jit
def unset_bound(a):
    r = nisa.register_alloc()
    for _ in nl.dynamic_range(r):
        nisa.dma_copy(dst=a, src=a)
    return a


@nki.jit
def unset_store(a):
    r = nisa.register_alloc()
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(t, r)
    return a


@nki.jit
def unset_while(a):
    r = nisa.register_alloc()
    while r:
        nisa.dma_copy(dst=a, src=a)
    return a


@pytest.mark.parametrize("kernel", [unset_bound, unset_store, unset_while])
def test_register_read_before_set(kernel):
    with pytest.raises(errors.NkiLiteError) as e:
        kernel(np.zeros((1, 1), np.float32))
    assert e.value.code == "NL-E118"


@nki.jit
def branch_on_register(a):
    r = nisa.register_alloc(1)
    if r:
        nisa.dma_copy(dst=a, src=a)
    return a


def test_python_if_on_a_register_is_refused():
    with pytest.raises(errors.NkiLiteError, match="known on the device only"):
        branch_on_register(np.zeros((1, 1), np.float32))


@nki.jit
def load_float(a):
    r = nisa.register_alloc()
    t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.register_load(r, t)
    return a


def test_register_load_needs_an_integer_scalar():
    with pytest.raises(errors.NkiLiteError, match="integer tensor"):
        load_float(np.zeros((1, 1), np.float32))


@nki.jit
def column_from_run_time_offset(a, start):
    """dst `t[:, j]` (shape [P]) <- `.ap([[1, P], [1, 1]], scalar_offset=)` (shape [P, 1]): bwmm's token loads."""
    flat = a.reshape((a.shape[0] * a.shape[1] // P, P))
    off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=off, src=start)
    t = nl.ndarray((P, 2), dtype=a.dtype, buffer=nl.sbuf)
    for j in range(2):
        nisa.dma_copy(dst=t[0:P, j], src=flat.ap(pattern=[[1, P], [1, 1]], offset=P * j, scalar_offset=off,
                                                 indirect_dim=0))
    out = nl.ndarray((P, 2), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_plain_view_takes_the_unit_axes_of_an_indirect_side(mode):
    a = RNG.standard_normal((4, 2 * P)).astype(np.float32)
    flat = a.reshape(-1, P)
    for s in (0, 3):
        got = np.asarray(column_from_run_time_offset(a, _scalar(s), mode=mode))
        want = np.stack([flat.reshape(-1)[s * P + P * j: s * P + P * j + P] for j in range(2)], axis=1)
        np.testing.assert_array_equal(got, want)
