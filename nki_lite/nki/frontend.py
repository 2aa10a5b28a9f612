"""`nki.compiler.frontend`: the compiler frontend's trace-only entry points, as nki_lite's trace.

Contract: `ParserFrontend().compile(kernel, inputs=..., target=..., lnc=...)` is what NKI's frontend does
for a trace-only run (Python to the compiler's IR, no binary): it traces the kernel with those inputs into
nki_lite's IR and verifies it (each core's program for lnc=2), so the kernel's own trace-time checks
(`kernel_assert`, assertions on view shapes and strides) and nki_lite's hardware rules run, and returns
a `FrontendResult` whose `kernels` are the traced programs. Nothing is executed. `module` (the MLIR module
NKI returns) is None: nki_lite has no MLIR. `TracerFrontend` is the same entry point under NKI's other
frontend name. The NKI Library's harness (test/utils/kernel_tracer.py) calls this for its trace-only tests.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FrontendResult:
    kernels: list            # nki_lite IR, one per logical core
    module: object = None    # NKI's MLIR module; nki_lite has none


class NKIFrontend:
    """A compiler frontend: compile(kernel, inputs, target, lnc, ...) -> FrontendResult."""

    def compile(self, kernel, inputs=None, target=None, lnc=1, artifacts_dir=None, dump_python_ast=False,
                output_names=None, **options) -> FrontendResult:
        from ..runtime.lnc import per_core_kernels
        from .launch import as_kernel
        inner = as_kernel(kernel).inner
        target = _target_name(target)
        inputs = dict(inputs or {})
        n = int(lnc or 1)
        if n > 1:
            return FrontendResult(per_core_kernels(inner, n, (), inputs, target))
        return FrontendResult([inner.trace(target=target, **inputs)])


class ParserFrontend(NKIFrontend):
    """NKI's AST-parsing frontend (nki_lite traces either way)."""


class TracerFrontend(NKIFrontend):
    """NKI's tracing frontend."""


def _target_name(target) -> str | None:
    """'trn2' / 'trn2n' / a Platforms-like object with a trn* name -> nki_lite's target name."""
    if target is None:
        return None
    text = str(getattr(target, "value", target)).lower()
    for name in ("trn3", "trn2", "trn1"):
        if name in text:
            return name
    return text
