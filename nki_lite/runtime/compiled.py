"""A compiled kernel: machine code, the launch plan codegen made for it, and its launch path.

Contract:
- `CompiledKernel(kernel, debug, opt)` generates LLVM IR (lower/llvm/codegen.py, which also builds
  the `LaunchPlan`), appends the Python-object trampoline (lower/llvm/trampoline.py) when the
  ndarray layout check passes, and compiles it; `CompiledKernel.from_entry(...)` adopts object code
  and plan loaded from the disk cache instead, with no LLVM IR generation or compilation.
- `ck.plan` is the launch plan, `ck.launcher` the one launch path (runtime/launch.py), and
  `ck.launch(arrays)` runs the kernel on numpy arrays by buffer name (C-contiguous, storage dtypes)
  and returns the outputs by name. A runtime error raises the NkiLiteError the interpreter raises.
- `ck.entry_meta()` is the JSON-able metadata of a disk-cache entry (the plan plus how the code was
  built); `entry_problem(meta, kernel, debug, opt)` says why stored metadata cannot be this kernel's.
"""
from __future__ import annotations

from .. import config
from ..core import ir
from ..lower.llvm.launch_plan import LaunchPlan
from .launch import Launch
from .native import Native, data_offset


def source_text(kernel: ir.Kernel, debug: bool):
    """(codegen's Generated, LLVM IR text with the trampoline, has_trampoline)."""
    from .. import gcpause
    from ..lower.llvm.codegen import generate
    from ..lower.llvm.trampoline import trampoline
    with gcpause.paused():
        gen = generate(kernel, debug)
    offset = data_offset()
    text = gen.text + (trampoline(len(gen.arg_buffers), offset) if offset is not None else "")
    return gen, text, offset is not None


class CompiledKernel:
    def __init__(self, kernel: ir.Kernel, debug: bool, opt: int | None = None):
        self.kernel, self.debug = kernel, debug
        self.opt = config.get("NKI_LITE_JIT_OPT") if opt is None else opt
        from ..lower.llvm import target as T          # llvmlite loads on the first compile or disk load
        gen, text, tramp = source_text(kernel, debug)
        self.module = T.compile_object(text, f"nkl_{kernel.name}", opt=self.opt)
        self._bind(gen.plan, tramp, from_disk=False)

    @classmethod
    def from_entry(cls, kernel: ir.Kernel, debug: bool, opt: int, meta: dict, obj: bytes) -> "CompiledKernel":
        """Adopt a disk-cache entry (metadata already checked by `entry_problem`)."""
        self = cls.__new__(cls)
        from ..lower.llvm import target as T
        self.kernel, self.debug, self.opt = kernel, debug, opt
        self.module = T.load_object(obj, f"nkl_{kernel.name}", opt, source=lambda: source_text(kernel, debug)[1])
        self._bind(LaunchPlan.from_json(meta, kernel), bool(meta["trampoline"]), from_disk=True)
        return self

    def _bind(self, plan: LaunchPlan, trampoline: bool, from_disk: bool) -> None:
        self.plan, self.from_disk = plan, from_disk
        self.timings = self.module.timings
        self.native = Native(self.module, plan, self.kernel, trampoline)
        self.launcher = Launch(self.native, plan, self.kernel)

    def launch(self, arrays: dict) -> dict:
        return self.launcher.launch(arrays)

    def entry_meta(self) -> dict | None:
        """JSON-able metadata for a disk-cache entry (None if the plan cannot be stored)."""
        meta = self.plan.to_json(self.kernel)
        if meta is None:
            return None
        return {**meta, "trampoline": self.native.call_py is not None, "opt": self.opt, "debug": bool(self.debug),
                "compile_ms": {k: round(v, 3) for k, v in self.timings.items()}}


def entry_problem(meta: dict, kernel: ir.Kernel, debug: bool, opt: int) -> str | None:
    """Why an entry's metadata cannot belong to this kernel in this process (None if it fits)."""
    from ..lower.llvm.plan_check import problem
    try:
        if meta["debug"] is not bool(debug) or meta["opt"] != opt:
            return "debug flag or opt level differs"
        if not isinstance(meta["trampoline"], bool):
            return "bad flags"
        if meta["trampoline"] != (data_offset() is not None):
            return "trampoline does not match this process"
    except (KeyError, TypeError):
        return "metadata fields missing or mistyped"
    return problem(meta, kernel, debug)
