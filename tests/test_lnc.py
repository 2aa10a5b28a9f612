"""LNC=2 kernels: per-core traces, shared HBM, core_barrier ordering, sendrecv exchange, NL-E917/918."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite import errors
from nki_lite.core.ops import missing_rules

ROWS = 64


def _halves(a):
    return a[:ROWS], a[ROWS:]


def _my_rows(a):
    """The kernels' common start (plain Python, traced inline): an HBM output shaped like a, the core
    id, and that core's ROWS rows of a in an SBUF tile."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[me * ROWS:(me + 1) * ROWS, :])
    return out, me, t


def _all_rows(a):
    """Like _my_rows, but every core loads the whole of a."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return out, nl.program_id(0), t


@nki.jit
def branchy(a):
    out, me, t = _my_rows(a)
    r = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    if me == 0:                                    # Python control flow on the core id
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=3.0)
    else:
        nisa.tensor_scalar(dst=r, data=t, op0=nl.subtract, operand0=5.0)
    nisa.dma_copy(dst=out[me * ROWS:(me + 1) * ROWS, :], src=r)
    return out


def test_per_core_branches_match_numpy():
    a = np.random.default_rng(1).standard_normal((2 * ROWS, 16)).astype(np.float32)
    top, bottom = _halves(a)
    got = branchy[2](a)
    np.testing.assert_array_equal(got, np.concatenate([top * np.float32(3), bottom - np.float32(5)]))


@nki.jit
def swap_halves(a):
    """Each core loads its half, writes it to a shared scratch, meets the peer, reads the other half."""
    scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    other = 1 - me
    t = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[me * ROWS:(me + 1) * ROWS, :])
    nisa.dma_copy(dst=scratch[me * ROWS:(me + 1) * ROWS, :], src=t)
    nisa.core_barrier(scratch, (0, 1))
    u = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=scratch[other * ROWS:(other + 1) * ROWS, :])
    nisa.dma_copy(dst=out[me * ROWS:(me + 1) * ROWS, :], src=u)
    return out


def test_barrier_orders_writes_before_peer_reads():
    # without the barrier core 0 would read core 1's half of scratch before core 1 wrote it
    a = np.arange(2 * ROWS * 4, dtype=np.float32).reshape(2 * ROWS, 4)
    top, bottom = _halves(a)
    np.testing.assert_array_equal(swap_halves[2](a), np.concatenate([bottom, top]))


@nki.jit
def exchange(a):
    out, me, mine = _my_rows(a)
    theirs = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    summed = nl.ndarray((ROWS, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=summed, data1=mine, data2=theirs, op=nl.add)
    nisa.dma_copy(dst=out[me * ROWS:(me + 1) * ROWS, :], src=summed)
    return out


def test_sendrecv_moves_the_peer_tile():
    a = np.random.default_rng(2).standard_normal((2 * ROWS, 8)).astype(np.float32)
    top, bottom = _halves(a)
    s = top + bottom
    np.testing.assert_array_equal(exchange[2](a), np.concatenate([s, s]))


@nki.jit
def uneven_barriers(a):
    out, me, t = _all_rows(a)
    if me == 0:
        nisa.core_barrier(out, (0, 1))             # only core 0 waits: its peer never comes
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def crossed(a):
    out, me, t = _all_rows(a)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    if me == 0:
        nisa.core_barrier(out, (0, 1))
    else:
        nisa.sendrecv(src=t, dst=u, send_to_rank=0, recv_from_rank=0, pipe_id=0)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("kernel, code, says", [
    (uneven_barriers, "NL-E918", ("test_lnc.py", "core 1 finished")),           # unmatched, at the line
    (crossed, "NL-E917", ("core 0 at nisa.core_barrier", "core 1 at nisa.sendrecv")),  # deadlock
], ids=["unmatched-barrier", "barrier-vs-sendrecv"])
def test_sync_mismatch_is_reported(kernel, code, says):
    with pytest.raises(errors.NkiLiteError) as e:
        kernel[2](np.zeros((ROWS, 4), np.float32))
    assert e.value.code == code
    assert all(fragment in str(e.value) for fragment in says)


def test_barrier_on_one_core_is_nl_e918():
    with pytest.raises(errors.NkiLiteError) as e:
        swap_halves(np.zeros((2 * ROWS, 4), np.float32))
    assert e.value.code == "NL-E918"


def test_grid_path_kept_when_trace_is_core_independent():
    @nki.jit
    def add_one(a):
        out, me, t = _my_rows(a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[me * ROWS:(me + 1) * ROWS, :], src=t)
        return out
    a = np.ones((2 * ROWS, 4), np.float32)
    np.testing.assert_array_equal(add_one[2](a), a + 1)
    assert add_one.inner.stats["traces"] == 1       # one grid trace, not one per core


def test_sync_ops_have_every_backend_rule():
    missing = [m for m in missing_rules() if m[0] in ("core_barrier", "sendrecv")]
    assert missing == []


def test_estimates_per_core_and_device_time_is_the_max():
    from nki_lite.runtime import lnc

    @nki.jit
    def lopsided(a):
        out, me, t = _my_rows(a)
        if me == 1:                                # core 1 does eight extra passes
            for _ in range(8):
                nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=out[me * ROWS:(me + 1) * ROWS, :], src=t)
        return out
    a = np.zeros((2 * ROWS, 512), np.float32)
    est = lnc.estimate(lopsided.inner, 2, a)
    t0, t1 = (e.total_time for e in est.per_core)
    assert t1 > t0 > 0
    assert est.total_time == t1
    barrier = [i for i in est.per_core[0].kernel.body if getattr(i, "op", "") == "core_barrier"]
    assert len(barrier) == 1


def test_sync_costs_barrier_latency_and_the_transfer():
    from nki_lite.core.ops import OPS
    from nki_lite.core.targets import TARGETS
    from nki_lite.lower.cost import rules_lnc
    from nki_lite.lower.cost.rules import CostCtx, dma_cost
    from nki_lite.runtime import lnc
    a = np.zeros((2 * ROWS, 8), np.float32)
    for kern, op in ((swap_halves, "core_barrier"), (exchange, "sendrecv")):
        k = lnc.per_core_kernels(kern.inner, 2, (a,), {})[0]
        instr = next(i for i in k.body if getattr(i, "op", "") == op)
        ctx = CostCtx(TARGETS["trn2"], k.buffer_map)
        cost = OPS[op].rules["cost"](instr, ctx)
        base = dma_cost(ctx, instr).ns if op == "sendrecv" else 0.0
        assert cost.ns == pytest.approx(base + rules_lnc.SYNC_NS)
        assert cost.opcode == op


def test_per_core_trace_sees_a_one_axis_launch_of_two_cores():
    from nki_lite.runtime import lnc

    @nki.jit
    def shape_of_launch(a):
        out = nl.ndarray((2, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        t = nl.ndarray((1, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(nl.program_ndim() * 10 + nl.num_programs()))
        if me == 1:                                # per-core trace: core 1 adds its id
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=100.0)
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        return out
    got = shape_of_launch[2](np.zeros((ROWS, 4), np.float32))
    np.testing.assert_array_equal(got, np.array([[12.0] * 4, [112.0] * 4], np.float32))
    assert len(lnc.per_core_kernels(shape_of_launch.inner, 2, (np.zeros((ROWS, 4), np.float32),), {})) == 2


@nki.jit
def barrier_on_an_sbuf_tile(a):
    """The NKI Library's bwmm_shard_on_I: `core_barrier(block_idx, (0, 1))` on an SBUF counter tile."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[me:me + 1, :])
    nisa.core_barrier(t, (0, 1))
    nisa.dma_copy(dst=out[me:me + 1, :], src=t)
    return out


def test_core_barrier_on_an_sbuf_tile():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(barrier_on_an_sbuf_tile[2](a)), a)
