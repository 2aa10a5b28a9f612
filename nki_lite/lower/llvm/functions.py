"""LLVM function framing for the emitter (codegen.py): what every generated function shares.

Contract:
- `begin(em, private, pin_mxcsr=True) -> status words`: a fresh `context.Function` for the emitter
  and the entry code: MXCSR pinned to the IEEE default (not in parts.py's functions, which only
  pinned ones call), the status words read, the thread's private arena chosen; buffer pointers are
  made in the entry block on first use (Emitter.base_ptr).
- `end(em, name, ...) -> text`: the function's definition with its three exits (0 done, 1 error
  report in the status words, 2 stopped), restoring MXCSR on each.
- `stop_check(em)`: return 2 when the caller's stop flag is set; `propagate_status(em, rc, tag)`:
  a callee's 1 / 2 leave this function the same way.
- `dispatch_region(em, loop, ctx)` / `region_function(em, k, loop)`: a parallel region
  (lower/parallel.py) handed to the runtime's dispatcher, and the @nkl_region_<k> it runs.
"""
from __future__ import annotations

from ...core import ir
from .abi import (STATUS_DISPATCH, STATUS_PHASES, STATUS_PRIVATE_ARENA, STATUS_PROG_HI, STATUS_PROG_LO,
                  STATUS_REGION_ARENA, STATUS_REGION_ARGS, STATUS_REGION_ENV, STATUS_STOP)
from .context import Function, LoopEnv
from .irbuilder import FnBuilder


def propagate_status(em, rc: str, tag: str) -> None:
    """A callee's return code leaves this function the same way: 1 (an error report is in the
    status words) through fail_exit, 2 (a stop request) through stop_exit."""
    b = em.b
    for code, exit_label in ((1, "fail_exit"), (2, "stop_exit")):
        with b.if_(b.op(f"icmp eq i32 {rc}, {code}"), tag + ("f" if code == 1 else "s")):
            b.br(exit_label)
            b.block(b.new_label("dead"))


def stop_check(em) -> None:
    """Return 2 if the caller's stop flag is set (status word STATUS_STOP holds its address, 0 =
    none): the runtime sets it on Ctrl-C or when another thread failed."""
    b = em.b
    with b.if_(em.fn.has_stop, "st"):
        flag = b.op(f"load volatile i64, ptr {em.fn.stop_ptr}, align 8")
        stopped = b.op(f"icmp ne i64 {flag}, 0")
        with b.if_(stopped, "sx"):
            b.br("stop_exit")
            b.block(b.new_label("dead"))


def dispatch_region(em, n: ir.Loop, ctx: LoopEnv) -> None:
    """A parallel region (lower/parallel.py `regions`): hand the loop to the runtime's dispatcher,
    which runs @nkl_region_<k> on threads; without a dispatcher (a worker's call) run it here."""
    from ..parallel import REGION_MAX_DEPTH
    if len(ctx.names) > REGION_MAX_DEPTH:       # more enclosing values than status words: inline
        em.serial_loop(n, ctx)
        return
    b = em.b
    k = em.regions[id(n)]
    em.mod.region_names[k] = list(ctx.names)
    has = b.op(f"icmp ne i64 {em.fn.dispatch_word}, 0")
    then, other, done = b.new_label("rg"), b.new_label("rs"), b.new_label("rd")
    b.cond_br(has, then, other)
    b.block(then)
    for j, name in enumerate(ctx.names):
        q = b.op(f"getelementptr inbounds i64, ptr %status, i64 {STATUS_REGION_ENV + j}")
        b.emit(f"store i64 {ctx.env[name]}, ptr {q}, align 8")
    for word, ptr in ((STATUS_REGION_ARGS, "%args"), (STATUS_REGION_ARENA, "%arena")):
        q = b.op(f"getelementptr inbounds i64, ptr %status, i64 {word}")
        b.emit(f"store i64 {b.op(f'ptrtoint ptr {ptr} to i64')}, ptr {q}, align 8")
    fn = b.op(f"inttoptr i64 {em.fn.dispatch_word} to ptr")
    rc = b.op(f"call i32 {fn}(i64 {k}, ptr %status)")
    propagate_status(em, rc, "rg")
    b.br(done)
    b.block(other)
    em.serial_loop(n, ctx)
    b.br(done)
    b.block(done)


def begin(em, private: set, pin_mxcsr: bool = True) -> dict:
    """Fresh per-function state and the entry code every function shares: MXCSR pinned (not in
    parts.py's functions, which only the pinned ones call), the status words read. Buffer pointers
    (private buffers in the thread's own arena) are made in the entry block on first use, so a
    function costs nothing for the buffers it does not touch."""
    em.fn = Function(FnBuilder(), private, pin_mxcsr=pin_mxcsr and em.x86)
    b = em.b
    em.row_value = None
    if em.fn.pin_mxcsr:
        em.declare("declare void @llvm.x86.sse.stmxcsr(ptr)")
        em.declare("declare void @llvm.x86.sse.ldmxcsr(ptr)")
        b.emit("%mxcsr.saved = alloca i32, align 4")
        b.emit("%mxcsr.new = alloca i32, align 4")
        b.emit("call void @llvm.x86.sse.stmxcsr(ptr %mxcsr.saved)")
        b.emit("store i32 8064, ptr %mxcsr.new, align 4")       # 0x1F80: masked, RNE, no FTZ/DAZ
        b.emit("call void @llvm.x86.sse.ldmxcsr(ptr %mxcsr.new)")
    words = {}
    for name, k in (("lo", STATUS_PROG_LO), ("hi", STATUS_PROG_HI), ("stop", STATUS_STOP),
                    ("phases", STATUS_PHASES), ("parena", STATUS_PRIVATE_ARENA), ("dispatch", STATUS_DISPATCH)):
        q = b.op(f"getelementptr inbounds i64, ptr %status, i64 {k}")
        words[name] = b.op(f"load i64, ptr {q}, align 8")
    own = b.op(f"icmp ne i64 {words['parena']}, 0")
    pa = b.op(f"inttoptr i64 {words['parena']} to ptr")
    b.emit(f"%parena = select i1 {own}, ptr {pa}, ptr %arena")
    em.fn.ptr_at = len(b.lines)
    b.lines.append("")                        # the buffer pointers this function uses (base_ptr)
    em.fn.stop_ptr = b.op(f"inttoptr i64 {words['stop']} to ptr")
    em.fn.has_stop = b.op(f"icmp ne i64 {words['stop']}, 0")
    em.fn.dispatch_word = words["dispatch"]
    return words


def end(em, name: str, args_noalias: bool, params: str = "", linkage: str = "", attrs: str = "") -> str:
    b = em.b
    b.lines[em.fn.ptr_at] = "\n".join(em.fn.ptr_lines)
    restore = "  call void @llvm.x86.sse.ldmxcsr(ptr %mxcsr.saved)\n" if em.fn.pin_mxcsr else ""
    body = b.text().replace("entry:", "entry:\n" + "\n".join(em.fn.allocas), 1) if em.fn.allocas else b.text()
    na = "noalias " if args_noalias else ""
    text = [f"define {linkage}i32 @{name}(ptr {na}%args, ptr noalias %arena, ptr noalias %status, "
            f"ptr %print_cb{params}){attrs} {{",
            body,
            restore + "  ret i32 0",
            "fail_exit:",
            restore + "  ret i32 1",
            "stop_exit:",
            restore + "  ret i32 2",
            "}", ""]
    return "\n".join(text)


def region_function(em, k: int, loop: ir.Loop) -> str:
    """@nkl_region_<k>: iterations [lo, hi) of the region loop, enclosing loop values from the
    status words, the loop's own tiles in this thread's arena, everything else in the caller's."""
    private = {em.root(i.out.buffer) for i, _ in ir.walk(loop.body) if i.op == "alloc"}
    words = begin(em, private)
    b = em.b
    names = em.mod.region_names[k]
    env = {}
    for j, name in enumerate(names):
        q = b.op(f"getelementptr inbounds i64, ptr %status, i64 {STATUS_REGION_ENV + j}")
        env[name] = b.op(f"load i64, ptr {q}, align 8")
    count = b.op(f"sub nsw i64 {words['hi']}, {words['lo']}")
    with em.context(in_region=True), b.loop(count, "rl") as i:
        stop_check(em)
        idx = b.op(f"add nsw i64 {i}, {words['lo']}")
        em.run_nodes(loop.body, LoopEnv({**env, loop.var: idx}, names + [loop.var]))
    return end(em, f"nkl_region_{k}", args_noalias=False)
