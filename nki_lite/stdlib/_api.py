"""How a stdlib entry point is built: argument checks, a kernel call, and `.estimate()` of that call.

Contract:
- `@entry` wraps a *plan* function `plan(*args, **kwargs) -> Call`. Calling the entry point checks
  and converts the arguments (in the plan), runs `Call.kernel(*Call.args)` on nki_lite's default
  backend and passes the kernel's result through `Call.finish` (reshapes back to the caller's batch
  dimensions, unwraps scalars). No numpy computes anything the kernel should: plans only reshape
  views, check shapes and dtypes, and choose constants.
- `fn.estimate(*args, target="trn2", **kwargs)` traces the same kernel on the same arguments and
  returns the engine model's `Estimate` (nothing runs).
- Argument mistakes raise `ArgumentError` (NL-E901) naming the function, the argument and the
  expected shape.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import ml_dtypes
import numpy as np

from .. import errors

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))
FP8_DTYPES = (np.dtype(ml_dtypes.float8_e4m3), np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


@dataclass
class Call:
    kernel: Any
    args: tuple
    finish: Callable = field(default=lambda r: r)


def entry(plan: Callable) -> Callable:
    @functools.wraps(plan)
    def run(*args, **kwargs):
        c = plan(*args, **kwargs)
        return c.finish(c.kernel(*c.args))

    def estimate(*args, target: str = "trn2", **kwargs):
        from ..runtime.profile import estimate as _estimate
        c = plan(*args, **kwargs)
        return _estimate(c.kernel, *c.args, target=target)

    run.estimate = estimate
    run.plan = plan
    return run


def fail(fn: str, message: str, hint: str | None = None):
    raise errors.make("argument", f"{fn}: {message}", hint=hint)


def as_array(fn: str, name: str, x, dtypes=None) -> np.ndarray:
    """x as a numpy array (anything with __array__ / __dlpack__), C-contiguous, of an allowed dtype."""
    if not isinstance(x, np.ndarray):
        try:
            x = np.from_dlpack(x) if hasattr(x, "__dlpack__") and not hasattr(x, "__array__") else np.asarray(x)
        except (TypeError, ValueError, BufferError) as e:
            fail(fn, f"argument '{name}' is not an array ({e})")
    if dtypes is not None and x.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        fail(fn, f"argument '{name}' has dtype {x.dtype}; supported: {names}",
             hint="cast with .astype(np.float32)" if x.dtype.kind in "fiu" else None)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)      # (ascontiguousarray makes 0-d 1-d)


def need_ndim(fn: str, name: str, x: np.ndarray, lo: int, hi: int, what: str) -> None:
    if not lo <= x.ndim <= hi:
        fail(fn, f"argument '{name}' has shape {x.shape} ({x.ndim}-D); expected {what}")


def rows_view(x: np.ndarray) -> np.ndarray:
    """[..., D] as [rows, D] (a view of a contiguous array); 1-D is one row."""
    return x.reshape(1, -1) if x.ndim == 1 else x.reshape(-1, x.shape[-1])
