"""Extrapolation (periodic.py, nest.py) against full simulation: the totals must agree."""
import pytest

import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.schedule import Simulator
from tests.kernels import matmul_tutorial as MT


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("dtype", [nl.bfloat16, nl.float32])
def test_flattened_nest_equals_full_simulation(target, dtype):
    k = MT.KERNELS["optimized"].trace(nt.tensor[[2048, 4096], dtype], nt.tensor[[2048, 1024], dtype], target=target)
    # spill=False: at fp32 on trn1 the result block is over capacity and its spill DMAs (spill.py) keep
    # this small nest from becoming periodic (simulated in full instead; tests/test_cost_spill.py)
    res = {ex: Simulator(Plan(k, TARGETS[target], spill=False), record_events=False, extrapolate=ex).run()
           for ex in (True, False)}
    assert any("*" in e[0] for e in res[True].extrapolations)      # the bn x bm nest ran as one loop
    assert res[True].simulated_instructions < res[False].simulated_instructions
    assert abs(res[True].total_ns - res[False].total_ns) <= 1e-12 * res[False].total_ns
