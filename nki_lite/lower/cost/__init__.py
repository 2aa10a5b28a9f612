"""The engine model: per-target hardware data, per-op cost rules, a schedule, and reports.

Importing this package registers the "cost" rule of every op (lower/ops.py).
"""
from . import rules  # noqa: F401  (registers @rule("cost", op) for every op)
from . import rules_partition, rules_rng_select  # noqa: F401  (issue #13 batch 1)
from . import rules_indirect  # noqa: F401  (indirect DMA, dynamic copies)
from . import rules_lnc  # noqa: F401  (issue #14: core_barrier, sendrecv)
from . import rules_mx  # noqa: F401  (issue #14: quantize_mx, nc_matmul_mx)
from . import rules_registers  # noqa: F401  (issue #14: register_move)
from . import rules_dma_compute  # noqa: F401  (issue #14: nisa.dma_compute)
from ...core.targets import TARGETS, Target
