"""Strict-xfail bookkeeping shared by the structure tests (layering, code shape, hardware facts).

Contract: `marked(items, pending)` parametrises over `items`; an item named in `pending` (item ->
reason) is a strict xfail, so it must fail while listed and the list cannot go stale."""
from __future__ import annotations

import pytest


def marked(items, pending: dict) -> list:
    return [pytest.param(x, marks=pytest.mark.xfail(strict=True, reason=pending[x])) if x in pending else x
            for x in items]
