"""Spill traffic where live SBUF exceeds capacity (lower/cost/spill.py).

A buffer written in one loop and read in a later one is live across both. When it does not fit beside
the other live tiles, the excess over the usable SBUF (the capacity rule's occupancy, lower/footprints.py)
is saved to HBM once and reloaded once, taken from the largest live buffer; a kernel that fits moves no
spill bytes and is estimated exactly as before.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.ir import Space
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.schedule import Simulator
from nki_lite.lower.cost.totals import totals
from nki_lite.lower.footprints import footprints
from nki_lite.lower.verify_common import Ctx

F32 = np.float32
COLS = 512                      # one [128, 512] fp32 block: 2 KiB per partition


@nki.jit
def two_pass(a):
    """Scale every row block into one SBUF tensor, then a second pass adds 1 and stores: the tensor is
    live from its first block's write to its last block's read."""
    nb = a.shape[0] // 128
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((nb, nl.par_dim(128), COLS), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(nb):
        big[i, :, :] = nisa.tensor_scalar(nl.load(a[i * 128:(i + 1) * 128, :]), nl.multiply, 2.0,
                                          engine=nisa.vector_engine)
    for i in nl.affine_range(nb):
        nl.store(out[i * 128:(i + 1) * 128, :],
                 value=nisa.tensor_scalar(big[i, :, :], nl.add, 1.0, engine=nisa.vector_engine))
    return out


@nki.jit
def two_pass_per_group(a):
    """two_pass inside an outer loop over groups of row blocks: the group's blocks belong to its
    iteration, so the tensor costs one group at a time (the capacity rule's block scope) and the
    over-capacity stretch runs once per group."""
    groups, nb = 3, a.shape[0] // (128 * 3)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((groups, nb, nl.par_dim(128), COLS), dtype=a.dtype, buffer=nl.sbuf)
    for g in nl.affine_range(groups):
        for i in nl.affine_range(nb):
            r = (g * nb + i) * 128
            big[g, i, :, :] = nisa.tensor_scalar(nl.load(a[r:r + 128, :]), nl.multiply, 2.0,
                                                 engine=nisa.vector_engine)
        for i in nl.affine_range(nb):
            r = (g * nb + i) * 128
            nl.store(out[r:r + 128, :],
                     value=nisa.tensor_scalar(big[g, i, :, :], nl.add, 1.0, engine=nisa.vector_engine))
    return out


def _plans(nb, target="trn1", kernel=None):
    t = TARGETS[target]
    k = (kernel or two_pass).trace(nt.tensor[[128 * nb, COLS], F32], target=target)
    return k, t, Plan(k, t), Plan(k, t, spill=False)


def _excess(k, t) -> int:
    """Peak live SBUF bytes per partition over the usable SBUF, by the capacity rule."""
    import dataclasses
    ctx = dataclasses.replace(Ctx.build(k), target=t)
    fps = {n: f for n, f in footprints(ctx).items() if ctx.buf(n).space == Space.SBUF}
    peak = max(sum(f.bytes for f in fps.values() if f.start <= p <= f.end) for p in range(len(ctx.sites)))
    return max(0, peak - t.sbuf_partition_bytes)


def test_fitting_kernel_moves_no_spill_bytes_and_is_unchanged():
    k, t, plan, plain = _plans(64)                       # 128 KiB per partition: fits in trn1's 176 KiB
    assert _excess(k, t) == 0 and plan.spill_fraction == {}
    a, b = totals(plan), totals(plain)
    assert (a.hbm_read_bytes, a.hbm_write_bytes) == (b.hbm_read_bytes, b.hbm_write_bytes)
    assert Simulator(plan, record_events=False).run().total_ns == Simulator(plain, record_events=False).run().total_ns


@pytest.mark.parametrize("nb", [128, 192])
def test_excess_is_saved_once_and_reloaded_once(nb):
    k, t, plan, plain = _plans(nb)
    excess = _excess(k, t)
    assert excess > 0
    a, b = totals(plan), totals(plain)
    spilled = excess * t.partitions                      # bytes evicted at the peak, once (no enclosing loop)
    assert a.hbm_write_bytes - b.hbm_write_bytes == pytest.approx(spilled, rel=1e-3)   # saves
    assert a.hbm_read_bytes - b.hbm_read_bytes == pytest.approx(spilled, rel=1e-3)     # reloads
    # the traffic takes queue time the kernel waits for
    assert Simulator(plan, record_events=False).run().total_ns > Simulator(plain, record_events=False).run().total_ns


def test_spill_dmas_save_after_the_write_and_reload_before_the_far_read():
    from nki_lite.core.ir import walk
    k, t, plan, _ = _plans(128)
    ops = [(ins.op, ins.attr("spill")) for ins, _ in walk(plan.body)]
    save, reload = ops.index(("dma_copy", "save")), ops.index(("dma_copy", "reload"))
    assert ops[save - 1][0] == "tensor_scalar"           # right after the first pass's write
    assert ops[reload + 1][0] == "tensor_scalar"         # right before the second pass's read
    assert sum(1 for o in ops if o[1] is not None) == 2  # one save, one reload: nothing else spills
    # 'big' (128 blocks of 2 KiB per partition) gives up the excess: that share of each block moves
    assert list(plan.spill_fraction.values()) == [pytest.approx(_excess(k, t) / (128 * 4 * COLS))] * 2


def test_a_stretch_inside_a_loop_spills_once_per_iteration():
    k, t, plan, plain = _plans(3 * 128, kernel=two_pass_per_group)     # 3 groups of 128 blocks
    excess = _excess(k, t)
    assert 0 < excess < 128 * 4 * COLS                   # one group's 256 KiB is over, not all three
    a, b = totals(plan), totals(plain)
    assert a.hbm_write_bytes - b.hbm_write_bytes == pytest.approx(3 * excess * t.partitions, rel=1e-3)
    assert a.hbm_read_bytes - b.hbm_read_bytes == pytest.approx(3 * excess * t.partitions, rel=1e-3)


def _four_strips(buffer):
    """Four 40 KiB strips live together in `buffer`, with the result tile 200 KiB per partition (over trn1's
    176 KiB); placed directly, the four strips alone fit (160 KiB) and the result tile is automatic."""
    @nki.jit
    def k(a):
        n = a.shape[1] // 4
        out = nl.ndarray((128, n), a.dtype, buffer=nl.shared_hbm)
        strips = nl.ndarray((4, nl.par_dim(128), n), a.dtype, buffer=buffer)
        for j in nl.affine_range(4):
            strips[j, :, :] = nl.load(a[:, j * n:(j + 1) * n])
        nl.store(out, value=nl.maximum(strips[1, :, :], strips[3, :, :]))
        return out
    return k


def test_directly_placed_sbuf_never_spills():
    # mod_alloc gives the strips four physical tiles (one per live block, so no NL-E505 overlap): the
    # kernel's addresses decide (as in the capacity rule), so no spill DMAs; the same strips allocated
    # automatically do spill
    t, spec = TARGETS["trn1"], nt.tensor[[128, 4 * 10240], F32]
    placed = _four_strips(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)))
    assert Plan(placed.trace(spec, target="trn1"), t).spill_fraction == {}
    assert Plan(_four_strips(nl.sbuf).trace(spec, target="trn1"), t).spill_fraction != {}


@pytest.mark.parametrize("kernel,nb", [(two_pass, 128), (two_pass_per_group, 3 * 128)])
def test_extrapolation_with_spills_equals_full_simulation(kernel, nb):
    _, _, plan, _ = _plans(nb, kernel=kernel)
    assert plan.spill_fraction
    res = {ex: Simulator(plan, record_events=False, extrapolate=ex).run() for ex in (True, False)}
    assert res[True].total_ns == pytest.approx(res[False].total_ns, rel=1e-12)
