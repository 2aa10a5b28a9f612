"""Hardware-rule verification of a traced kernel (runs after the default passes, before any backend).

Contract: `verify(kernel)` raises the registered NkiLiteError for the first violated rule, naming
the offending instruction's source line; it returns None for a legal kernel.
"""
from __future__ import annotations

from .ir import Kernel


def verify(kernel: Kernel) -> None:
    return None
