"""The one launch path of a compiled kernel: argument buffers in, outputs allocated and prefilled as
the launch plan says, native code run serially, on threads or interruptibly as the plan says.

Contract:
- `Launch(native, plan, kernel)`; `output(name, provided=None)` is the array output `name` is
  written into (new — from runtime/outpool.py: large outputs reuse the pages of dead ones — or the
  caller's `out=` array), NaN-filled when the plan says it may not be
  fully written; `buffers(arrays)` orders inputs by name into the native argument list, adding
  constants and new outputs; `run(bufs, threads)` runs one call with at most `threads` threads.
- `launch(arrays)` = buffers + run with NKI_LITE_NUM_THREADS read now: outputs by name (what
  `CompiledKernel.launch` returns). `runner(threads)` is `run` with the plan's decisions taken
  once. Kernel calls use the same `output` and `runner`, first and cached calls alike
  (runtime/fastpath.py).
- Serial calls run on the calling thread — except long-running ones (plan.long_running) made from
  the main thread, which run on a pool thread so Ctrl-C reaches the caller (threads.on_pool).
  Parallel calls run the prologue here, contiguous chunks of programs on `threads` pool threads
  that claim them in order (each thread with its own private buffers and this thread's shared
  ones, lower/parallel.py), the epilogue here.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .. import hostmem
from ..core import dtypes as D
from ..core import ir
from . import outpool
from . import threads as TH
from .machine import fill_uninit


class Launch:
    def __init__(self, native, plan, kernel: ir.Kernel):
        self.native, self.plan, self.kernel = native, plan, kernel
        bufs = kernel.buffer_map
        self.consts = {name: np.ascontiguousarray(data.array) for name, data in kernel.consts}
        self.out_specs = {name: (bufs[name].shape, D.storage(bufs[name].dtype), bufs[name].dtype)
                          for name in plan.arg_buffers if bufs[name].kind == "output"}
        self.dispatcher = TH.Dispatcher(native)

    def output(self, name: str, provided: np.ndarray | None = None) -> np.ndarray:
        shape, storage, dtype = self.out_specs[name]
        if provided is None:
            try:
                a = outpool.empty(shape, storage)         # recycled pages: no first-touch faults
            except (MemoryError, ValueError):            # NL-E403 naming the output's line
                a = hostmem.empty(shape, storage, f"output '{name}' {shape} ({dtype})", self.kernel.buffer(name).loc)
        else:
            a = provided
        if name in self.plan.prefill:      # unwritten output elements read as NaN / sentinel, like the interpreter
            fill_uninit(a, dtype)
        return a

    def buffers(self, arrays: dict[str, np.ndarray]) -> tuple[list, dict]:
        """(native argument list, outputs by name) for inputs / provided outputs by name."""
        args, outs = [], {}
        for name in self.plan.arg_buffers:
            if name in self.out_specs:
                a = outs[name] = self.output(name, arrays.get(name))
            elif name in self.consts and name not in arrays:
                a = self.consts[name]
            else:
                a = arrays[name]
            args.append(a)
        for name in self.kernel.outputs:
            if name not in outs:
                outs[name] = arrays[name]
        return args, outs

    def launch(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args, outs = self.buffers(arrays)
        self.run(args, TH.available())
        return outs

    def run(self, args: list, available: int) -> None:
        self.runner(available)(args)

    def runner(self, available: int):
        """`run(args)` for a budget of `available` threads: the plan's decisions taken once (a cached
        call's launcher keeps it; runtime/fastpath.py)."""
        plan, native = self.plan, self.native
        threads = plan.threads(available)
        # regions: dispatched from any call but a worker's running programs; not worth it on one thread
        dispatch = self.dispatcher.address if available > 1 else 0
        if threads > 1:
            return functools.partial(self._parallel, threads=threads, dispatch=dispatch)
        n, run, checked = plan.n_programs, native.run, native.checked
        if plan.long_running:
            def serial(args):
                if threading.current_thread() is threading.main_thread():
                    TH.on_pool(native, args, [(0, n, 7, None, dispatch)])   # Ctrl-C reaches this thread
                else:
                    checked(run(args, 0, n, 0, 7, None, dispatch))
        else:
            def serial(args):
                checked(run(args, 0, n, 0, 7, None, dispatch))
        return serial

    def _parallel(self, args: list, threads: int, dispatch: int) -> None:
        native = self.native
        native.checked(native.run(args, 0, 0, 0, phases=1, dispatch=dispatch))
        shared = native.scratch().ptrs[0]
        TH.on_pool(native, args, [(lo, hi, 2, shared, 0) for lo, hi in self.plan.program_chunks(threads)], threads)
        native.checked(native.run(args, 0, 0, 0, phases=4, dispatch=dispatch))
