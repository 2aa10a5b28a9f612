"""The JIT driver: compile a traced kernel through LLVM once per signature and launch it cheaply.

Contract:
- `compiled_for(kernel_ir, debug)` returns a `CompiledKernel` from a process-wide bounded LRU
  (`NKI_LITE_JIT_CACHE_SIZE`) keyed by the printed IR + consts + debug flag + opt level; evicted
  entries are dropped and their machine code is freed once no launch holds them (a launch keeps a
  reference). `lookup(kernel_ir, debug)` is the same but says where the kernel came from:
  "memory", "disk" or "compile"; `CACHE.compiles` / `CACHE.disk_hits` count the last two.
- On an in-memory miss the per-user disk cache (runtime/diskcache.py, docs/jit_cache.md) is
  consulted: a hit loads the stored object code and the metadata a CompiledKernel needs (argument
  buffers, arena size, print flag, error sites as indices into `ir.walk` order, loop names), with no
  LLVM IR generation or compilation. After a compile the object code is written there. Codegen is
  imported only when something is compiled.
- `CompiledKernel.launch(arrays)` runs the native function on numpy arrays (the caller's buffers,
  C-contiguous, storage dtypes) and returns the output arrays by buffer name. A runtime error
  (status != 0) raises the same NkiLiteError the interpreter raises, naming the kernel line.
- Arguments reach native code as Python objects: a generated trampoline reads each ndarray's data
  pointer (PyArrayObject.data, checked at start-up against ctypes), which keeps a launch to a few
  microseconds. If that layout check fails, pointers are passed through ctypes instead.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections import OrderedDict
from concurrent.futures import TimeoutError as _FutureTimeout
from dataclasses import dataclass

import numpy as np

from .. import config, errors, hostmem
from ..core import dtypes as D
from ..core import ir
from ..lower.llvm import target as T
from ..lower.llvm.abi import STATUS_PROG_HI as _PROG_HI
from ..lower.llvm.abi import STATUS_PROG_LO as _PROG_LO
from ..lower.llvm.abi import STATUS_LOOP_WORDS, STATUS_LOOPS
from ..lower.llvm.rules_indirect import ERR_INDIRECT as _ERR_INDIRECT
from ..lower.llvm.abi import STATUS_DISPATCH as _DISPATCH
from ..lower.llvm.abi import STATUS_PHASES as _PHASES
from ..lower.llvm.abi import STATUS_REGION_ARENA as _RARENA
from ..lower.llvm.abi import STATUS_REGION_ARGS as _RARGS
from ..lower.llvm.abi import STATUS_REGION_ENV as _RENV
from ..lower.llvm.abi import STATUS_PRIVATE_ARENA as _PARENA
from ..lower.llvm.abi import STATUS_STOP as _STOP
from . import diskcache as DC
from .interpreter import fill_uninit

_PRINT_CB = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
_DISPATCH_CB = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p)
_ERROR_WORDS = STATUS_LOOPS + STATUS_LOOP_WORDS          # what a failing region chunk reports
_DATA_OFFSET: int | None = None


def _array_data_offset() -> int | None:
    """Byte offset of the data pointer in a PyArrayObject, verified on live arrays (None if unknown)."""
    global _DATA_OFFSET
    if _DATA_OFFSET is None:
        off = 2 * ctypes.sizeof(ctypes.c_void_p)        # after PyObject_HEAD (refcount, type)
        ok = True
        for a in (np.zeros(3, np.float32), np.ones((2, 5), np.int8)[:, 1:]):
            ptr = ctypes.c_void_p.from_address(id(a) + off).value
            ok &= ptr == a.ctypes.data
        _DATA_OFFSET = off if ok else -1
    return _DATA_OFFSET if _DATA_OFFSET >= 0 else None


def _trampoline(n_args: int, offset: int) -> str:
    """`i32 @nkl_call_py(ptr obj0, ..., ptr arena, ptr status, ptr cb)`: load each array's data
    pointer from the PyArrayObject and call @nkl_kernel."""
    params = ", ".join([f"ptr %o{i}" for i in range(n_args)] + ["ptr %arena", "ptr %status", "ptr %cb"])
    lines = [f"define i32 @nkl_call_py({params}) {{", "entry:",
             f"  %args = alloca [{max(1, n_args)} x ptr], align 8"]
    for i in range(n_args):
        lines += [f"  %f{i} = getelementptr inbounds i8, ptr %o{i}, i64 {offset}",
                  f"  %d{i} = load ptr, ptr %f{i}, align 8",
                  f"  %s{i} = getelementptr inbounds [{max(1, n_args)} x ptr], ptr %args, i64 0, i64 {i}",
                  f"  store ptr %d{i}, ptr %s{i}, align 8"]
    lines += ["  %r = call i32 @nkl_kernel(ptr %args, ptr %arena, ptr %status, ptr %cb)", "  ret i32 %r", "}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LoadedGen:
    """The parts of codegen's `Generated` a CompiledKernel uses, rebuilt from a disk-cache entry."""
    arg_buffers: tuple[str, ...]
    arena_bytes: int
    sites: tuple[ir.Instr, ...]
    loop_names: tuple[tuple[str, ...], ...]
    needs_print: bool = False
    region_trips: tuple[int, ...] = ()
    text: str = ""                      # not stored: CompiledKernel.module.llvm_ir regenerates on demand


def _source_text(kernel: ir.Kernel, debug: bool):
    """(Generated, LLVM IR text with the trampoline, has_trampoline)."""
    from .. import gcpause
    from ..lower.llvm.codegen import generate
    with gcpause.paused():
        gen = generate(kernel, debug)
    offset = _array_data_offset()
    text = gen.text + (_trampoline(len(gen.arg_buffers), offset) if offset is not None else "")
    return gen, text, offset is not None


LONG_RUNNING_ELEMENTS = 1 << 24     # ~10 ms of simple elementwise work on one core


_CPUS = os.cpu_count() or 1       # os.cpu_count() costs microseconds: read once


def _num_threads() -> int:
    n = config.get("NKI_LITE_NUM_THREADS")
    return n if n > 0 else _CPUS


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    """The process's worker threads (native code releases the GIL); re-created after fork."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor
            n = max(2, _CPUS)
            pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="nki_lite")
            # start every thread now: the executor creates threads lazily and counts a busy one as
            # idle after its first task, so work submitted from inside a running task (a parallel
            # region's helpers, dispatched by a kernel already on the pool) could find no thread
            everyone = threading.Barrier(n, timeout=10)
            for f in [pool.submit(everyone.wait) for _ in range(n)]:
                try:
                    f.result()
                except threading.BrokenBarrierError:     # threads slow to start: they start lazily
                    pass
            _POOL = pool
        return _POOL


def _reset_pool_after_fork() -> None:
    global _POOL, _POOL_LOCK
    _POOL = None
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_after_fork)


class CompiledKernel:
    """A kernel's machine code and launch logic. `CompiledKernel(kernel, debug)` compiles;
    `CompiledKernel.from_entry(...)` adopts object code loaded from the disk cache."""

    def __init__(self, kernel: ir.Kernel, debug: bool, opt: int | None = None):
        from ..lower.llvm.codegen import STATUS_LOOPS, STATUS_WORDS
        self.kernel = kernel
        self.debug = debug
        self.opt = config.get("NKI_LITE_JIT_OPT") if opt is None else opt
        self.gen, text, tramp = _source_text(kernel, debug)
        self.module = T.compile_object(text, f"nkl_{kernel.name}", opt=self.opt)
        self._finish(tramp, STATUS_WORDS, STATUS_LOOPS, from_disk=False)

    @classmethod
    def from_entry(cls, kernel: ir.Kernel, debug: bool, opt: int, meta: dict, obj: bytes) -> "CompiledKernel":
        """Adopt a disk-cache entry (metadata already checked by `entry_problem`)."""
        self = cls.__new__(cls)
        self.kernel = kernel
        self.debug = debug
        self.opt = opt
        instrs = [i for i, _ in ir.walk(kernel.body)]
        self.gen = LoadedGen(tuple(meta["arg_buffers"]), int(meta["arena_bytes"]),
                             tuple(instrs[k] for k in meta["sites"]), tuple(tuple(n) for n in meta["loop_names"]),
                             bool(meta["needs_print"]), tuple(meta["region_trips"]))
        self.module = T.load_object(obj, f"nkl_{kernel.name}", opt, source=lambda: _source_text(kernel, debug)[1])
        self._finish(bool(meta["trampoline"]), int(meta["status_words"]), int(meta["status_loops"]), from_disk=True)
        return self

    def _finish(self, tramp: bool, status_words: int, status_loops: int, from_disk: bool) -> None:
        kernel = self.kernel
        self.from_disk = from_disk
        self.status_words, self.status_loops = status_words, status_loops
        self.timings = self.module.timings
        n = len(self.gen.arg_buffers)
        if tramp:
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.py_object] * n), ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p)
            self._call_py = proto(self.module.address("nkl_call_py"))
        else:
            self._call_py = None
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self._call = proto(self.module.address("nkl_kernel"))
        self._local = threading.local()
        bufs = kernel.buffer_map
        self.outputs = tuple(n for n in kernel.outputs)
        self.out_specs = [(name, bufs[name].shape, D.storage(bufs[name].dtype), bufs[name].dtype)
                          for name in self.gen.arg_buffers if bufs[name].kind == "output"]
        self.consts = {name: np.ascontiguousarray(data.array) for name, data in kernel.consts}
        self._print_cb = _PRINT_CB(self._on_print) if self.gen.needs_print else None
        self._print_ptr = ctypes.cast(self._print_cb, ctypes.c_void_p).value if self._print_cb else None
        self._regions = [proto(self.module.address(f"nkl_region_{k}")) if trip else None
                         for k, trip in enumerate(self.gen.region_trips)]
        self._dispatch_cb = _DISPATCH_CB(self._dispatch) if any(self._regions) else None
        self._dispatch_ptr = ctypes.cast(self._dispatch_cb, ctypes.c_void_p).value if self._dispatch_cb else 0

    # ---- per-thread scratch
    def _scratch(self):
        loc = self._local
        arena = getattr(loc, "arena", None)
        if arena is None:
            loc.arena = arena = hostmem.empty(max(64, self.gen.arena_bytes), np.uint8,
                                              f"the JIT arena of kernel '{self.kernel.name}' (its tiles)",
                                              self.kernel.loc)
            loc.status = np.zeros(self.status_words, dtype=np.int64)
            loc.ptrs = (arena.ctypes.data, loc.status.ctypes.data)
        return loc

    def launch(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """arrays: inputs by name (C-contiguous, storage dtype). Returns outputs by name."""
        args = []
        outs = {}
        for name in self.gen.arg_buffers:
            a = arrays.get(name)
            if a is None:
                if name in self.consts:
                    a = self.consts[name]
                else:
                    a = next(self._new_output(s) for s in self.out_specs if s[0] == name)
                    outs[name] = a
            args.append(a)
        for name in self.outputs:
            if name not in outs:
                outs[name] = arrays[name]
        self.call(args)
        return outs

    def _new_output(self, spec):
        name, shape, storage, dtype = spec
        a = hostmem.empty(shape, storage, f"output '{name}' {shape} ({dtype})", self.kernel.buffer(name).loc)
        if self.prefill[name]:         # unwritten output elements read as NaN / sentinel, like the interpreter
            fill_uninit(a, dtype)
        return a

    @functools.cached_property
    def prefill(self) -> dict[str, bool]:
        """Outputs to NaN-fill before a launch: all in debug mode, else those not proven fully written."""
        from ..lower import analysis
        return {name: self.debug or not analysis.of(self.kernel).fully_written(name) for name in self.kernel.outputs}

    @functools.cached_property
    def n_programs(self) -> int:
        """SPMD instances, or the iterations of a kernel that is a single affine_range loop."""
        from ..lower import analysis
        return int(np.prod(analysis.of(self.kernel).program_space[1] or (1,)))

    @functools.cached_property
    def parallel(self) -> bool:
        """May the SPMD programs run on several threads without changing a bit? (lower/parallel.py)"""
        from ..lower import analysis
        return not self.gen.needs_print and analysis.of(self.kernel).programs_independent

    def _run(self, args, lo: int, hi: int, stop_addr: int, phases: int = 7,
             shared: int | None = None) -> tuple[int, np.ndarray]:
        """One native call on this thread: `phases` (1 prologue, 2 programs [lo, hi), 4 epilogue);
        `shared` is the arena holding the shared on-chip buffers (another thread's; None: this
        thread's own, which then also holds the private ones)."""
        loc = self._scratch()
        own_arena, status_ptr = loc.ptrs
        st = loc.status
        st[_PROG_LO], st[_PROG_HI], st[_STOP], st[_PHASES] = lo, hi, stop_addr, phases
        # regions: not from a worker running programs, and not worth a dispatch on one thread
        st[_DISPATCH] = self._dispatch_ptr if self._dispatch_ptr and phases != 2 and _num_threads() > 1 else 0
        if shared is None:
            arena_ptr, st[_PARENA] = own_arena, 0
        else:
            arena_ptr, st[_PARENA] = shared, own_arena
        if self._call_py is not None:
            rc = self._call_py(*args, arena_ptr, status_ptr, self._print_ptr)
        else:
            arr = (ctypes.c_void_p * max(1, len(args)))(*[a.ctypes.data for a in args])
            rc = self._call(ctypes.addressof(arr), arena_ptr, status_ptr, self._print_ptr)
        return rc, st

    @functools.cached_property
    def long_running(self) -> bool:
        """Does a call do enough work (> LONG_RUNNING_ELEMENTS element-steps: output elements of every
        instruction times its loop trips and grid, M*N*K for matmuls) that Ctrl-C must be able to
        stop it? Such a call runs on a pool thread while the calling thread waits interruptibly
        (tens of microseconds more per call); the native code checks the stop flag at every program
        and loop iteration."""
        grid = int(np.prod(self.kernel.grid or (1,)))
        work = 0
        for instr, loops in ir.walk(self.kernel.body):
            if instr.op == "alloc" or not instr.outs:
                continue
            n = int(np.prod(instr.out.shape))
            if instr.op == "nc_matmul" and isinstance(instr.ins[0], ir.Access):
                n *= instr.ins[0].shape[0]
            work += n * grid * int(np.prod([lp.trip for lp in loops] or [1]))
        return work > LONG_RUNNING_ELEMENTS

    def call(self, args: list[np.ndarray]) -> None:
        n = self.n_programs
        threads = min(n, _num_threads()) if n > 1 else 1
        if threads > 1 and self.parallel:
            return self._call_parallel(args, threads)
        if self.long_running and threading.current_thread() is threading.main_thread():
            return self._on_pool(args, [(0, n, 7, None)])    # interruptible: Ctrl-C reaches this thread
        self._checked(self._run(args, 0, n, 0))

    def _checked(self, result) -> None:
        rc, st = result
        if rc == 2:
            raise KeyboardInterrupt                      # a region's dispatcher saw Ctrl-C
        if rc:
            raise self._error(st.copy())

    # ---- parallel regions (lower/parallel.py `regions`, abi.py)
    def _region_scratch(self):
        """A second per-thread status + arena: a thread running region chunks may be the one whose
        `_scratch` is in use by the suspended kernel call that dispatched them."""
        loc = self._local
        if getattr(loc, "rarena", None) is None:
            loc.rarena = hostmem.empty(max(64, self.gen.arena_bytes), np.uint8,
                                       f"the JIT arena of kernel '{self.kernel.name}' (its tiles)", self.kernel.loc)
            loc.rstatus = np.zeros(self.status_words, dtype=np.int64)
        return loc.rarena, loc.rstatus

    def _dispatch(self, region: int, status_addr: int) -> int:
        """Called by the native kernel at region `region`: run its iterations in chunks on the calling
        thread and pool helpers (chunks are claimed, so a queued helper that never starts is simply
        cancelled: no thread ever waits for unstarted work). Returns 0, 1 (the first failing chunk's
        error copied into the caller's status) or 2 (stopped: another error or Ctrl-C)."""
        try:
            main = np.ctypeslib.as_array((ctypes.c_int64 * self.status_words).from_address(status_addr))
            trip, fn = self.gen.region_trips[region], self._regions[region]
            env = main[_RENV:_RENV + 8].copy()
            args, shared, stop_addr = int(main[_RARGS]), int(main[_RARENA]), int(main[_STOP])
            stop = None
            if stop_addr == 0:
                stop = np.zeros(1, dtype=np.int64)
                stop_addr = stop.ctypes.data
            flag = np.ctypeslib.as_array((ctypes.c_int64 * 1).from_address(stop_addr))
            nchunks = max(1, min(trip, _num_threads()))
            bounds = [(trip * t // nchunks, trip * (t + 1) // nchunks) for t in range(nchunks)]
            results: list = [None] * nchunks
            claim = iter(range(nchunks))
            lock = threading.Lock()

            def participant():
                while True:
                    with lock:
                        t = next(claim, None)
                    if t is None:
                        return
                    arena, st = self._region_scratch()
                    st[_PROG_LO], st[_PROG_HI] = bounds[t]
                    st[_STOP], st[_PARENA], st[_DISPATCH] = stop_addr, arena.ctypes.data, 0
                    st[_RENV:_RENV + 8] = env
                    rc = fn(args, shared, st.ctypes.data, None)
                    if rc:
                        if rc == 1:
                            flag[0] = 1
                        results[t] = (rc, st.copy())
            helpers = [_pool().submit(participant) for _ in range(nchunks - 1)]
            try:
                participant()
            except KeyboardInterrupt:                    # Ctrl-C between chunks: stop the helpers
                flag[0] = 1
            for h in helpers:                            # running helpers end at their next iteration
                while not h.cancel():
                    try:
                        h.result()
                        break
                    except KeyboardInterrupt:
                        flag[0] = 1
            failed = [r for r in results if r is not None and r[0] == 1]
            if failed:
                main[:_ERROR_WORDS] = failed[0][1][:_ERROR_WORDS]
                return 1
            return 2 if any(r is not None for r in results) or flag[0] else 0
        except BaseException:                            # never let an exception cross the C boundary
            return 2

    def _call_parallel(self, args, threads: int) -> None:
        """Prologue on this thread; contiguous chunks of programs on the pool, each thread with its
        own private buffers and this thread's shared ones (lower/parallel.py); then the epilogue."""
        n = self.n_programs
        self._checked(self._run(args, 0, 0, 0, phases=1))
        shared = self._scratch().ptrs[0]
        self._on_pool(args, [(n * t // threads, n * (t + 1) // threads, 2, shared) for t in range(threads)])
        self._checked(self._run(args, 0, 0, 0, phases=4))

    def _on_pool(self, args, jobs: list) -> None:
        """Run (lo, hi, phases, shared) jobs on the pool while this thread waits interruptibly; the first
        error sets the shared stop flag so the other jobs end at their next program or loop iteration,
        and is raised; Ctrl-C does the same and re-raises."""
        stop = np.zeros(1, dtype=np.int64)

        def work(lo, hi, phases, shared):
            rc, st = self._run(args, lo, hi, stop.ctypes.data, phases, shared)
            if rc == 1:
                stop[0] = 1
                return lo, st.copy()
            return None
        futures = [_pool().submit(work, *job) for job in jobs]
        results = []
        try:
            for f in futures:
                while True:
                    try:
                        results.append(f.result(timeout=0.2))
                        break
                    except _FutureTimeout:
                        continue
        except KeyboardInterrupt:
            stop[0] = 1
            for f in futures:
                f.exception()
            raise
        failed = sorted((r for r in results if r is not None), key=lambda r: r[0])
        if failed:
            raise self._error(failed[0][1])

    # ---- runtime errors and printing
    def _env_text(self, status: np.ndarray, site: int) -> str:
        names = self.gen.loop_names[site]
        lo = self.status_loops
        vals = {n: int(status[lo + k]) for k, n in enumerate(names[:self.status_words - lo])}
        return ", ".join(f"{k}={v}" for k, v in sorted(vals.items()))

    def _error(self, status: np.ndarray) -> Exception:
        code, site, operand, dim, lo, hi = (int(x) for x in status[:6])
        instr = self.gen.sites[site]
        accesses = [a for a in (list(instr.outs) + list(instr.ins)) if isinstance(a, ir.Access)]
        acc = accesses[min(operand, len(accesses) - 1)] if accesses else None
        buf = self.kernel.buffer(acc.buffer) if acc is not None else None
        where = self._env_text(status, site)
        if code == _ERR_INDIRECT and buf is not None:      # lower/llvm/rules_indirect.py
            from .interpret_rules_indirect import oob_message
            el = tuple(int(x) for x in np.unravel_index(hi, instr.outs[0].shape))   # hi: the tile element
            return errors.make("indirect_out_of_bounds", oob_message(buf, dim, lo, el, where), loc=instr.loc)
        shape = buf.shape if buf is not None else ()
        lim = shape[dim] if dim < len(shape) else 0
        return errors.make("out_of_bounds",
                           f"access to '{buf.name if buf else '?'}' (shape {shape}) on dimension {dim}: index range "
                           f"[{lo}, {hi}] exceeds [0, {lim - 1}]" + (f" when {where}" if where else ""),
                           loc=instr.loc)

    def _on_print(self, site: int, data: int) -> None:
        instr = self.gen.sites[site]
        acc = instr.ins[0]
        dt = self.kernel.buffer(acc.buffer).dtype
        n = int(np.prod(acc.shape))
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * (n * D.itemsize(dt))).from_address(data))
        v = raw.view(D.storage(dt)).reshape(acc.shape).copy()
        status = self._local.status
        where = self._env_text(status, site)
        print(f"{instr.attr('prefix')}{' [' + where + ']' if where else ''}\n{v}")

    # ---- the disk cache's view
    def entry_meta(self) -> dict | None:
        """JSON-able metadata for a disk-cache entry (None if a site is not an instruction of the
        kernel, which would make the entry unusable)."""
        instrs = [i for i, _ in ir.walk(self.kernel.body)]
        by_id = {id(x): k for k, x in enumerate(instrs)}
        sites = []
        for s in self.gen.sites:
            k = by_id.get(id(s))
            if k is None:
                try:
                    k = instrs.index(s)          # an equal instruction prints and reports identically
                except ValueError:
                    return None
            sites.append(k)
        return {"kernel": self.kernel.name, "n_instrs": len(instrs), "arg_buffers": list(self.gen.arg_buffers),
                "arena_bytes": int(self.gen.arena_bytes), "needs_print": bool(self.gen.needs_print),
                "region_trips": [int(t) for t in self.gen.region_trips],
                "sites": sites, "loop_names": [list(n) for n in self.gen.loop_names],
                "trampoline": self._call_py is not None, "status_words": self.status_words,
                "status_loops": self.status_loops, "opt": self.opt, "debug": bool(self.debug),
                "compile_ms": {k: round(v, 3) for k, v in self.timings.items()}}


def entry_problem(meta: dict, kernel: ir.Kernel, debug: bool, opt: int) -> str | None:
    """Why an entry's metadata cannot belong to this kernel (None if it fits)."""
    try:
        n = sum(1 for _ in ir.walk(kernel.body))
        bufs = kernel.buffer_map
        args = meta["arg_buffers"]
        if meta["kernel"] != kernel.name or meta["n_instrs"] != n:
            return "kernel name or instruction count differs"
        if meta["debug"] is not bool(debug) or meta["opt"] != opt:
            return "debug flag or opt level differs"
        if not isinstance(args, list) or len(set(args)) != len(args) or not all(
                isinstance(a, str) and a in bufs and bufs[a].kind in ("input", "output", "const") for a in args):
            return "argument buffers do not match the kernel"
        sites, names = meta["sites"], meta["loop_names"]
        if not all(type(k) is int and 0 <= k < n for k in sites) or len(names) != len(sites) \
                or not all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in names):
            return "error sites do not match the kernel"
        if type(meta["arena_bytes"]) is not int or not 0 <= meta["arena_bytes"] < 1 << 40:
            return "bad arena size"
        sw, sl = meta["status_words"], meta["status_loops"]
        if type(sw) is not int or type(sl) is not int or not 0 < sl < sw <= 4096:
            return "bad status layout"
        if not isinstance(meta["needs_print"], bool) or not isinstance(meta["trampoline"], bool):
            return "bad flags"
        trips = meta["region_trips"]
        if not isinstance(trips, list) or not all(type(t) is int and 0 <= t < 1 << 40 for t in trips):
            return "bad parallel regions"
        if meta["trampoline"] != (_array_data_offset() is not None):
            return "trampoline does not match this process"
        return _layout_problem(meta, kernel, debug)
    except (KeyError, TypeError):
        return "metadata fields missing or mistyped"


def _layout_problem(meta: dict, kernel: ir.Kernel, debug: bool) -> str | None:
    """The fields native code relies on must be exactly what this kernel's code generator lays out
    (lower/llvm/codegen.py `layout_of`: argument order, arena size, status words, regions, print flag):
    an entry that passes every other check but disagrees here would run with a too-small arena or
    swapped argument pointers."""
    from ..lower.llvm.abi import STATUS_LOOPS as _SL
    from ..lower.llvm.abi import STATUS_WORDS as _SW
    from ..lower.llvm.codegen import layout_of
    from ..lower.parallel import regions
    args, arena = layout_of(kernel, debug)
    if list(meta["arg_buffers"]) != list(args):
        return "argument buffers differ from this kernel's"
    if meta["arena_bytes"] != arena:
        return f"arena size {meta['arena_bytes']} differs from this kernel's {arena}"
    if (meta["status_words"], meta["status_loops"]) != (_SW, _SL):
        return "status layout differs from this nki_lite's"
    if meta["needs_print"] != any(i.op == "device_print" for i, _ in ir.walk(kernel.body)):
        return "print flag differs from this kernel's"
    loops = regions(kernel)
    if len(meta["region_trips"]) != len(loops) or any(
            t not in (0, lp.trip) for t, lp in zip(meta["region_trips"], loops)):
        return "parallel regions differ from this kernel's"
    return None


def disk_key(kernel: ir.Kernel, ir_text: str, debug: bool, opt: int) -> str:
    consts = [(name, DC.array_digest(data.array)) for name, data in kernel.consts]
    return DC.entry_key(ir_text, consts, debug, opt, T.host_info(), extra={"data_offset": _array_data_offset()})


def _from_disk(kernel: ir.Kernel, ir_text: str, debug: bool, opt: int) -> tuple[CompiledKernel | None, str | None]:
    """(kernel loaded from the disk cache or None, key to store under or None when the cache is off)."""
    if not DC.enabled():
        return None, None
    key = disk_key(kernel, ir_text, debug, opt)
    entry = DC.load(key)
    if entry is None:
        return None, key
    meta, obj = entry
    why = entry_problem(meta, kernel, debug, opt)
    if why is not None:
        DC.reject(key, why)
        return None, key
    try:
        return CompiledKernel.from_entry(kernel, debug, opt, meta, obj), key
    except (ValueError, KeyError) as e:           # not an object file / a function missing from it
        DC.reject(key, f"object code unusable: {e}")
        return None, key


def _to_disk(ck: CompiledKernel, key: str) -> None:
    obj, ck.module.object_code = ck.module.object_code, None     # the engine holds its own copy
    meta = ck.entry_meta()
    if obj is not None and meta is not None:
        DC.store(key, meta, obj)


# ---------------------------------------------------------------- the process-wide cache

class _Cache:
    def __init__(self):
        self.entries: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.key_locks: dict = {}
        self.compiles = 0        # LLVM compiles in this process
        self.disk_hits = 0       # kernels loaded from the disk cache instead

    def lookup(self, kernel: ir.Kernel, debug: bool) -> tuple[CompiledKernel, str]:
        """(compiled kernel, "memory" | "disk" | "compile")."""
        text = ir.format(kernel)
        opt = config.get("NKI_LITE_JIT_OPT")
        key = (text, tuple(kernel.consts), debug, opt)
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None:
                self.entries.move_to_end(key)
                return hit, "memory"
            klock = self.key_locks.setdefault(key, threading.Lock())
        with klock:                                   # one compile per key, however many threads ask
            with self.lock:
                hit = self.entries.get(key)
                if hit is not None:
                    return hit, "memory"
            try:
                ck, dkey = _from_disk(kernel, text, debug, opt)
            except Exception as e:                    # noqa: BLE001 - the cache must never fail a call
                DC.warn_once("load-error", type(e).__name__, f"nki_lite JIT disk cache: lookup failed ({e!r}); "
                             "compiling")
                ck, dkey = None, None
            source = "disk"
            if ck is None:
                ck = CompiledKernel(kernel, debug, opt)
                source = "compile"
                if dkey is not None:
                    try:
                        _to_disk(ck, dkey)
                    except Exception as e:            # noqa: BLE001
                        DC.warn_once("store-error", type(e).__name__,
                                     f"nki_lite JIT disk cache: store failed ({e!r})")
            with self.lock:
                if source == "compile":
                    self.compiles += 1
                else:
                    self.disk_hits += 1
                self.entries[key] = ck
                self.key_locks.pop(key, None)
                while len(self.entries) > config.get("NKI_LITE_JIT_CACHE_SIZE"):
                    self.entries.popitem(last=False)
            return ck, source

    def get(self, kernel: ir.Kernel, debug: bool) -> tuple[CompiledKernel, bool]:
        ck, source = self.lookup(kernel, debug)
        return ck, source == "compile"

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


CACHE = _Cache()


def compiled_for(kernel: ir.Kernel, debug: bool = False) -> tuple[CompiledKernel, bool]:
    """(compiled kernel, whether LLVM compiled it just now)."""
    return CACHE.get(kernel, debug)


def lookup(kernel: ir.Kernel, debug: bool = False) -> tuple[CompiledKernel, str]:
    """(compiled kernel, "memory" | "disk" | "compile")."""
    return CACHE.lookup(kernel, debug)
