"""The JIT's compile cache: one compiled kernel per traced kernel and signature, in memory and on disk.

Contract:
- `compiled_for(kernel_ir, debug)` returns a `CompiledKernel` (runtime/compiled.py) from a
  process-wide bounded LRU (`NKI_LITE_JIT_CACHE_SIZE`) keyed by the printed IR + consts + debug flag +
  opt level; evicted entries are dropped and their machine code is freed once no launch holds them.
  `lookup(kernel_ir, debug)` is the same but says where the kernel came from: "memory", "disk" or
  "compile"; `CACHE.compiles` / `CACHE.disk_hits` count the last two. One compile per key, however
  many threads ask.
- On an in-memory miss the per-user disk cache (runtime/diskcache.py, docs/jit_cache.md) is
  consulted: a hit loads the stored object code and launch plan (lower/llvm/launch_plan.py), with
  no LLVM IR generation or compilation. After a compile the object code is written there. The
  cache never fails a call: a broken lookup or store warns once and compiles.
- Nothing here imports llvmlite: codegen and LLVM load on the first compile or disk load.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .. import config
from ..core import ir
from . import diskcache as DC
from .compiled import CompiledKernel, entry_problem
from .native import data_offset


def disk_key(kernel: ir.Kernel, ir_text: str, debug: bool, opt: int) -> str:
    consts = [(name, DC.array_digest(data.array)) for name, data in kernel.consts]
    from ..lower.llvm.target import host_info
    return DC.entry_key(ir_text, consts, debug, opt, host_info(), extra={"data_offset": data_offset()})


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
