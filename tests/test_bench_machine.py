"""benchmarks/machine.py's FMA-peak probe: one register-wide chain per accumulator on this CPU.

The probe is the bound every one-thread GFLOP/s figure is checked against. With chains wider than a
register (16 lanes on an AVX2-only CPU) it timed register spills and read half the real peak, so that
correct numpy figures were flagged as impossible. No timing is asserted here: only that the probe uses
the host's register width and that its IR compiles and runs for every width.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import machine  # noqa: E402


def test_lanes_follow_the_host_register_width():
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features()
    want = 16 if feats.get("avx512f") else 8 if feats.get("avx") else 4
    assert machine._native_lanes() == want


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_probe_compiles_and_runs_at_every_width(lanes):
    g = machine._measure_fma(n=2000, lanes=lanes)
    assert math.isfinite(g) and g > 0


def test_the_peak_line_names_the_width_used():
    machine._PEAK.clear()
    peak = machine.fma_peak_gflops()
    assert peak is not None and f"<{machine._native_lanes()} x float>" in peak[1]
