"""Framework tensors in, the caller's type out: torch / jax CPU arrays and any DLPack or __array__ type.

Contract:
- `converter(args, kwargs)` returns None when no argument is a foreign tensor (numpy only: the call
  path is unchanged), else a function turning the kernel's numpy results (None, an array or a tuple)
  into the type of the first foreign tensor argument. Foreign = has `__dlpack__` or `__array__`, is
  not a numpy array or scalar, and lives on the CPU (a device tensor is left alone so the kernel's
  argument checks refuse it with their own message).
- `to_numpy(v)` reads a foreign CPU tensor without a copy: `np.from_dlpack` when it speaks DLPack
  (torch, jax, the array API), else `np.asarray` (jax's and others' `__array__`). `numpy_args` /
  `numpy_kwargs` apply it to a call's arguments (and to `out=` arrays, so results land in the caller's
  tensors); a tensor that cannot be read (torch's requires_grad ones) is NL-E901 naming the argument.
- Results go back through the caller's namespace without a copy where the framework allows it: the
  array API's `x.__array_namespace__().from_dlpack` (jax), else the framework module's own
  `from_dlpack` (torch.from_dlpack); where DLPack cannot carry the dtype (bfloat16, fp8), the
  namespace's `asarray` (a copy). A result neither takes is returned as numpy with a
  `FrameworkResultWarning` saying why.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

import numpy as np

_DLPACK_CPU = 1


class FrameworkResultWarning(UserWarning):
    """A kernel result could not be handed back as the caller's tensor type (it is numpy instead)."""


def _foreign(v) -> bool:
    if isinstance(v, (np.ndarray, np.generic, type, str, bytes, int, float, complex, list, tuple, dict)):
        return False
    if not (hasattr(v, "__dlpack__") or hasattr(v, "__array__")):
        return False
    dev = getattr(v, "__dlpack_device__", None)
    if callable(dev):
        try:
            return int(dev()[0]) == _DLPACK_CPU
        except Exception:
            return False
    return "cuda" not in str(getattr(v, "device", ""))


def to_numpy(v) -> np.ndarray:
    if hasattr(v, "__dlpack__"):
        try:
            return np.from_dlpack(v)
        except (TypeError, ValueError, BufferError, RuntimeError):
            if not hasattr(v, "__array__"):
                raise
    return np.asarray(v)


def _from_numpy_into(like) -> Callable[[np.ndarray], Any]:
    ns_fn = getattr(like, "__array_namespace__", None)
    ns = ns_fn() if callable(ns_fn) else sys.modules.get(type(like).__module__.split(".")[0])
    makers = [m for m in (getattr(ns, "from_dlpack", None), getattr(ns, "asarray", None)) if callable(m)]
    kind = type(like).__name__

    def convert(a):
        if not isinstance(a, np.ndarray) or not makers:
            return a
        why: Exception | None = None
        for make in makers:      # from_dlpack shares memory; asarray (a copy) takes what DLPack cannot:
            try:                 # bfloat16 / fp8 (numpy cannot export them through DLPack)
                return make(a)
            except Exception as e:
                why = why or e
        warnings.warn(f"a kernel result of dtype {a.dtype} is returned as a numpy array, not as {kind}: "
                      f"{type(why).__name__}: {why}", FrameworkResultWarning, stacklevel=4)
        return a
    return convert


def converter(args: tuple, kwargs: dict) -> Callable[[Any], Any] | None:
    like = next((v for v in (*args, *kwargs.values()) if _foreign(v)), None)
    if like is None:
        return None
    one = _from_numpy_into(like)

    def convert(result):
        if isinstance(result, tuple):
            return tuple(one(r) for r in result)
        return one(result)
    return convert


def _read(name: str, v):
    if not _foreign(v):
        return v
    try:
        return to_numpy(v)
    except Exception as e:       # e.g. torch refuses tensors that require grad
        from . import errors
        raise errors.make("argument", f"the {type(v).__name__} argument {name} could not be read as a CPU array: "
                          f"{type(e).__name__}: {e}", hint="pass a plain CPU tensor (e.g. t.detach()) or a "
                          "numpy array") from None


def numpy_args(args: tuple) -> tuple:
    return tuple(_read(f"at position {i}", v) for i, v in enumerate(args))


def numpy_kwargs(kwargs: dict) -> dict:
    out = {}
    for k, v in kwargs.items():
        if k == "out" and isinstance(v, (tuple, list)):
            v = type(v)(_read(f"out[{i}]", x) for i, x in enumerate(v))
        out[k] = _read(repr(k), v)
    return out
