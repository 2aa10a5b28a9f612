"""The only module that touches llvmlite: initialisation, target machines, optimisation, engines.

Contract:
- `compile_module(ir_text, name, opt=3)` parses and verifies LLVM IR text, optimises it with the new
  pass manager for the host CPU, and JIT-compiles it into a `CompiledModule`. The CompiledModule
  owns its execution engine and target machine: a function address stays valid exactly as long as
  the CompiledModule is referenced (llvmlite engines free code when collected — LLVM_NOTES gotcha 1).
- `CompiledModule.address(fn)`, `.llvm_ir` (optimised text), `.asm()` and `.dispose()`.
- One target machine per engine (create_mcjit_compiler takes ownership), plus a separate one for the
  pass builder; both target the host CPU with its features, no fast-math options.
- `host_info()` names the CPU and features (part of cache keys); `jit_supported()` says whether the
  host can run JIT code (Linux/macOS x86-64 or AArch64).
"""
from __future__ import annotations

import platform
import threading
import time
from dataclasses import dataclass, field

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


def host_info() -> dict:
    _init()
    feats = llvm.get_host_cpu_features()
    return {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
            "features": feats.flatten(), "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "llvmlite": llvmlite.__version__}


def jit_supported() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")


def has_feature(name: str) -> bool:
    _init()
    return bool(llvm.get_host_cpu_features().get(name, False))


def _target_machine(opt: int):
    _init()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                         features=llvm.get_host_cpu_features().flatten(),
                                         opt=opt, codemodel="jitdefault")


@dataclass
class CompiledModule:
    name: str
    engine: object
    target_machine: object
    module: object
    timings: dict = field(default_factory=dict)
    _addresses: dict = field(default_factory=dict)

    def address(self, fn: str) -> int:
        addr = self._addresses.get(fn)
        if addr is None:
            addr = self.engine.get_function_address(fn)
            if not addr:
                raise KeyError(f"function {fn!r} not found in module {self.name}")
            self._addresses[fn] = addr
        return addr

    @property
    def llvm_ir(self) -> str:
        return str(self.module)

    def asm(self) -> str:
        return self.target_machine.emit_assembly(self.module)

    def dispose(self) -> None:
        """Free the machine code now (only when no function pointer from it can still be called)."""
        self._addresses.clear()
        self.engine = None
        self.module = None


def compile_module(ir_text: str, name: str = "nki_lite", opt: int = 3) -> CompiledModule:
    _init()
    t0 = time.perf_counter()
    with _COMPILE_LOCK:
        mod = llvm.parse_assembly(ir_text)
        mod.name = name
        mod.verify()
        t1 = time.perf_counter()
        if opt > 0:
            pto = llvm.PipelineTuningOptions(speed_level=opt)
            pb = llvm.create_pass_builder(_target_machine(opt), pto)
            pm = pb.getModulePassManager()
            pm.run(mod, pb)
        t2 = time.perf_counter()
        tm = _target_machine(opt)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        t3 = time.perf_counter()
    return CompiledModule(name, engine, tm, mod,
                          {"parse_ms": (t1 - t0) * 1e3, "opt_ms": (t2 - t1) * 1e3, "codegen_ms": (t3 - t2) * 1e3})
