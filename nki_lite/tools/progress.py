"""A progress bar for long work (check, bench, autotune sweeps).

Contract: `progress(iterable, total=None, desc="")` yields the iterable's items. With tqdm installed
(optional) it is a tqdm bar on stderr; otherwise a plain fallback prints `desc: k/n` to stderr,
rewriting one line on a terminal and printing one line per step elsewhere (CI logs). `NKI_LITE_PROGRESS`
chooses: `auto` (default: tqdm if importable, else plain), `plain`, `off`. Never writes to stdout, so
tables and JSON on stdout stay clean.
"""
from __future__ import annotations

import sys
from typing import Iterable, Iterator, TypeVar

from .. import config

T = TypeVar("T")


def _plain(items: Iterable[T], total: int | None, desc: str) -> Iterator[T]:
    err = sys.stderr
    tty = err.isatty()
    n = 0
    for item in items:
        yield item
        n += 1
        text = f"{desc}: {n}/{total}" if total is not None else f"{desc}: {n}"
        err.write(("\r" + text) if tty else text + "\n")
        err.flush()
    if tty and n:
        err.write("\n")
        err.flush()


def progress(items: Iterable[T], total: int | None = None, desc: str = "") -> Iterator[T]:
    how = config.get("NKI_LITE_PROGRESS")
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if how == "off":
        return iter(items)
    if how == "auto":
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            return iter(tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False))
    return _plain(items, total, desc)
