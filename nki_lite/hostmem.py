"""The host-memory limit of one allocation (`NKI_LITE_MAX_ALLOC_BYTES`), raised as NL-E403.

Contract:
- `limit()` is the knob read now: a byte count, or 0 (the default) for 3/4 of the machine's physical
  memory (all of it where that is unknown: no limit).
- `check(nbytes, what, loc)` raises `host_memory` (NL-E403, at `loc`) when one allocation needs more
  than the limit; the message names the size, the limit and the knob. Tracing checks every HBM
  tensor a kernel creates (so both backends refuse it at the line that creates it, before running).
- `empty(shape, dtype, what, loc)` is `np.empty` behind `check`, turning numpy's own MemoryError or
  "array is too big" ValueError (the sum of several allowed allocations can still exhaust the host)
  into the same NL-E403.
"""
from __future__ import annotations

import os

import numpy as np

from . import config, errors

_PHYS: int | None = None


def _physical() -> int:
    global _PHYS
    if _PHYS is None:
        try:
            _PHYS = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            _PHYS = 0
    return _PHYS


def limit() -> int:
    n = config.get("NKI_LITE_MAX_ALLOC_BYTES")
    if n > 0:
        return n
    phys = _physical()
    return phys * 3 // 4 if phys > 0 else 1 << 62


def _fmt(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


def _error(nbytes: int, what: str, loc, why: str = ""):
    lim = limit()
    return errors.make("host_memory", f"{what} needs {_fmt(nbytes)} of host memory{why}; the limit is "
                       f"{_fmt(lim)} (NKI_LITE_MAX_ALLOC_BYTES={config.get('NKI_LITE_MAX_ALLOC_BYTES')}, "
                       "0 = 3/4 of physical memory)", loc=loc,
                       hint="use smaller tensors, or raise NKI_LITE_MAX_ALLOC_BYTES (bytes) if the host has the memory")


def check(nbytes: int, what: str, loc=None) -> None:
    if nbytes > limit():
        raise _error(nbytes, what, loc)


def empty(shape, dtype, what: str, loc=None) -> np.ndarray:
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
    check(nbytes, what, loc)
    try:
        return np.empty(shape, dtype=dt)
    except (MemoryError, ValueError) as e:
        raise _error(nbytes, what, loc, f" and the allocation failed ({e})") from None
