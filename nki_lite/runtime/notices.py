"""Warnings a kernel call gives once: the classes and the once-per-key rule.

Contract: `warn_once(key, message, category)` warns the first time `key` is seen in this process
(tests reset `_WARNED`); `KnobChangedWarning` (a knob changed between two calls of one kernel,
BAD_INPUTS row 30) and `NkiLitePerformanceWarning` (a call works but slower than it needs to, e.g.
a copied non-contiguous argument) are nki_lite's own categories.
"""
from __future__ import annotations

import warnings


class KnobChangedWarning(UserWarning):
    """An NKI_LITE_* knob changed between two calls of one kernel (BAD_INPUTS row 30)."""


class NkiLitePerformanceWarning(UserWarning):
    """A call works but is slower than it needs to be (e.g. a copied non-contiguous argument)."""


_WARNED: set = set()


def warn_once(key: str, message: str, category=UserWarning) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, category, stacklevel=4)


def knob_text(v) -> str:
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    return "unset" if v is None else repr(v)
