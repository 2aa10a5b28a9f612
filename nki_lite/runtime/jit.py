"""The JIT driver: compile a traced kernel through LLVM once per signature and launch it cheaply.

Contract:
- `compiled_for(kernel_ir, debug)` returns a `CompiledKernel` from a process-wide bounded LRU
  (`NKI_LITE_JIT_CACHE_SIZE`) keyed by the printed IR + debug flag; evicted entries are dropped and
  their machine code is freed once no launch holds them (a launch keeps a reference).
- `CompiledKernel.launch(arrays)` runs the native function on numpy arrays (the caller's buffers,
  C-contiguous, storage dtypes) and returns the output arrays by buffer name. A runtime error
  (status != 0) raises the same NkiLiteError the interpreter raises, naming the kernel line.
- Arguments reach native code as Python objects: a generated trampoline reads each ndarray's data
  pointer (PyArrayObject.data, checked at start-up against ctypes), which keeps a launch to a few
  microseconds. If that layout check fails, pointers are passed through ctypes instead.
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

import numpy as np

from .. import config, errors
from ..lang import dtypes as D
from ..lower import ir
from ..lower.llvm import target as T
from ..lower.llvm.codegen import STATUS_LOOPS, STATUS_WORDS, generate
from .interpreter import fill_uninit

_PRINT_CB = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
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


class CompiledKernel:
    def __init__(self, kernel: ir.Kernel, debug: bool):
        self.kernel = kernel
        self.debug = debug
        self.gen = generate(kernel, debug)
        n = len(self.gen.arg_buffers)
        offset = _array_data_offset()
        text = self.gen.text + (_trampoline(n, offset) if offset is not None else "")
        self.module = T.compile_module(text, f"nkl_{kernel.name}", opt=config.get("NKI_LITE_JIT_OPT"))
        self.timings = self.module.timings
        if offset is not None:
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

    # ---- per-thread scratch
    def _scratch(self):
        loc = self._local
        arena = getattr(loc, "arena", None)
        if arena is None:
            loc.arena = arena = np.empty(max(64, self.gen.arena_bytes), dtype=np.uint8)
            loc.status = np.zeros(STATUS_WORDS, dtype=np.int64)
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
        a = np.empty(shape, dtype=storage)
        fill_uninit(a, dtype)          # unwritten output elements read as NaN / sentinel, like the interpreter
        return a

    def call(self, args: list[np.ndarray]) -> None:
        loc = self._scratch()
        arena_ptr, status_ptr = loc.ptrs
        if self._call_py is not None:
            rc = self._call_py(*args, arena_ptr, status_ptr, self._print_ptr)
        else:
            arr = (ctypes.c_void_p * max(1, len(args)))(*[a.ctypes.data for a in args])
            rc = self._call(ctypes.addressof(arr), arena_ptr, status_ptr, self._print_ptr)
        if rc:
            raise self._error(loc.status.copy())

    # ---- runtime errors and printing
    def _env_text(self, status: np.ndarray, site: int) -> str:
        names = self.gen.loop_names[site]
        vals = {n: int(status[STATUS_LOOPS + k]) for k, n in enumerate(names[:STATUS_WORDS - STATUS_LOOPS])}
        return ", ".join(f"{k}={v}" for k, v in sorted(vals.items()))

    def _error(self, status: np.ndarray) -> Exception:
        code, site, operand, dim, lo, hi = (int(x) for x in status[:6])
        instr = self.gen.sites[site]
        accesses = [a for a in (list(instr.outs) + list(instr.ins)) if isinstance(a, ir.Access)]
        acc = accesses[min(operand, len(accesses) - 1)] if accesses else None
        buf = self.kernel.buffer(acc.buffer) if acc is not None else None
        where = self._env_text(status, site)
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


# ---------------------------------------------------------------- the process-wide cache

class _Cache:
    def __init__(self):
        self.entries: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.key_locks: dict = {}
        self.compiles = 0

    def get(self, kernel: ir.Kernel, debug: bool) -> tuple[CompiledKernel, bool]:
        key = (ir.format(kernel), tuple(kernel.consts), debug, config.get("NKI_LITE_JIT_OPT"))
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None:
                self.entries.move_to_end(key)
                return hit, False
            klock = self.key_locks.setdefault(key, threading.Lock())
        with klock:                                   # one compile per key, however many threads ask
            with self.lock:
                hit = self.entries.get(key)
                if hit is not None:
                    return hit, False
            ck = CompiledKernel(kernel, debug)
            with self.lock:
                self.compiles += 1
                self.entries[key] = ck
                self.key_locks.pop(key, None)
                while len(self.entries) > config.get("NKI_LITE_JIT_CACHE_SIZE"):
                    self.entries.popitem(last=False)
            return ck, True

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


CACHE = _Cache()


def compiled_for(kernel: ir.Kernel, debug: bool = False) -> tuple[CompiledKernel, bool]:
    return CACHE.get(kernel, debug)
