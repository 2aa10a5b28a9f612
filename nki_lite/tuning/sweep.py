"""Evaluate many autotune configs, across processes when there are enough of them.

Contract: `run_all(evaluate, n, workers, desc)` returns `[evaluate(i) for i in range(n)]` in index
order (so the choice never depends on which process finished first), with a progress bar. With
`workers > 1`, `n >= MIN_PARALLEL` and the `fork` start method available, indices are evaluated in a
process pool whose children inherit `evaluate` (set in a module global before the pool forks: kernels,
their arguments and files loaded from FILE::KERNEL need no pickling). `evaluate(i)` must return
something picklable and must not raise (it reports failures in its result).
"""
from __future__ import annotations

import os
from typing import Any, Callable

from .. import config
from ..tools.progress import progress

MIN_PARALLEL = 4          # below this, forking costs more than it saves

_JOB: Callable[[int], Any] | None = None


def _child(i: int):
    assert _JOB is not None
    return _JOB(i)


def workers_for(requested: int | None) -> int:
    n = requested if requested is not None else config.get("NKI_LITE_AUTOTUNE_WORKERS")
    return n if n and n > 0 else (os.cpu_count() or 1)


def run_all(evaluate: Callable[[int], Any], n: int, workers: int, desc: str) -> list:
    global _JOB
    import multiprocessing                     # here, not at import: `import nki_lite` stays cheap
    from concurrent.futures import ProcessPoolExecutor, as_completed
    if workers <= 1 or n < MIN_PARALLEL or "fork" not in multiprocessing.get_all_start_methods():
        return [evaluate(i) for i in progress(range(n), total=n, desc=desc)]
    _JOB = evaluate
    try:
        out: list = [None] * n
        with ProcessPoolExecutor(max_workers=min(workers, n), mp_context=multiprocessing.get_context("fork")) as ex:
            futures = {ex.submit(_child, i): i for i in range(n)}
            for fut in progress(as_completed(futures), total=n, desc=desc):
                out[futures[fut]] = fut.result()
        return out
    finally:
        _JOB = None
