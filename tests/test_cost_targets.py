"""The engine model's per-target constants are pinned here (issue 6, point 1).

Each value's source is in nki_lite/lower/cost/targets.py (shared/NKI_REFERENCE.md section, or
"assumed" with the reason in TARGET_NOTES). Changing a number must change this table too — and
docs/engine_model.md's "Order of work" log says why.
"""
import dataclasses

import pytest

from nki_lite.core.targets import TARGET_NOTES, TARGETS, Target

KiB = 1024

PINNED = {
    #                  trn1        trn2        trn3        source
    "nc_version":      (2,          3,          4),         # §3.1
    "partitions":      (128,        128,        128),       # §3.1
    "sbuf_partition_bytes": (176 * KiB, 224 * KiB, 256 * KiB),   # §3.1 (trn1: 192 - 16 reserved)
    "psum_partition_bytes": (16 * KiB, 16 * KiB, 16 * KiB),      # §3.1
    "psum_banks":      (8,          8,          8),         # §3.1
    "psum_bank_bytes": (2 * KiB,    2 * KiB,    2 * KiB),   # §3.1
    "matmul_stationary_fmax": (128, 128,        128),       # §3.2
    "matmul_moving_fmax": (512,     512,        4096),      # §3.2
    "matmul_kmax":     (128,        128,        128),       # §3.2
    "fp8_e4m3fn_matmul": (False,    False,      True),      # §3.2
    "vector_sbuf_fmax": (65536,     65536,      65536),     # §1.6
    "vector_psum_fmax": (4096,      4096,       4096),      # §1.6
    "bn_stats_fmax":   (512,        512,        512),       # §1.6
    "psum_tile_in_one_bank": (True, True,       False),     # §3.2
    "tensor_ghz":      (2.8,        2.4,        2.4),       # §3.1
    "vector_ghz":      (1.12,       0.96,       1.2),       # §3.1
    "scalar_ghz":      (1.4,        1.2,        1.2),       # §3.1
    "gpsimd_ghz":      (1.4,        1.2,        1.2),       # §3.1
    "base_ghz":        (1.4,        1.2,        1.2),       # §3.1/§6.4; trn3 assumed
    "pe_rows":         (128,        128,        128),       # §3.1
    "pe_cols":         (128,        128,        128),       # §3.1
    "mm_init_latency": (64,         64,         64),        # §4.6/§4.7
    "matmul_fp32_factor": (4.0,     4.0,        4.0),       # §3.1/§4.7
    "fp8_double_row":  (False,      True,       True),      # §3.1/§3.2
    "fp8_double_row_rate": (1.0,    2.0,        2.0),       # §3.1
    "transpose_tensor_max": (128,   128,        128),       # §2 nc_transpose
    "transpose_vector_max": (32,    32,         32),        # §2 nc_transpose
    "tensor_fp32_transpose_factor": (4.0, 2.0,  2.0),       # §4.7, §3.1 (trn3 assumed)
    "min_ii":          (64,         64,         64),        # §4.7
    "min_ii_dynamic":  (600,        600,        600),       # §4.7
    "gpsimd_start":    (150,        150,        150),       # §4.7
    "dep_issue_cycles": (264,       264,        264),       # §4.6
    "static_overhead_cycles": (100, 100,        100),       # §4.6 / arch guide (v3/v4 assumed)
    "strided_penalty": (2.0,        2.0,        2.0),       # §3.4
    "vector_perf_mode": (False,     True,       True),      # §4.7 (trn3 assumed)
    "scalar_2byte_speedup": (1.0,   1.0,        2.0),       # §3.1
    "sbuf_vector_gpsimd_exclusive": (True, False, False),   # §3.1
    "psum_vector_scalar_exclusive": (True, False, False),   # §3.1
    "semaphore_latency_ns": (1300.0, 1300.0,    1300.0),    # §3.4/§4.8
    "dma_queues":      (16,         16,         16),        # §3.1/§4.8
    "dma_queue_bytes_per_ns": (17.0, 23.0,      33.0),      # §4.8
    "dma_descriptor_half_bytes": (256, 256,     256),       # assumed (§4.8 curve)
    "dma_efficient_partition_bytes": (2 * KiB, 2 * KiB, 2 * KiB),  # §4.8
    "dma_transpose_efficiency": (0.0, 0.9,      0.9),       # §4.7
    "dma_transpose_sbuf_efficiency": (0.0, 0.5, 1.0),       # §4.7
    "hbm_bytes_per_ns_per_nc": (410.0, 362.5,   612.5),     # §3.3
    "hbm_stack_bytes_per_ns": (410.0, 725.0,    1225.0),    # §3.3/§6.4
    "sbuf_loop_tile_buffers": (2,   2,          2),         # assumed (double buffering)
    "max8_fmin":       (8,          8,          8),         # nki.isa.max8 docs
    "max8_fmax":       (16384,      16384,      16384),     # nki.isa.max8 docs
    "gather_max_indices": (4096, 4096,      4096),      # nisa.local_gather docs: indices per GpSimd core
}


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Target) if f.name != "name"])
def test_every_field_is_pinned(field):
    assert field in PINNED, f"new Target field {field!r}: pin its values (with the source) in this table"
    got = tuple(getattr(TARGETS[t], field) for t in ("trn1", "trn2", "trn3"))
    assert got == PINNED[field]


def test_targets_and_names():
    assert set(TARGETS) == {"trn1", "trn2", "trn3"}
    for name, t in TARGETS.items():
        assert t.name == name


def test_derived_peaks_match_the_quoted_ones():
    # §3.1: 92 TFLOPS BF16 on trn1, 79 on trn2/trn3 (= 2 x 128 x 128 x TensorE clock)
    assert TARGETS["trn1"].tensor_peak_flops_per_ns == pytest.approx(92_000, rel=0.01)
    assert TARGETS["trn2"].tensor_peak_flops_per_ns == pytest.approx(79_000, rel=0.01)
    assert TARGETS["trn3"].tensor_peak_flops_per_ns == pytest.approx(79_000, rel=0.01)
    # §4.8 aggregate DMA per NC: 272 / 368 / 528 GB/s (trn2 capped by its HBM share, 2.9 TB/s / 8 NCs)
    assert TARGETS["trn1"].dma_peak_bytes_per_ns == 272.0
    assert TARGETS["trn2"].dma_peak_bytes_per_ns == 362.5
    assert TARGETS["trn3"].dma_peak_bytes_per_ns == 528.0


def test_assumed_values_have_written_reasons():
    for key in ("dma_descriptor_half_bytes", "sbuf_loop_tile_buffers", "semaphore_latency_ns",
                "dep_issue_cycles", "static_overhead_cycles", "base_ghz(trn3)"):
        assert key in TARGET_NOTES and len(TARGET_NOTES[key]) > 40
