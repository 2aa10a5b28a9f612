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

# Known failures, with the reason (see docs/engine_model.md, "Validation"). The documented DMA rate
# (16 x 17 B/ns = 272 GB/s, 1 KiB descriptors at 80% efficiency) moves these kernels' traffic about
# 2x faster than the ~104 GB/s that all four published latencies imply.
KNOWN_FAILURES = {
    "latency hoisted": "DMA-bound at the documented 272 GB/s: model 2.1x faster than published",
    "latency block_free": "DMA-bound at the documented 272 GB/s: model 2.0x faster than published",
    "ratio tiled -> hoisted": "the tiled kernel is latency-bound (double-buffered tiles, 1.3 us semaphores), "
                              "the hoisted one bandwidth-bound at the documented rate",
    "ratio block_free -> optimized": "block_free is DMA-bound at the documented rate, so its gap to the "
                                     "compute-bound optimised kernel is smaller than measured",
}


@pytest.fixture(scope="module")
def comparison():
    lhsT = nt.tensor[list(V.PROBLEM["lhsT"]), nl.bfloat16]
    rhs = nt.tensor[list(V.PROBLEM["rhs"]), nl.bfloat16]
    ms, hfu = {}, {}
    for key in V.ORDER:
        e = nki.estimate(MT.KERNELS[key], lhsT, rhs, target="trn1", record_events=False)
        s = e.summary()
        assert not s["model_approximate"]
        ms[key], hfu[key] = s["total_time"] * 1e3, s["hfu_estimated_percent"]
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
