"""Validation against published hardware (issue 6, point 5): the NKI matmul tutorial on trn1.

The constants were frozen before this comparison (docs/engine_model.md, "Order of work") and must
not be tuned to it. Criteria the model does not meet today are strict xfails carrying the reason,
so a change that makes them pass (or breaks a passing one) shows up here and the docs are updated
with it. The docs table must equal the table this test computes.
"""
import os

import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.lower.cost import validation as V
from tests.kernels import matmul_tutorial as MT

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "engine_model.md")

# Known failures, with the reason (see docs/engine_model.md, "Validation" and "Why four criteria
# fail"). The documented DMA rate (16 x 17 B/ns = 272 GB/s, 1 KiB descriptors at 80% efficiency)
# moves these kernels' traffic about 2x faster than the ~104 GB/s that all four published latencies
# imply, and no documented DMA fact gives a row-size-independent ~105 GB/s (issue 6: blocked).
KNOWN_FAILURES = {
    "latency hoisted": "DMA-bound at the documented 272 GB/s: model 2.1x faster than published",
    "latency block_free": "DMA-bound at the documented 272 GB/s: model 2.0x faster than published",
    "ratio tiled -> hoisted": "the tiled kernel is latency-bound (double-buffered tiles, 1.3 us semaphores), "
                              "the hoisted one bandwidth-bound at the documented rate",
    "ratio block_free -> optimized": "block_free is DMA-bound at the documented rate, so its gap to the "
                                     "compute-bound optimised kernel is smaller than measured",
    # issue 15: edges between two compute engines no longer pay the DMA semaphore latency (1300 ns),
    # so the model keeps TensorE busy 97% of the optimised kernel's 6.16 ms (published: 85% of 6.97 ms;
    # the latency stays within 12%): the remaining gap is the compiler's instruction order, not modelled
    "optimized HFU in [70, 95]%": "model HFU 97%: without DMA semaphores between compute engines the "
                                  "model overlaps the PSUM copies with TensorE perfectly",
}


@pytest.fixture(scope="module")
def summaries():
    lhsT = nt.tensor[list(V.PROBLEM["lhsT"]), nl.bfloat16]
    rhs = nt.tensor[list(V.PROBLEM["rhs"]), nl.bfloat16]
    out = {}
    for key in V.ORDER:
        s = nki.estimate(MT.KERNELS[key], lhsT, rhs, target="trn1", record_events=False).summary()
        assert not s["model_approximate"]
        out[key] = s
    return out


@pytest.fixture(scope="module")
def comparison(summaries):
    ms = {k: s["total_time"] * 1e3 for k, s in summaries.items()}
    hfu = {k: s["hfu_estimated_percent"] for k, s in summaries.items()}
    return V.compare(ms, hfu)


CRITERIA = ["ranking", "latency tiled", "latency hoisted", "latency block_free", "latency optimized",
            "ratio tiled -> hoisted", "ratio hoisted -> block_free", "ratio block_free -> optimized",
            "optimized HFU in [70, 95]%"]


@pytest.mark.parametrize("criterion", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[c])) if c in KNOWN_FAILURES else c
    for c in CRITERIA])
def test_criterion(comparison, criterion):
    _, _, checks = comparison
    assert set(checks) == set(CRITERIA)
    assert checks[criterion]


def test_docs_table_is_current(comparison):
    table = V.render(*comparison)
    with open(DOCS) as f:
        assert table in f.read(), "docs/engine_model.md's validation table is stale: paste V.render(...) output"


def test_published_steps_cost_the_same_per_byte(summaries):
    """The arithmetic behind "Why four criteria fail", point 1: each published step removes one kind
    of load (256 B-row lhsT reloads, then 1 KiB-row rhs reloads); the time saved per byte is the same
    within 15% while the time saved per DMA instruction differs more than 4x. So the hardware cost was
    flat per byte (~105 GB/s), not per row or per DMA, which is what rules out every documented
    row-size or per-DMA cost as the explanation."""
    from nki_lite.core.targets import TARGETS
    from nki_lite.lower.cost.plan import Plan
    from nki_lite.lower.cost.totals import totals
    lhsT = nt.tensor[list(V.PROBLEM["lhsT"]), nl.bfloat16]
    rhs = nt.tensor[list(V.PROBLEM["rhs"]), nl.bfloat16]

    def traffic(k):     # the kernels' loads as written (the published runs' compiler did not hoist)
        t = totals(Plan(MT.KERNELS[k].trace(lhsT, rhs, target="trn1"), TARGETS["trn1"], hoist=False))
        return t.hbm_read_bytes + t.hbm_write_bytes, t.dma_count
    per_byte, per_dma = [], []
    for a, b in zip(V.ORDER[:2], V.ORDER[1:3]):
        (ba, da), (bb, db) = traffic(a), traffic(b)
        dt_ns = (V.PUBLISHED[a][1] - V.PUBLISHED[b][1]) * 1e6
        per_byte.append(dt_ns / (ba - bb))
        per_dma.append(dt_ns / (da - db))
    assert traffic("tiled") == (5_435_817_984, 66_048)
    assert traffic("hoisted") == (4_429_185_024, 35_328)
    assert traffic("block_free") == (2_281_701_376, 18_944)
    assert max(per_byte) / min(per_byte) < 1.15                     # 8.8 vs 9.7 ps/B
    assert max(per_dma) / min(per_dma) > 4.0                        # 288 vs 1275 ns
    for k in V.ORDER:                                               # ~105 GB/s implied by all four
        b, _ = traffic(k)
        assert 100 < b / (V.PUBLISHED[k][1] * 1e6) < 110
