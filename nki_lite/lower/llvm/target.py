"""The only module that touches llvmlite: initialisation, target machines, optimisation, engines.

Contract:
- `compile_module(ir_text, name, opt=3)` parses and verifies LLVM IR text, optimises it with the new
  pass manager for the host CPU, and JIT-compiles it into a `CompiledModule`. The CompiledModule
  owns its execution engine and target machine: a function address stays valid exactly as long as
  the CompiledModule is referenced (llvmlite engines free code when collected — LLVM_NOTES gotcha 1).
- `CompiledModule.address(fn)`, `.llvm_ir` (optimised text), `.asm()` and `.dispose()`.
- One target machine per engine (create_mcjit_compiler takes ownership), plus a separate one for the
  pass builder; both target the host CPU with its features, no fast-math options.
- `compile_object(ir_text, name, opt)` does the same but emits a relocatable object file
  (`CompiledModule.object_code`) and loads it with `load_object`: the code a fresh compile runs is
  byte for byte the code a later process loads from the disk cache (runtime/diskcache.py).
- `load_object(data, name, opt, source=None)` creates an MCJIT engine from an empty module and adds
  the object file; `source` (a callable returning the LLVM IR text) lets `.llvm_ir`/`.asm()` of a
  loaded module recompile that text on demand (inspection only: the loaded code keeps running).
  Only pass objects this process (or a trusted cache entry) produced: LLVM does not validate them.
- `host_info()` names the CPU and features (part of cache keys; computed once per process);
  `jit_supported()` says whether the host can run JIT code (Linux/macOS x86-64 or AArch64).
"""
from __future__ import annotations

import platform
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import llvmlite
import llvmlite.binding as llvm

_INIT_LOCK = threading.Lock()
_INITIALISED = False
_COMPILE_LOCK = threading.Lock()   # LLVM's global state is not safe for concurrent pass pipelines


def _init() -> None:
    global _INITIALISED
    with _INIT_LOCK:
        if not _INITIALISED:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _INITIALISED = True


_HOST: dict | None = None


def _host() -> dict:
    global _HOST
    if _HOST is None:                  # the CPU does not change under a running process
        _init()
        _HOST = {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
                 "features": llvm.get_host_cpu_features().flatten(),
                 "llvm": ".".join(map(str, llvm.llvm_version_info)), "llvmlite": llvmlite.__version__}
    return _HOST


def host_info() -> dict:
    return dict(_host())


def jit_supported() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")


def has_feature(name: str) -> bool:
    _init()
    return bool(llvm.get_host_cpu_features().get(name, False))


def _target_machine(opt: int):
    host = _host()
    target = llvm.Target.from_triple(host["triple"])
    return target.create_target_machine(cpu=host["cpu"], features=host["features"], opt=opt,
                                         codemodel="jitdefault")    # 64-bit: large code model


@dataclass
class CompiledModule:
    name: str
    engine: object
    target_machine: object
    module: object
    timings: dict = field(default_factory=dict)
    _addresses: dict = field(default_factory=dict)
    object_code: bytes | None = None          # compile_object: the relocatable object that was loaded
    source: Callable[[], str] | None = None   # load_object: LLVM IR text, for inspection only
    opt: int = 3
    opt_used: int | None = None               # the level LLVM ran at (effective_opt), when compiled here
    _rebuilt: "CompiledModule | None" = None

    def address(self, fn: str) -> int:
        addr = self._addresses.get(fn)
        if addr is None:
            addr = self.engine.get_function_address(fn)
            if not addr:
                raise KeyError(f"function {fn!r} not found in module {self.name}")
            self._addresses[fn] = addr
        return addr

    def _inspectable(self) -> "CompiledModule":
        """self, or (for a module loaded from an object file) a recompile of its source text."""
        if self.module is not None:
            return self
        if self._rebuilt is None:
            if self.source is None:
                raise RuntimeError(f"module {self.name} was loaded from object code and has no IR to show")
            self._rebuilt = compile_object(self.source(), self.name, self.opt)
        return self._rebuilt

    @property
    def llvm_ir(self) -> str:
        return str(self._inspectable().module)

    def asm(self) -> str:
        m = self._inspectable()
        return m.target_machine.emit_assembly(m.module)

    def dispose(self) -> None:
        """Free the machine code now (only when no function pointer from it can still be called)."""
        self._addresses.clear()
        self.engine = None
        self.module = None
        self._rebuilt = None


# LLVM IR text beyond which -O2/-O3 cost minutes and -O1 seconds: a kernel that Python loops unroll
# (NKIBench's rope: 3.4 MB of IR in 90 functions) is optimised at -O1 (results are identical at every
# level; the code runs somewhat slower). The requested level still keys caches and disk entries.
HUGE_IR_CHARS = 1 << 20


def effective_opt(ir_text: str, opt: int) -> int:
    return min(opt, 1) if len(ir_text) > HUGE_IR_CHARS else opt


def _parse_and_optimise(ir_text: str, name: str, opt: int):
    """Parse, verify and run the new pass manager at `opt` (no fast-math anywhere). Caller holds
    _COMPILE_LOCK. Returns the module and the parse / optimise times in seconds."""
    t0 = time.perf_counter()
    mod = llvm.parse_assembly(ir_text)
    mod.name = name
    mod.verify()
    t1 = time.perf_counter()
    if opt > 0:
        pto = llvm.PipelineTuningOptions(speed_level=opt)
        pb = llvm.create_pass_builder(_target_machine(opt), pto)
        pb.getModulePassManager().run(mod, pb)
    return mod, t1 - t0, time.perf_counter() - t1


def compile_module(ir_text: str, name: str = "nki_lite", opt: int = 3) -> CompiledModule:
    return _compile(ir_text, name, opt, object_code=False)


def _compile(ir_text: str, name: str, opt: int, object_code: bool) -> CompiledModule:
    """compile_module / compile_object: parse, verify and optimise, then JIT-compile in memory or
    emit a relocatable object and load that (the disk cache's form)."""
    _init()
    level = effective_opt(ir_text, opt)
    with _COMPILE_LOCK:
        mod, parse_s, opt_s = _parse_and_optimise(ir_text, name, level)
        t2 = time.perf_counter()
        tm = _target_machine(level)
        if object_code:
            obj = tm.emit_object(mod)
            t3 = time.perf_counter()
            engine = _engine_from_object(obj, opt)
        else:
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
            t3 = time.perf_counter()
        t4 = time.perf_counter()
    times = {"parse_ms": parse_s * 1e3, "opt_ms": opt_s * 1e3, "codegen_ms": (t3 - t2) * 1e3}
    if not object_code:
        return CompiledModule(name, engine, tm, mod, times, opt=opt, opt_used=level)
    times["load_ms"] = (t4 - t3) * 1e3
    return CompiledModule(name, engine, tm, mod, times, object_code=obj, opt=opt, opt_used=level)


# ---------------------------------------------------------------- object code (the disk cache's unit)

_OBJECT_MAGICS = (b"\x7fELF", b"\xcf\xfa\xed\xfe")      # ELF, 64-bit Mach-O (little endian)


def _engine_from_object(data: bytes, opt: int):
    """An MCJIT engine holding exactly the given object file. Caller holds _COMPILE_LOCK."""
    if not isinstance(data, (bytes, bytearray)) or bytes(data[:4]) not in _OBJECT_MAGICS:
        raise ValueError("not an ELF/Mach-O object file")   # LLVM would crash on garbage: never pass it on
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine(opt))
    engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(data)))   # the engine takes the binary
    engine.finalize_object()
    return engine


def compile_object(ir_text: str, name: str = "nki_lite", opt: int = 3) -> CompiledModule:
    """Parse, verify, optimise, emit a relocatable object and load it (see the module contract)."""
    return _compile(ir_text, name, opt, object_code=True)


def load_object(data: bytes, name: str = "nki_lite", opt: int = 3,
                source: Callable[[], str] | None = None) -> CompiledModule:
    """Load object code produced by `compile_object` (here or in an earlier process)."""
    _init()
    t0 = time.perf_counter()
    with _COMPILE_LOCK:
        engine = _engine_from_object(data, opt)
    return CompiledModule(name, engine, None, None, {"load_ms": (time.perf_counter() - t0) * 1e3},
                          source=source, opt=opt)
