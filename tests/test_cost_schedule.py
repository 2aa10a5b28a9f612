"""The schedule (issue 6, point 3) and the invariants of point 6.

Invariants on every tutorial-style kernel and target: each engine's busy time <= total_time; DMA
bytes = the kernel's load/store bytes (counted here independently from the IR, masks included);
TensorE hardware flops = 2*M*N*K plus transposes; every trace event has a file:line. Then a
schedule written out by hand, and the steady-state extrapolation against full simulation.
"""
import math
import re

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core import dtypes as D
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.schedule import Simulator
from nki_lite.core.targets import TARGETS
from nki_lite.core.ir import walk
from tests.kernels import matmul_tutorial as MT
from tests.kernels import tutorial_style as T

F32, BF16 = np.float32, nl.bfloat16
TARGET_NAMES = ("trn1", "trn2", "trn3")

CASES = {
    "spmd_add": (lambda: T.spmd_add[2, 2], lambda: (np.zeros((256, 1024), F32), np.zeros((256, 1024), F32))),
    "tiled_matmul": (lambda: T.tiled_matmul, lambda: (nt.tensor[[256, 256], BF16], nt.tensor[[256, 1024], BF16])),
    "nl_matmul": (lambda: T.nl_matmul, lambda: (np.zeros((128, 256), F32), np.zeros((256, 512), F32))),
    "row_softmax": (lambda: T.row_softmax, lambda: (np.zeros((300, 256), F32),)),
    "rmsnorm": (lambda: T.rmsnorm, lambda: (np.zeros((300, 256), F32), np.zeros((256,), F32))),
}


def _hbm_bytes(kernel, plan):
    """(read, write) HBM bytes of every dma_copy, from the IR (masks evaluated; executions served
    by a hoisted copy, the plan's `hoist` decision, skipped)."""
    bufs = kernel.buffer_map
    grid_extent = math.prod(kernel.grid) if kernel.grid else 1
    rd = wr = 0
    for ins, loops in walk(kernel.body):
        if ins.op != "dma_copy":
            continue
        dst, src = ins.outs[0], ins.ins[0]
        item = D.INFO[bufs[dst.buffer].dtype].itemsize
        trips = [l.trip for l in loops]
        total = 0
        h = plan.info[id(ins)].hoist
        for vals in np.ndindex(*trips) if trips else [()]:
            env = {l.var: v for l, v in zip(loops, vals)}
            if h is not None and h.skipped(env):
                continue
            n = math.prod(dst.shape)
            if ins.mask is not None:
                n = int(np.count_nonzero(ins.mask.evaluate(env, dst.shape)))
            total += n
        total *= grid_extent
        if bufs[src.buffer].space.value == "hbm":
            rd += total * item
        if bufs[dst.buffer].space.value == "hbm":
            wr += total * item
    return rd, wr


@pytest.fixture(scope="module")
def estimates():
    out = {}
    for name, (k, args) in CASES.items():
        for t in TARGET_NAMES:
            out[name, t] = nki.estimate(k(), *args(), target=t)
    return out


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", TARGET_NAMES)
def test_invariants(estimates, name, target):
    e = estimates[name, target]
    T_ns = e.total_time_ns
    assert T_ns > 0
    for eng in ("tensor", "vector", "scalar", "gpsimd"):
        assert e.engine_busy_ns(eng) <= T_ns * (1 + 1e-9)
    assert e.result.dma_active_ns <= T_ns * (1 + 1e-9)
    rd, wr = _hbm_bytes(e.kernel, e.plan)
    s = e.summary()
    assert (s["hbm_read_bytes"], s["hbm_write_bytes"]) == (rd, wr)
    assert s["dma_transfer_total_bytes"] == rd + wr          # every DMA here is HBM <-> SBUF
    loc = re.compile(r"^[\w.\-]+\.py:\d+$")
    for ev in e.events:
        assert loc.match(ev.loc), ev
        assert ev.start >= 0 and ev.dur >= 0 and ev.start + ev.dur <= T_ns * (1 + 1e-9)


def test_hardware_flops(estimates):
    for t in TARGET_NAMES:
        s = estimates["tiled_matmul", t].summary()
        assert s["hardware_flops"] == 2 * 256 * 1024 * 256 and s["transpose_flops"] == 0
        s = estimates["nl_matmul", t].summary()
        # 2*M*N*K for the matmuls plus two [128,128] TensorE transposes (2 * P * F * P each), all fp32:
        # counted twice, as the profiler's hardware_flops does (rules.FP32_HARDWARE_FLOPS_COUNT)
        assert s["transpose_flops"] == 2 * 2 * (2 * 128 * 128 * 128)
        assert s["hardware_flops"] == 2 * (2 * 128 * 512 * 256) + s["transpose_flops"]
        assert s["mfu_estimated_percent"] < s["hfu_estimated_percent"]


def test_a_schedule_by_hand():
    # c = a + b on one [128, 512] fp32 tile, trn1:
    #   load a: the rows are adjacent in HBM, so each queue reads its 8 partitions' rows as one
    #           descriptor (DMA overview): (8 x 2048 + 256) B / 17 B/ns  = 978.824 ns, all 16 queues
    #   load b: the same, after load a on the same queues               -> ends 1957.647
    #   add   : waits for b + 1300 (semaphore), 2N = 1024 cycles / 1.12  = 914.286 ns -> ends 4171.933
    #   store : waits for the add + 1300, 978.824 ns                     -> ends 6450.757 ns
    a = nt.tensor[[128, 512], F32]
    e = nki.estimate(T.spmd_add[1, 1], a, a, target="trn1")
    dma = (8 * 2048 + 256) / 17
    add = 1024 / 1.12
    assert e.total_time_ns == pytest.approx(2 * dma + 1300 + add + 1300 + dma)
    assert e.engine_busy_ns("vector") == pytest.approx(add)


def test_independent_iterations_overlap_across_engines():
    # SPMD instances are independent: 4 instances take far less than 4 x one instance
    a1 = nt.tensor[[128, 512], F32]
    a4 = nt.tensor[[256, 1024], F32]
    one = nki.estimate(T.spmd_add[1, 1], a1, a1, target="trn1").total_time_ns
    four = nki.estimate(T.spmd_add[2, 2], a4, a4, target="trn1").total_time_ns
    assert four < 3 * one


@pytest.mark.parametrize("key,M,N,K", [("tiled", 256, 1024, 8192), ("hoisted", 256, 2048, 8192),
                                       ("block_free", 512, 2048, 8192),
                                       ("optimized", 2048, 4096, 4096)])
def test_steady_state_extrapolation_equals_full_simulation(key, M, N, K):
    k = MT.KERNELS[key].trace(nt.tensor[[K, M], BF16], nt.tensor[[K, N], BF16], target="trn1")
    res = {}
    for ex in (True, False):
        sim = Simulator(Plan(k, TARGETS["trn1"]), record_events=False, extrapolate=ex)
        res[ex] = sim.run()
    assert res[True].extrapolations                      # something was skipped ...
    assert res[True].simulated_instructions < res[False].simulated_instructions
    assert res[True].total_ns == pytest.approx(res[False].total_ns, rel=1e-9)   # ... exactly
    assert res[True].dma_active_ns == pytest.approx(res[False].dma_active_ns, rel=1e-6)


def test_full_tutorial_problem_is_not_unrolled():
    # the optimised kernel on the full problem executes 8 x (1 memset + 8 x (8 + 2 x (8 + 2 x 16 x 9))
    # + 2 x 16 x 3) = 39 176 instructions (PSUM zeroing folded), less the lhsT block loads served by
    # copies hoisted out of the N-block loop (hoist.py); the model simulates a fraction
    e = nki.estimate(MT.mm_optimized, nt.tensor[[8192, 4096], BF16], nt.tensor[[8192, 8192], BF16],
                     target="trn1", record_events=False)
    s = e.summary()
    hoisted = [inf.hoist for inf in e.plan.info.values() if inf.hoist is not None]
    assert len(hoisted) == 1
    h = hoisted[0]      # the a_blk load: 8 (nb) x 8 (kb) x 2 (mb) x 8 (bk) executions
    assert s["instruction_count"] == 39_176 - (1024 - h.performed(1024))
    assert s["model_simulated_instructions"] < s["instruction_count"] / 2
    assert not s["model_approximate"]


def test_sequential_range_carries_dependencies():
    @nki.jit
    def chain(a, seq: bool = True):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        rng = nl.sequential_range if seq else nl.affine_range
        for i in rng(8):
            t = nl.load(a[i * 128:(i + 1) * 128, :])
            acc[...] = nl.add(acc, t)
        nl.store(out, acc)
        return out
    e = nki.estimate(chain, nt.tensor[[1024, 512], F32], target="trn1")
    # the 8 adds form one chain: each waits for the previous (same engine: +200 cycles)
    adds = sorted(ev.start for ev in e.events if ev.name == "tensor_tensor")
    assert len(adds) == 8
    gaps = np.diff(adds)
    assert np.all(gaps >= 1024 / 1.12 + 200 / 1.12 - 1e-6)
