"""NeuronCore targets as data: trn1 (NeuronCore-v2), trn2 (v3), trn3 (v4).

Contract: `TARGETS[name]` is a frozen `Target`; every number cites its source in
shared/NKI_REFERENCE.md (section) or says "assumed" with the reason. Verification (lower/verify.py)
reads the structural limits; the engine model (lower/cost/) reads the timing fields. A test
(tests/test_cost_targets.py) pins every value.

Provenance rule (docs/engine_model.md, "Order of work"): the timing constants below were written
and frozen BEFORE the engine model was compared with the published matmul-tutorial latencies; none
of them may be changed to move that comparison.

Units: clocks in GHz (= cycles per ns), bandwidths in bytes per ns (= GB/s), latencies in ns,
instruction costs in cycles of the engine that runs them.
"""
from __future__ import annotations

from dataclasses import dataclass

KiB = 1024


@dataclass(frozen=True)
class Target:
    # ------------------------------------------------------------------ structure (read by verify)
    name: str
    nc_version: int
    partitions: int                 # §3.1: 128 on all generations
    sbuf_partition_bytes: int       # usable SBUF bytes per partition (§3.1; trn1: 192 KiB - 16 KiB reserved)
    psum_partition_bytes: int       # §3.1: 16 KiB per partition
    psum_banks: int                 # §3.1: 8 banks x 2 KiB
    psum_bank_bytes: int
    matmul_stationary_fmax: int     # §3.2: M <= 128
    matmul_moving_fmax: int         # §3.2: N <= 512 (v2/v3), 4096 fp32 dst on v4
    matmul_kmax: int                # §3.2: K <= 128 (partition)
    fp8_e4m3fn_matmul: bool         # §3.2: e4m3fn matmul input only on NC-v4
    vector_sbuf_fmax: int           # §1.6: 64K elements per partition reading SBUF
    vector_psum_fmax: int           # §1.6: 4K elements per partition reading PSUM
    bn_stats_fmax: int              # §1.6: 512
    psum_tile_in_one_bank: bool     # §3.2 / §5.2: a PSUM accumulation tile must not cross a bank (v2/v3)

    # ------------------------------------------------------------------ timing (read by the engine model)
    # engine clocks, GHz (§3.1 "data-path / clock" rows)
    tensor_ghz: float = 0.0
    vector_ghz: float = 0.0
    scalar_ghz: float = 0.0
    gpsimd_ghz: float = 0.0
    base_ghz: float = 0.0           # profiler "NC base clock" (§3.1, §6.4 neuroncore_cycle_count)

    # Tensor Engine
    pe_rows: int = 128              # §3.1: 128x128 PEs on every generation
    pe_cols: int = 128
    mm_init_latency: int = 64       # §4.6/§4.7: MM_INIT_LATENCY = 64 TensorE cycles (stated for trn1)
    matmul_fp32_factor: float = 4.0     # §3.1/§4.7: FP32 matmul costs 4x BF16 on every generation
    fp8_double_row: bool = False    # §3.1/§3.2: perf_mode=double_row exists (v3+)
    fp8_double_row_rate: float = 1.0    # §3.1: FP8 double-row = 2x BF16 matmul rate
    transpose_tensor_max: int = 128     # §2 nc_transpose: Tensor Engine transposes <= 128x128 (identity matmul)
    transpose_vector_max: int = 32      # §2 nc_transpose: Vector Engine transposes <= 32x32
    tensor_fp32_transpose_factor: float = 4.0  # fp32 transpose via matmul = fp32 matmul cost (§4.7);
                                               # v3+ transpose mode is 2x faster (§3.1 "extra" row)

    # Vector / Scalar / GpSimd cost-formula constants (§4.7, NC-v2 docstrings)
    min_ii: int = 64                # MIN_II
    min_ii_dynamic: int = 600       # MIN_II_DYNAMIC
    gpsimd_start: int = 150         # GPSIMD_START (iota, affine_select)
    gather_max_indices: int = 4096  # nisa.local_gather: indices per GpSimd core (api/nki/isa docs)
    dep_issue_cycles: int = 264     # §4.6: dependent back-to-back tiny ScalarE instructions issue every 264 cycles
    static_overhead_cycles: int = 100   # §4.6 / §4.7 arch guide: ~100 cycles static overhead per instruction
                                        # (counted in engine-active time only, TARGET_NOTES)
    strided_penalty: float = 2.0    # §3.4: innermost F stride > 16 B halves SBUF/PSUM bandwidth
    vector_perf_mode: bool = False  # §4.7 "Trn2 VectorE perf mode" (2x / 4x); absent on v2
    scalar_2byte_speedup: float = 1.0   # §3.1: v4 ScalarE 256 elem/cycle for BF16/FP16/FP8 (2x), 128 others
    sbuf_vector_gpsimd_exclusive: bool = False  # §3.1: v2 VectorE and GpSimdE cannot access SBUF at once
    psum_vector_scalar_exclusive: bool = False  # §3.1: v2 VectorE and ScalarE cannot access PSUM at once

    # synchronisation
    semaphore_latency_ns: float = 1300.0    # §3.4/§4.8: cross-engine semaphore-to-start latency ~1300 ns

    # DMA
    dma_queues: int = 16                    # §3.1/§4.8: 16 DMA engines per NeuronCore
    dma_queue_bytes_per_ns: float = 0.0     # §4.8 DMA guide: 17 / 23 / 33 B/ns per engine
    dma_descriptor_half_bytes: int = 256    # assumed, see TARGET_NOTES["dma_descriptor_half_bytes"]
    dma_efficient_partition_bytes: int = 2 * KiB  # §4.8: >= 2 KiB per partition per DMA is close to peak
    dma_transpose_efficiency: float = 0.0   # §4.7 Trn2 DMA: DMA transpose <=90% of DMA throughput (HBM->SBUF)
    dma_transpose_sbuf_efficiency: float = 0.0  # §4.7 Trn2 DMA: <=50% SBUF->SBUF
    hbm_bytes_per_ns_per_nc: float = 0.0    # §3.3: chip HBM bandwidth / NeuronCores per chip (DMA ceiling)
    hbm_stack_bytes_per_ns: float = 0.0     # §3.3/§6.4: one HBM stack's bandwidth (MBU denominator)

    # on-chip buffering (how many physical copies a tile allocated inside a loop gets)
    sbuf_loop_tile_buffers: int = 2         # assumed, see TARGET_NOTES["sbuf_loop_tile_buffers"]

    # instruction size limits (read by lang's nisa checks; same on every generation)
    max8_fmin: int = 8                      # nki.isa.max8 docs: 8..16,384 elements read per partition
    max8_fmax: int = 16384

    @property
    def clocks(self) -> dict[str, float]:
        return {"tensor": self.tensor_ghz, "vector": self.vector_ghz, "scalar": self.scalar_ghz,
                "gpsimd": self.gpsimd_ghz}

    @property
    def tensor_peak_flops_per_ns(self) -> float:
        """BF16 peak: one 128x128 MAC wave per TensorE cycle (§3.1 cross-check; §6.4 max_ops = 2 x #PE x clock)."""
        return 2.0 * self.pe_rows * self.pe_cols * self.tensor_ghz

    @property
    def dma_peak_bytes_per_ns(self) -> float:
        return min(self.dma_queues * self.dma_queue_bytes_per_ns, self.hbm_bytes_per_ns_per_nc)


_STRUCT = {
    "trn1": ("trn1", 2, 128, 192 * KiB - 16 * KiB, 16 * KiB, 8, 2 * KiB, 128, 512, 128, False,
             64 * 1024, 4 * 1024, 512, True),
    # trn2: 224 KiB per partition (§3.1); the reserved part is not documented for v3: assumed 0
    "trn2": ("trn2", 3, 128, 224 * KiB, 16 * KiB, 8, 2 * KiB, 128, 512, 128, False,
             64 * 1024, 4 * 1024, 512, True),
    # trn3: 32 MiB / 128 = 256 KiB per partition (§3.1, derived); reserved part assumed 0
    "trn3": ("trn3", 4, 128, 256 * KiB, 16 * KiB, 8, 2 * KiB, 128, 4096, 128, True,
             64 * 1024, 4 * 1024, 512, False),
}

_TIMING = {
    "trn1": dict(
        tensor_ghz=2.8, vector_ghz=1.12, scalar_ghz=1.4, gpsimd_ghz=1.4,   # §3.1 NC-v2
        base_ghz=1.4,                                                     # §3.1 / §6.4
        fp8_double_row=False, fp8_double_row_rate=1.0,                    # §3.1: FP8 = BF16 speed on v2
        tensor_fp32_transpose_factor=4.0,                                 # §4.7 (fp32 matmul cost)
        vector_perf_mode=False, scalar_2byte_speedup=1.0,
        sbuf_vector_gpsimd_exclusive=True, psum_vector_scalar_exclusive=True,  # §3.1 NC-v2 limits
        dma_queue_bytes_per_ns=17.0,                                      # §4.8 (DMA guide; §7.2 conflict)
        dma_transpose_efficiency=0.0, dma_transpose_sbuf_efficiency=0.0,  # no DMA transpose hardware (§3.1)
        hbm_bytes_per_ns_per_nc=820.0 / 2,                                # §3.3: 820 GB/s, 2 NCs
        hbm_stack_bytes_per_ns=820.0 / 2,                                 # §3.3: 2 stacks
    ),
    "trn2": dict(
        tensor_ghz=2.4, vector_ghz=0.96, scalar_ghz=1.2, gpsimd_ghz=1.2,   # §3.1 NC-v3
        base_ghz=1.2,                                                     # §3.1 / §6.4
        fp8_double_row=True, fp8_double_row_rate=2.0,                     # §3.1/§4.7
        tensor_fp32_transpose_factor=2.0,                                 # §3.1: transpose mode 2x faster fp32
        vector_perf_mode=True, scalar_2byte_speedup=1.0,                  # §4.7 Trn2 VectorE perf mode
        sbuf_vector_gpsimd_exclusive=False, psum_vector_scalar_exclusive=False,  # §3.1: lifted on v3
        dma_queue_bytes_per_ns=23.0,                                      # §4.8
        dma_transpose_efficiency=0.9, dma_transpose_sbuf_efficiency=0.5,  # §4.7 Trn2 DMA
        hbm_bytes_per_ns_per_nc=2900.0 / 8,                               # §3.3: 2.9 TB/s, 8 NCs
        hbm_stack_bytes_per_ns=2900.0 / 4,                                # §3.3: 4 stacks
    ),
    "trn3": dict(
        tensor_ghz=2.4, vector_ghz=1.2, scalar_ghz=1.2, gpsimd_ghz=1.2,    # §3.1 NC-v4
        base_ghz=1.2,                                     # assumed: §3.1 gives no v4 base clock; = its engine clocks
        fp8_double_row=True, fp8_double_row_rate=2.0,     # §3.1: plain FP8 double_row allowed on v4
        tensor_fp32_transpose_factor=2.0,                 # assumed same transpose mode as v3 (§3.1 "same as v3")
        vector_perf_mode=True, scalar_2byte_speedup=2.0,  # §3.1 v4 rows; perf-mode rules assumed as on v3
        sbuf_vector_gpsimd_exclusive=False, psum_vector_scalar_exclusive=False,
        dma_queue_bytes_per_ns=33.0,                      # §4.8
        dma_transpose_efficiency=0.9, dma_transpose_sbuf_efficiency=1.0,  # v3 numbers; §4.7: v4 SBUF DMA at full rate
        hbm_bytes_per_ns_per_nc=4900.0 / 8,               # §3.3: 4.9 TB/s (chip page; §7.4), 8 NCs
        hbm_stack_bytes_per_ns=4900.0 / 4,                # §3.3: 4 stacks
    ),
}

TARGETS: dict[str, Target] = {name: Target(*_STRUCT[name], **_TIMING[name]) for name in _STRUCT}


# Why each "assumed" number is what it is. Written with the constants, before any comparison with
# published latencies (docs/engine_model.md, "Order of work").
TARGET_NOTES: dict[str, str] = {
    "dma_descriptor_half_bytes":
        "assumed 256 B: each DMA descriptor (one contiguous run, at least one per partition, §3.4) costs a "
        "fixed overhead equal to moving 256 B, so efficiency = b / (b + 256). Reason: §4.8 says < 256 B per "
        "partition is 'severely overhead-bound' (read: <= 50%) and >= 2 KiB is 'close to peak' (this gives "
        "89%), >= 4 KiB 'saturates' (94%); 256 B is the largest half-efficiency point consistent with both. "
        "Checked later (issue 6, docs/engine_model.md 'Why four criteria fail'): AWS's DMA overview has a "
        "measured curve (figure nki-dma-intro-1, unlabelled y axis, generation not stated) giving ~10% at 256 B "
        "and ~42% at 1 KiB per partition. Not adopted: it contradicts AWS's trn2 FP32 tiled-matmul profile "
        "(512 B rows moving >= 74% of peak) and the trn1 tutorial's tiled kernel (256 B rows costing the same "
        "per byte as 1 KiB rows), so choosing it would mean choosing by fit to the tutorial's numbers.",
    "sbuf_loop_tile_buffers":
        "assumed 2: an SBUF tile allocated inside a loop gets two physical copies (double buffering, the "
        "compiler allocator's documented example, SDK-0925 nki_direct_allocation_guide), one if two do not fit "
        "in the usable SBUF. PSUM tiles inside loops rotate over the free PSUM banks instead (§3.2: 8 banks, "
        "up to eight outstanding accumulation groups).",
    "semaphore_latency_ns":
        "documented 1300 ns (§3.4/§4.8) for cross-engine semaphore-to-start; applied on every dependency edge "
        "with a DMA on one side. Issue 15: §4.8 gives it as a DMA cost (descriptor setup, semaphore-to-start), "
        "so an edge between two compute engines pays the consumer's dependent-issue gap instead "
        "(dep_issue_cycles - min_ii = 200 cycles, §4.6); no compute-to-compute figure is documented.",
    "dep_issue_cycles":
        "documented (§4.6): dependent back-to-back tiny instructions issue every 264 engine cycles; the model "
        "adds 264 - MIN_II = 200 cycles between a producer and a dependent consumer on the same engine "
        "(except PSUM accumulation groups on TensorE, which accumulate near-memory, §3.2).",
    "static_overhead_cycles":
        "documented ~100 cycles (§4.6 'Static instruction overhead is ~100 cycles'; arch guide, §4.7: 'Add ~100 "
        "cycles static overhead when instructions are tiny or serially dependent'), stated for NC-v2 and assumed "
        "the same on v3/v4. The §4.7 formulas are initiation intervals of back-to-back instructions, so the "
        "overhead does not delay the next instruction (times unchanged); the profiler counts an engine active "
        "while an instruction is being processed (§6.4), so an instruction's active interval is its initiation "
        "interval plus this overhead, and engine-active time is the union of those intervals (schedule.py).",
    "base_ghz(trn3)": "assumed 1.2 GHz: §3.1 lists no NC base clock for v4; every v4 engine runs at 1.2 GHz.",
    "tensor_fp32_transpose_factor(trn3)": "assumed 2 as on v3: §3.1 says v4 keeps v3's features.",
    "vector_perf_mode(trn3)": "assumed v3's perf-mode rules (§4.7) with FP8 counted as a 2-byte-class dtype "
                              "(§3.1: 512 elem/cycle BF16/FP16/FP8).",
    "dma_queue_bytes_per_ns(trn1)": "17 B/ns from the DMA guide (§4.8), not 27 GiB/s from the arch guide "
                                    "(§3.1, §7.2): the DMA guide is the dedicated and newer source and gives one "
                                    "consistent table for all three generations.",
    "gpsimd lanes": "assumed 1 element per partition per GpSimd cycle for every dtype (8 cores x 16 fp32 lanes "
                    "= 128 lanes, §3.1); GpSimd has no documented general cost rule (§4.7).",
    "kernel launch": "assumed 0: no documented fixed kernel start/stop overhead; total_time starts at the first "
                     "instruction.",
}
