"""Binding a kernel call's arguments: conversion to numpy, cache keys, and checks with clear errors.

Contract:
- `to_array(name, value, loc)` turns a tensor argument into numpy (arrays, `__array__`, CPU DLPack;
  a 0-d array is its scalar) and leaves constants alone; accelerator tensors and dtypes NKI devices
  lack are NL-E argument errors naming the parameter.
- `const_key(v)` keys a trace-time constant: two constants share a key only if no trace could tell
  them apart. `fast_key(a)` / `outs_key(outs)` key the cached-launch path (arrays by layout; raise
  TypeError for what that path cannot key, which then takes the general path).
- `out_problem`, `blame_sequence_argument`, `spec_text`, `check_options`: what is wrong with an
  `out=` array, a list passed as a tensor, a declared annotation, a decorator option — in words.
- `call_result(kernel, results, arguments)`: what a call hands back — mutable input parameters the
  kernel wrote are copied into the caller's arrays, and the returned outputs shaped as `return` said.
- `as_returned(kernel, outs)` / `as_root(kernel, k, a)`: an output returned as a whole HBM view
  (`return out.reshape(shape)`, Kernel.output_views) is handed back as that view of its root's array,
  and a caller's `out=` array of the view's shape is viewed as the root (both without copies).
"""
from __future__ import annotations

import difflib
import struct

import numpy as np

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..lang.trace import fn_loc
from ..lang.tensor_spec import TensorSpec


# Decorator options NKI's @nki.jit / nki.baremetal / benchmark / profile accept (both dialects) that
# only steer the Neuron compiler, runtime or framework glue: accepted, recorded in `Kernel.options`,
# otherwise ignored (docs/status.md). Anything else is a misspelling until shown otherwise.

IGNORED_JIT_OPTIONS = frozenset({
    "additional_compile_opt", "show_compiler_tb", "debug_kernel", "experimental_flags", "kernel_return",
    "compile_config", "specialization_config", "save_neff_name", "save_trace_name", "artifacts_dir",
    "enable_out_of_bound_check", "working_directory", "warmup", "iters", "profile_nth", "benchmark_name",
    "overwrite", "num_cores", "enable_cache",
})

# nki_lite's own decorator options (honoured): strict=True turns the one-time copy warning for a
# non-contiguous, unaligned or byte-swapped argument into an error (BAD_INPUTS row 8).

NKI_LITE_JIT_OPTIONS = frozenset({"strict"})


def const_key(v):
    """Cache key of a trace-time constant: two constants share a key only if every trace could not
    tell them apart. `==`/hash is not enough: 0.0 == -0.0, True == 1 == 1.0, NaN != NaN (payloads
    differ too), np.float32(1) == 1.0, and numpy dtypes ignore metadata (tfloat32)."""
    if isinstance(v, np.dtype):
        try:
            return ("dtype", D.name_of(v))
        except D.UnknownDType:
            return ("dtype", v.str, repr(v))
    if isinstance(v, float):                       # bits: signed zeros and NaN payloads stay apart
        return (type(v), struct.pack("<d", v))
    if isinstance(v, complex):
        return (type(v), struct.pack("<dd", v.real, v.imag))
    if isinstance(v, np.generic):                  # numpy scalars: their type and their bytes
        return (type(v), v.tobytes())
    if isinstance(v, (tuple, list, frozenset)):
        items = sorted(map(const_key, v), key=repr) if isinstance(v, frozenset) else map(const_key, v)
        return (type(v), tuple(items))
    if isinstance(v, dict):
        return (type(v), tuple((const_key(k), const_key(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):                  # an array inside a constant: by value, exactly
        return (np.ndarray, v.shape, v.dtype.str, v.tobytes())
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return (type(v), repr(v))


def to_array(name: str, value, loc):
    if isinstance(value, (type, np.generic)):  # dtype classes and numpy scalars are trace-time constants
        return value
    if isinstance(value, (np.ndarray, TensorSpec)):
        arr = value
    elif on_accelerator(value):
        raise errors.make("argument", f"argument '{name}' is on a GPU/accelerator device; move it to the CPU "
                          "first", loc=loc, hint="e.g. tensor.cpu() or jax.device_get(array)")
    elif hasattr(value, "__array__") and not isinstance(value, (list, tuple, int, float, bool, str)):
        arr = np.asarray(value)
    elif hasattr(value, "__dlpack__"):            # CPU tensors that only speak DLPack: no copy
        try:
            arr = np.from_dlpack(value)
        except (TypeError, ValueError, BufferError, RuntimeError) as e:
            raise errors.make("argument", f"argument '{name}' could not be read through DLPack: {e}", loc=loc,
                              hint="pass a numpy array") from None
    else:
        return value
    if isinstance(arr, np.ndarray) and arr.ndim == 0:
        return arr[()]                     # a 0-d array is its scalar: a trace-time constant
    if isinstance(arr, np.ndarray):
        try:
            D.name_of(arr.dtype)
        except D.UnknownDType:
            hint = ("cast with .astype(np.float32)" if arr.dtype.kind == "f" else
                    "cast with .astype(np.int32)" if arr.dtype.kind in "iu" else None)
            raise errors.make("argument", f"argument '{name}' has dtype {arr.dtype}, which NKI devices do not "
                              "support", loc=loc, hint=hint) from None
    return arr


_DLPACK_CPU = 1                                   # DLDeviceType kDLCPU


def on_accelerator(value) -> bool:
    """True for DLPack tensors on a device other than the CPU (also torch's `.device` spelling)."""
    dev = getattr(value, "__dlpack_device__", None)
    if callable(dev):
        try:
            return int(dev()[0]) != _DLPACK_CPU
        except Exception:                          # a malformed device query: let the array paths decide
            return False
    return hasattr(value, "__dlpack__") and "cuda" in str(getattr(value, "device", ""))


def as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def outs_key(outs: tuple | None):
    """Fast-path key part of `out=` arrays (None: no out=); raises TypeError for a non-array."""
    if outs is None:
        return None
    if not all(isinstance(o, np.ndarray) for o in outs):
        raise TypeError("out= holds a non-array")
    return tuple((o.shape, o.dtype, o.strides) for o in outs)


def fast_key(a):
    """Fast-path key of one argument: arrays by layout (the launcher re-checks nothing else, so
    alignment is part of the key), constants exactly as the trace cache keys them."""
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            raise TypeError("a 0-d array is a constant: keyed by value on the general path")
        return (a.shape, a.dtype, a.strides, a.flags.aligned)
    if isinstance(a, (list, dict)):
        raise TypeError("mutable constant")        # the general path keys it by value each call
    return const_key(a)


def out_problem(a, b: ir.Buffer) -> str | None:
    """What is wrong with an `out=` array for buffer b, in words (None: nothing)."""
    if not isinstance(a, np.ndarray):
        return f"is a {type(a).__name__}, not a numpy array"
    want = D.storage(b.dtype)
    if a.dtype != want:
        return f"has dtype {a.dtype} (the output is {b.dtype}, stored as {want})"
    if a.shape != tuple(b.shape):
        return f"has shape {a.shape} (the output's shape is {tuple(b.shape)})"
    if not a.flags.writeable:
        return "is read-only"
    if not a.flags.c_contiguous:
        return f"is not C-contiguous (strides {a.strides})"
    if not a.flags.aligned:
        return "is not aligned to its element size"
    return None


def _numbers(v) -> bool:
    return isinstance(v, (int, float, np.number)) or (isinstance(v, (list, tuple)) and len(v) > 0
                                                       and all(map(_numbers, v)))


def blame_sequence_argument(bound, exc: Exception, loc) -> None:
    """A Python list/tuple of numbers passed where the kernel uses a tensor fails inside the user's
    code with `'list' object has no attribute 'shape'`: say which argument and how to fix it."""
    for name, v in bound.arguments.items():
        if isinstance(v, (list, tuple)) and _numbers(v) and type(v).__name__ in str(exc):
            raise errors.make("argument", f"argument '{name}' is a Python {type(v).__name__}, and the kernel uses "
                              f"it as a tensor ({exc})", loc=loc,
                              hint=f"pass np.asarray({name}, dtype=np.float32) (lists and tuples are trace-time "
                                   "constants)") from exc


def spec_text(spec: TensorSpec) -> str:
    kind = "nt.mutable_tensor" if spec.mutable else "nt.tensor"
    parts = [str(list(spec.shape))] if spec.shape is not None else []
    if spec.dtype is not None:
        try:
            parts.append(D.name_of(spec.dtype))
        except D.UnknownDType:
            parts.append(repr(spec.dtype))
    return f"{kind}[{', '.join(parts)}]"


def check_options(options: dict, fn) -> None:
    """Unknown decorator options are errors with a did-you-mean hint: `@nki.jit(stirct=True)` must
    not silently do nothing."""
    for name in options:
        if name not in IGNORED_JIT_OPTIONS | NKI_LITE_JIT_OPTIONS:
            known = sorted(IGNORED_JIT_OPTIONS | NKI_LITE_JIT_OPTIONS | {"mode", "target", "platform_target"})
            close = difflib.get_close_matches(name, known, n=1)
            raise errors.make("argument", f"unknown @nki.jit option {name}=", loc=fn_loc(fn),
                              hint=(f"did you mean {close[0]}=? " if close else "") +
                              "options: " + ", ".join(known))


def as_returned(kernel: ir.Kernel, outs: tuple) -> tuple:
    """The caller's view of each returned output (Kernel.output_views: reshape / dtype view, no copy)."""
    if not kernel.output_views:
        return outs
    outs = list(outs)
    for k, shape, dtype in kernel.output_views:
        a = outs[k]
        want = D.storage(dtype)
        outs[k] = (a.view(want) if a.dtype != want else a).reshape(shape)
    return tuple(outs)


def call_result(kernel: ir.Kernel, results: dict, arguments: dict):
    """The value of a call whose run left `results` (buffer name -> array): written mutable inputs are
    copied back into the caller's `arguments`, then None, one output or a tuple as the kernel returned."""
    for name in kernel.outputs:
        b = kernel.buffer(name)
        if b.kind == "input" and b.mutable and name in arguments and results[name] is not arguments[name]:
            dst = arguments[name]
            if D.is_packed(b.dtype) and dst.dtype != results[name].dtype:   # an MX x4 array: its storage's bits
                dst = dst.view(results[name].dtype)
            np.copyto(dst, results[name])
    returned = kernel.outputs[:len(kernel.outputs) - len(kernel.written_back)]
    outs = as_returned(kernel, tuple(results[n] for n in returned))
    if kernel.return_kind == "none":
        return None
    if kernel.return_kind == "single":
        return outs[0]
    return outs


def as_root(kernel: ir.Kernel, k: int, a):
    """A caller's out= array for returned output k, viewed as the root buffer the kernel writes (None
    when the array cannot be viewed so without a copy: the caller's out_problem check then names it)."""
    for i, _, _ in kernel.output_views:
        if i == k and isinstance(a, np.ndarray) and a.flags.c_contiguous:
            root = kernel.buffer(kernel.outputs[k])
            want = D.storage(root.dtype)
            try:
                return (a.view(want) if a.dtype != want else a).reshape(root.shape)
            except ValueError:
                return a
    return a
