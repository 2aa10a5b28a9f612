"""The shared-port lanes of the schedule remember at most QUEUE_HISTORY busy intervals.

A port lane (VectorE/ScalarE on PSUM, VectorE/GpSimdE on SBUF) is trimmed to the earliest reach of
the engines on it; when one of them ran long ago (ScalarE before a long Vector-only stretch) that
reach stays behind and, uncapped, the lane grew by one interval per instruction: the loop
snapshots then never had equal lengths and the inner loops of the matmul tutorial's optimised
kernel were never extrapolated. The cap (older time counts as busy, as on the DMA queues) must
keep extrapolation exact.
"""
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.records import QUEUE_HISTORY
from nki_lite.lower.cost.schedule import Simulator
from tests.kernels import matmul_tutorial as MT


def _optimized(K=2048, M=4096, N=1024):
    return MT.KERNELS["optimized"].trace(nt.tensor[[K, M], nl.bfloat16], nt.tensor[[K, N], nl.bfloat16],
                                         target="trn1")


def test_port_lane_history_is_capped_when_one_engine_is_stale():
    sim = Simulator(Plan(_optimized(), TARGETS["trn1"]), record_events=False)
    port = sim.lane["port_psum_vs"]
    sim.free["scalar"] = 10.0                 # ScalarE ran once, long ago: the port's reach stays there
    for k in range(3 * QUEUE_HISTORY):
        s, e = 1000.0 + 100.0 * k, 1050.0 + 100.0 * k     # VectorE work with gaps between
        sim.free["vector"] = e
        sim._occupy_lane(port, s, e, "vector")
    iv = sim.qbusy[port]
    assert len(iv) == QUEUE_HISTORY
    assert iv[-1] == (1050.0 + 100.0 * (3 * QUEUE_HISTORY - 1) - 50.0, 1050.0 + 100.0 * (3 * QUEUE_HISTORY - 1))
    assert sim.qfloor[port] == iv[0][0] - 50.0    # the forgotten intervals count as busy up to here


def test_optimized_kernel_extrapolation_stays_exact_with_the_cap():
    k = _optimized()
    res = {ex: Simulator(Plan(k, TARGETS["trn1"]), record_events=False, extrapolate=ex).run()
           for ex in (True, False)}
    assert res[True].extrapolations and res[True].simulated_instructions < res[False].simulated_instructions
    assert abs(res[True].total_ns - res[False].total_ns) <= 1e-12 * res[False].total_ns
    assert abs(res[True].dma_active_ns - res[False].dma_active_ns) <= 1e-9 * res[False].dma_active_ns
