"""The native entry points of one compiled kernel, the per-thread memory a call needs, and what the
status words report (runtime errors, device_print).

Contract:
- `data_offset()` is the byte offset of the data pointer in a PyArrayObject, verified on live arrays
  (None when the layout check fails: pointers then go through ctypes, and no trampoline is built).
- `Native(module, plan, kernel, trampoline)` binds @nkl_kernel, @nkl_call_py (when `trampoline`) and
  the @nkl_region_<k> functions of the plan. `run(args, lo, hi, stop, phases, shared, dispatch)` is
  one native call on the calling thread (abi.py status words; `shared` is the arena of the shared
  on-chip buffers when another thread owns it) and returns (rc, status).
- `error(status)` is the NkiLiteError the interpreter raises for the same failure, naming the
  kernel line and the loop values; device_print output goes to stdout like the interpreter's.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .. import errors, hostmem
from ..core import dtypes as D
from ..core import ir
from ..lower.llvm.abi import STATUS_DISPATCH, STATUS_PHASES, STATUS_PRIVATE_ARENA, STATUS_PROG_HI
from ..lower.llvm.abi import STATUS_PROG_LO, STATUS_STOP
from ..lower.llvm.rules_indirect import ERR_INDIRECT

PRINT_CB = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)
_KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_DATA_OFFSET: int | None = None


def data_offset() -> int | None:
    global _DATA_OFFSET
    if _DATA_OFFSET is None:
        off = 2 * ctypes.sizeof(ctypes.c_void_p)        # after PyObject_HEAD (refcount, type)
        ok = True
        for a in (np.zeros(3, np.float32), np.ones((2, 5), np.int8)[:, 1:]):
            ptr = ctypes.c_void_p.from_address(id(a) + off).value
            ok &= ptr == a.ctypes.data
        _DATA_OFFSET = off if ok else -1
    return _DATA_OFFSET if _DATA_OFFSET >= 0 else None


class Native:
    def __init__(self, module, plan, kernel: ir.Kernel, trampoline: bool):
        self.plan, self.kernel = plan, kernel
        # The entry points below are raw addresses into the module's machine code, which llvmlite
        # frees when the module is collected: whoever holds this object (a launcher a cached call
        # kept after its CompiledKernel left the JIT cache) must keep the code alive too.
        self.module = module
        n = len(plan.arg_buffers)
        if trampoline:
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.py_object] * n), ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p)
            self.call_py = proto(module.address("nkl_call_py"))
        else:
            self.call_py = None
        self.call = _KERNEL_FN(module.address("nkl_kernel"))
        self.regions = [_KERNEL_FN(module.address(f"nkl_region_{k}")) if trip else None
                        for k, trip in enumerate(plan.region_trips)]
        self._local = threading.local()
        self._print_cb = PRINT_CB(self._on_print) if plan.needs_print else None
        self.print_ptr = ctypes.cast(self._print_cb, ctypes.c_void_p).value if self._print_cb else None

    # ---- per-thread scratch: an arena for the tiles and the status words
    def _new_arena(self) -> np.ndarray:
        return hostmem.empty(max(64, self.plan.arena_bytes), np.uint8,
                             f"the JIT arena of kernel '{self.kernel.name}' (its tiles)", self.kernel.loc)

    def scratch(self):
        loc = self._local
        if getattr(loc, "arena", None) is None:
            loc.arena = self._new_arena()
            loc.status = np.zeros(self.plan.status_words, dtype=np.int64)
            loc.ptrs = (loc.arena.ctypes.data, loc.status.ctypes.data)
        return loc

    def region_scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """A second per-thread status + arena: a thread running region chunks may be the one whose
        `scratch` is in use by the suspended kernel call that dispatched them."""
        loc = self._local
        if getattr(loc, "rarena", None) is None:
            loc.rarena = self._new_arena()
            loc.rstatus = np.zeros(self.plan.status_words, dtype=np.int64)
        return loc.rarena, loc.rstatus

    def run(self, args, lo: int, hi: int, stop_addr: int, phases: int = 7, shared: int | None = None,
            dispatch: int = 0) -> tuple[int, np.ndarray]:
        """One native call on this thread: `phases` (1 prologue, 2 programs [lo, hi), 4 epilogue);
        `shared` is the arena holding the shared on-chip buffers (another thread's; None: this
        thread's own, which then also holds the private ones); `dispatch` the region dispatcher."""
        loc = self.scratch()
        own_arena, status_ptr = loc.ptrs
        st = loc.status
        st[STATUS_PROG_LO], st[STATUS_PROG_HI], st[STATUS_STOP], st[STATUS_PHASES] = lo, hi, stop_addr, phases
        st[STATUS_DISPATCH] = dispatch
        if shared is None:
            arena_ptr, st[STATUS_PRIVATE_ARENA] = own_arena, 0
        else:
            arena_ptr, st[STATUS_PRIVATE_ARENA] = shared, own_arena
        if self.call_py is not None:
            rc = self.call_py(*args, arena_ptr, status_ptr, self.print_ptr)
        else:
            arr = (ctypes.c_void_p * max(1, len(args)))(*[a.ctypes.data for a in args])
            rc = self.call(ctypes.addressof(arr), arena_ptr, status_ptr, self.print_ptr)
        return rc, st

    def checked(self, result) -> None:
        rc, st = result
        if rc == 2:
            raise KeyboardInterrupt                      # a region's dispatcher saw Ctrl-C
        if rc:
            raise self.error(st.copy())

    # ---- what the status words say
    def _env_text(self, status: np.ndarray, site: int) -> str:
        names = self.plan.loop_names[site]
        lo = self.plan.status_loops
        vals = {n: int(status[lo + k]) for k, n in enumerate(names[:self.plan.status_words - lo])}
        return ", ".join(f"{k}={v}" for k, v in sorted(vals.items()))

    def error(self, status: np.ndarray) -> Exception:
        code, site, operand, dim, lo, hi = (int(x) for x in status[:6])
        instr = self.plan.sites[site]
        accesses = [a for a in (list(instr.outs) + list(instr.ins)) if isinstance(a, ir.Access)]
        acc = accesses[min(operand, len(accesses) - 1)] if accesses else None
        buf = self.kernel.buffer(acc.buffer) if acc is not None else None
        where = self._env_text(status, site)
        if code == ERR_INDIRECT and buf is not None:       # lower/llvm/rules_indirect.py
            from .interpret_indirect import oob_message
            el = tuple(int(x) for x in np.unravel_index(hi, instr.outs[0].shape))   # hi: the tile element
            return errors.make("indirect_out_of_bounds", oob_message(buf, dim, lo, el, where), loc=instr.loc)
        shape = buf.shape if buf is not None else ()
        lim = shape[dim] if dim < len(shape) else 0
        return errors.make("out_of_bounds",
                           f"access to '{buf.name if buf else '?'}' (shape {shape}) on dimension {dim}: index range "
                           f"[{lo}, {hi}] exceeds [0, {lim - 1}]" + (f" when {where}" if where else ""),
                           loc=instr.loc)

    def _on_print(self, site: int, data: int) -> None:
        instr = self.plan.sites[site]
        acc = instr.ins[0]
        dt = self.kernel.buffer(acc.buffer).dtype
        n = int(np.prod(acc.shape))
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * (n * D.itemsize(dt))).from_address(data))
        v = raw.view(D.storage(dt)).reshape(acc.shape).copy()
        where = self._env_text(self._local.status, site)
        print(f"{instr.attr('prefix')}{' [' + where + ']' if where else ''}\n{v}")
