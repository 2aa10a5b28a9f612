"""Hardware-rule verification of a traced kernel (runs after the default passes, before any backend).

Contract: `verify(kernel)` raises the registered NkiLiteError for the first violated rule, naming
the offending instruction's source line (offending values in the message, a concrete fix in the
hint); it returns None for a legal kernel. Rules are read from `kernel.target`
(lower/cost/targets.py). docs/verification.md lists every rule, its code and its limits.

Order: the per-instruction rules run instruction by instruction in program order (memory spaces,
matmul shape/dtype, free size, partition, PSUM bank, immutable parameters, bounds), so the first
offending statement is reported; then the whole-kernel rules (affine_range dependencies, SBUF/PSUM
capacity, outputs never written). Partial output coverage is a warning (`OutputCoverageWarning`),
not an error. Validation uses explicit raises only (no `assert`), so it holds under `python -O`.

Rule families live in verify_tiles (1, 2), verify_matmul (3, 4), verify_memory (5, 6),
verify_bounds (7, 8), verify_deps (9), verify_params (10, 11) and verify_mx (12); shared machinery (program sites,
the exact integer range solver, naming) in verify_common.
"""
from __future__ import annotations

from ..core.ir import Kernel
from . import verify_bounds, verify_deps, verify_matmul, verify_memory, verify_mx, verify_params, verify_tiles
from .verify_common import Ctx
from .verify_params import OutputCoverageWarning  # noqa: F401  (public: nki_lite.lower.verify.OutputCoverageWarning)

_PER_INSTRUCTION = (
    verify_memory.check_spaces,        # rule 6
    verify_mx.check_mx_dtypes,         # rule 12 (MX containers)
    verify_matmul.check_matmul,        # rule 3
    verify_tiles.check_free_size,      # rule 2 (before rule 1: a too-large transpose is a free-size error)
    verify_tiles.check_partition,      # rule 1
    verify_matmul.check_psum_bank,     # rule 4
    verify_memory.check_psum_tiles,    # rule 4, every PSUM tile
    verify_params.check_immutable,     # rule 10
    verify_bounds.check_bounds,        # rules 7, 8
)
_WHOLE_KERNEL = (
    verify_deps.check_dependencies,    # rule 9
    verify_memory.check_capacity,      # rule 5
    verify_params.check_outputs,       # rule 11
)


def verify(kernel: Kernel) -> None:
    ctx = Ctx.build(kernel)
    for site in ctx.sites:
        for rule in _PER_INSTRUCTION:
            rule(ctx, site)
    for rule in _WHOLE_KERNEL:
        rule(ctx)
    return None
