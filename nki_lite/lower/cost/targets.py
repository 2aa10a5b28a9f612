"""NeuronCore targets as data: trn1 (NeuronCore-v2), trn2 (v3), trn3 (v4).

Contract: `TARGETS[name]` is a frozen `Target`; every number cites its source in shared/NKI_REFERENCE.md
(section) or says "assumed". Verification (lower/verify.py) reads the structural limits; the engine
model reads the timing fields. A test pins the values.
"""
from __future__ import annotations

from dataclasses import dataclass

KiB = 1024


@dataclass(frozen=True)
class Target:
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


TARGETS: dict[str, Target] = {
    "trn1": Target("trn1", 2, 128, 192 * KiB - 16 * KiB, 16 * KiB, 8, 2 * KiB, 128, 512, 128, False,
                   64 * 1024, 4 * 1024, 512, True),
    # trn2: 224 KiB per partition (§3.1); the reserved part is not documented for v3: assumed 0
    "trn2": Target("trn2", 3, 128, 224 * KiB, 16 * KiB, 8, 2 * KiB, 128, 512, 128, False,
                   64 * 1024, 4 * 1024, 512, True),
    # trn3: 32 MiB / 128 = 256 KiB per partition (§3.1, derived); reserved part assumed 0
    "trn3": Target("trn3", 4, 128, 256 * KiB, 16 * KiB, 8, 2 * KiB, 128, 4096, 128, True,
                   64 * 1024, 4 * 1024, 512, False),
}
