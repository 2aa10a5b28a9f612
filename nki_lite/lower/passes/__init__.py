"""Pure Kernel -> Kernel transforms run after tracing, before every backend.

Contract: each pass preserves the kernel's results bit for bit on every backend (tests compare the
interpreter before and after). `run_default(kernel)` is the pipeline all backends see.
"""
from __future__ import annotations

from ...core.ir import Kernel
from .drop_empty import drop_empty
from .fold_copies import fold_copies


def run_default(kernel: Kernel) -> Kernel:
    return fold_copies(drop_empty(kernel))
