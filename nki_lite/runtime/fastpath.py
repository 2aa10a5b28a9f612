"""The cached-call launcher: a repeated kernel call with the same argument signature skips binding,
trace-cache and compile-cache look-ups (a few microseconds of Python) and goes straight to the
compiled kernel's launch path.

Contract:
- `cached_launcher(kern, kernel, ck, bound, args, outs)` returns a `CachedLauncher` for calls with
  exactly these positional arguments' layouts (and `out=` arrays' layouts, which the general path
  has validated once), or None when such calls need the general path (mutable or tfloat32 inputs,
  arguments that are not C-contiguous aligned arrays of the storage dtype, keywords).
- `launcher(call_args, out_arrays)` builds the native argument list and runs it through the same
  `Launch.output` / `Launch.runner` as the first call (runtime/launch.py): one launch path. It is valid
  for the knob snapshot `launcher.stamp` (runtime/knobs.py) it was made under, which the caller
  keys it by; the thread count comes from that snapshot. Per call it still checks what the key does
  not cover: out= arrays writable, aligned and not overlapping an argument (else the general path
  raises the right error).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as D
from ..core import ir
from . import knobs
from . import threads as TH


class CachedLauncher:
    def __init__(self, kern, kernel: ir.Kernel, ck, sources: list, threads: int, stamp: tuple):
        self.kern, self.sources, self.stamp = kern, sources, stamp
        self.output, self.run = ck.launcher.output, ck.launcher.runner(threads)
        self.kind = kernel.return_kind
        self.out_index = [ck.plan.arg_buffers.index(n) for n in kernel.outputs]

    def __call__(self, call_args: tuple, out_arrays: tuple | None = None):
        if out_arrays is not None and not all(
                o.flags.writeable and o.flags.aligned and not any(
                    isinstance(a, np.ndarray) and np.may_share_memory(o, a) for a in call_args)
                for o in out_arrays):
            return self.kern(*call_args, out=out_arrays if len(out_arrays) > 1 else out_arrays[0], mode="jit")
        bufs = []
        for how, what in self.sources:
            if how == "arg":
                bufs.append(call_args[what])
            elif how == "const":
                bufs.append(what)
            else:
                name, k = what
                bufs.append(self.output(name, None if out_arrays is None else out_arrays[k]))
        self.run(bufs)
        if self.kind == "single":
            return bufs[self.out_index[0]]
        if self.kind == "none":
            return None
        return tuple(bufs[i] for i in self.out_index)


def cached_launcher(kern, kernel: ir.Kernel, ck, bound, args: tuple, outs: tuple | None) -> CachedLauncher | None:
    names = list(kern.signature.parameters)
    if len(args) != len(bound.arguments) or names[:len(args)] != list(bound.arguments):
        return None
    if kernel.output_views:
        return None                             # outputs returned as views: the general path reshapes them
    pos = {n: i for i, n in enumerate(names)}
    order = [n for n in kernel.outputs if kernel.buffer(n).kind == "output"]    # out= order
    if outs is not None and len(outs) != len(order):
        return None
    sources = []
    for name in ck.plan.arg_buffers:
        b = kernel.buffer(name)
        if b.kind == "input":
            if b.mutable or b.dtype == "tfloat32":
                return None                     # writes back / needs value checks: general path
            a = args[pos[name]]
            if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.aligned
                    and a.dtype == D.storage(b.dtype)):
                return None
            sources.append(("arg", pos[name]))
        elif b.kind == "const":
            sources.append(("const", ck.launcher.consts[name]))
        else:
            sources.append(("out", (name, order.index(name))))
    stamp = knobs.stamp()
    try:
        threads = TH.threads_for(int(stamp[knobs.NUM_THREADS] or 0))
    except ValueError:
        return None                             # a malformed knob: the general path says so
    return CachedLauncher(kern, kernel, ck, sources, threads, stamp)
