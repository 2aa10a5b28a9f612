"""The Python-object entry point: LLVM IR text of `@nkl_call_py`, appended to a kernel's module.

Contract: `trampoline(n_args, offset)` returns
    i32 @nkl_call_py(ptr obj0, ..., ptr obj<n-1>, ptr arena, ptr status, ptr cb)
which loads each argument's data pointer from its PyArrayObject (at byte `offset`, which the
runtime verifies on live arrays before asking for this) and calls @nkl_kernel. Passing the
ndarrays themselves keeps a launch to a few microseconds (no ctypes pointer array per call).
"""
from __future__ import annotations


def trampoline(n_args: int, offset: int) -> str:
    params = ", ".join([f"ptr %o{i}" for i in range(n_args)] + ["ptr %arena", "ptr %status", "ptr %cb"])
    slots = max(1, n_args)
    lines = [f"define i32 @nkl_call_py({params}) {{", "entry:", f"  %args = alloca [{slots} x ptr], align 8"]
    for i in range(n_args):
        lines += [f"  %f{i} = getelementptr inbounds i8, ptr %o{i}, i64 {offset}",
                  f"  %d{i} = load ptr, ptr %f{i}, align 8",
                  f"  %s{i} = getelementptr inbounds [{slots} x ptr], ptr %args, i64 0, i64 {i}",
                  f"  store ptr %d{i}, ptr %s{i}, align 8"]
    lines += ["  %r = call i32 @nkl_kernel(ptr %args, ptr %arena, ptr %status, ptr %cb)", "  ret i32 %r", "}"]
    return "\n".join(lines) + "\n"
