"""Recycled host memory for large kernel outputs: a fresh output costs no page faults.

A kernel that allocates its output (as a user's call does) writes every page of fresh memory once:
for a 64 MiB output the kernel zero-fills 16k pages (or 32 huge pages) on first touch, a quarter
of the time of a one-thread softmax of that size. numpy returns such a block to the OS when the
array dies (glibc unmaps chunks above its mmap threshold), so the next call faults it all in again.
This pool keeps the blocks of dead outputs and hands them to the next output of the same size.

Contract:
- `empty(shape, dtype) -> ndarray`: a C-contiguous, writable, aligned array with undefined contents,
  like `np.empty`. Outputs of at least `MIN_BYTES` come from the pool when a block of exactly that
  byte size is free, else from a new `np.empty` block; smaller ones are plain `np.empty` (malloc
  recycles those itself, without faults).
- A pooled array's `base` is a `_Block` holder; when the last array or view of it dies, the block
  goes back to the pool (weakref.finalize), never earlier: a block is never handed out while
  anything can still see it. The pool keeps at most `MAX_BYTES` of free blocks (the oldest are
  released first), so it never holds more memory than that beyond what live arrays use.
- `clear()` releases every free block; `stats()` counts hits, misses and free bytes (tests).
Undefined contents are what `np.empty` gives too: the launcher NaN-fills every output the launch
plan does not prove fully written (runtime/launch.py), so a recycled block's old values never
reach a result.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

MIN_BYTES = 1 << 20        # below this glibc's free lists already recycle memory without faults
MAX_BYTES = 512 << 20      # free blocks kept at most (bytes)

_LOCK = threading.Lock()
_FREE: OrderedDict = OrderedDict()     # id(raw) -> raw uint8 block, oldest first
_STATS = {"hits": 0, "misses": 0}


class _Block:
    """Holds a raw block; arrays made from it keep it (and so the block) alive."""
    __slots__ = ("raw", "__array_interface__", "__weakref__")

    def __init__(self, raw: np.ndarray):
        self.raw = raw
        # bytes here; the caller views them as the dtype (ml_dtypes' dtypes have no typestr of their own)
        self.__array_interface__ = {"shape": (raw.nbytes,), "typestr": "|u1", "data": (raw.ctypes.data, False),
                                    "version": 3}


def _free_bytes() -> int:
    return sum(r.nbytes for r in _FREE.values())


def _release(raw: np.ndarray) -> None:
    """The last view of `raw` died: keep it for the next output of its size (bounded)."""
    with _LOCK:
        if raw.nbytes > MAX_BYTES:
            return
        _FREE[id(raw)] = raw
        total = _free_bytes()
        while total > MAX_BYTES:
            _, old = _FREE.popitem(last=False)
            total -= old.nbytes


def _take(nbytes: int) -> np.ndarray | None:
    with _LOCK:
        for key, raw in _FREE.items():
            if raw.nbytes == nbytes:
                del _FREE[key]
                _STATS["hits"] += 1
                return raw
        _STATS["misses"] += 1
    return None


def empty(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype.hasobject:
        return np.empty(shape, dtype)
    raw = _take(nbytes)
    if raw is None:
        raw = np.empty(nbytes, np.uint8)       # (MemoryError / ValueError reach the caller, as np.empty's)
    holder = _Block(raw)
    weakref.finalize(holder, _release, raw).atexit = False
    return np.asarray(holder).view(dtype).reshape(shape)


def clear() -> None:
    """Release every free block and reset the counters."""
    with _LOCK:
        _FREE.clear()
        _STATS.update(hits=0, misses=0)


def stats() -> dict:
    with _LOCK:
        return {**_STATS, "free_bytes": _free_bytes(), "free_blocks": len(_FREE)}
