"""The parallel planner: which parts of a kernel the JIT runs on threads.

Whether iterations are independent is decided by the dependence analysis
(lower/analysis/dependence.py, whose contract defines programs, prologue, epilogue and private
buffers). One call of the native function runs any of three phases: the prologue, a range [lo, hi)
of programs, the epilogue (lower/llvm/abi.py). Serially one call runs all three; in parallel the
calling thread runs the prologue, worker threads run ranges of programs, then the calling thread runs
the epilogue.

Contract: `regions(kernel)` lists the affine loops inside a kernel that may run on threads (nested
loops with independent iterations and enough work per run); `explain(kernel)` says in words what runs
on threads and why the rest runs serially. `program_space` and `programs_independent` are the
dependence analysis' (read them there, or cached through `lower.analysis.of(kernel)`).
"""
from __future__ import annotations

from ..core import ir
from ..core.ops import host_effect
from . import analysis
from .analysis.dependence import (allocated_in, iterations_independent, private_buffers, program_space,
                                  why_dependent)


REGION_MIN_ELEMENTS = 1 << 18     # element-steps per run of a loop worth a dispatch (~50 us of Python)
REGION_MAX_DEPTH = 8              # enclosing loop variables and program ids passed to a region
                                  # (abi.STATUS_REGION_ENV words; codegen runs deeper ones inline)


def _work(nodes) -> int:
    total = 0
    for instr, loops in ir.walk(nodes):
        if instr.op == "alloc" or not instr.outs:
            continue
        n = 1
        for d in instr.out.shape:
            n *= d
        if instr.op == "nc_matmul" and isinstance(instr.ins[0], ir.Access):
            n *= instr.ins[0].shape[0]
        for lp in loops:
            n *= lp.trip
        total += n
    return total


def regions(kernel: ir.Kernel) -> list[ir.Loop]:
    """Affine loops *inside* a kernel that the JIT may run on threads (the outermost ones): an
    `affine_range` loop nested in other loops, or outside the programs, whose iterations are
    independent for each value of the enclosing loops (the module contract, with the tiles allocated
    inside the loop private to each thread and never read elsewhere), with enough work per run to pay
    for the dispatch; none inside programs that already run in parallel, none with device_print."""
    if any(host_effect(i) for i, _ in ir.walk(kernel.body)):
        return []
    _, _, body, prologue, epilogue = program_space(kernel)
    # the programs' own loops stay inside them when the programs already run on threads
    scope = tuple(prologue) + tuple(epilogue) if analysis.of(kernel).programs_independent else kernel.body
    bufs = kernel.buffer_map
    if any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm" for b in bufs.values()):
        return []
    found: list[ir.Loop] = []

    def visit(nodes, enclosing: tuple) -> None:
        for n in nodes:
            if not isinstance(n, ir.Loop):
                continue
            if (n.kind == "affine" and n.trip > 1 and len(enclosing) + len(kernel.grid or ()) <= REGION_MAX_DEPTH
                    and _work([n]) >= REGION_MIN_ELEMENTS):
                private = allocated_in(kernel, n.body)
                inside = {id(i) for i, _ in ir.walk(n.body)}
                # everything else runs before or after the loop, in this or another enclosing iteration
                others = tuple(i for i, _ in ir.walk(kernel.body) if id(i) not in inside)
                fixed = {lp.var: 1 for lp in enclosing}
                fixed.update({f"pid{g}": 1 for g in range(len(kernel.grid or ()))})
                if iterations_independent(kernel, (n.var,), (n.trip,), n.body, private, fixed, others):
                    found.append(n)
                    continue
            visit(n.body, enclosing + (n,))

    visit(scope, ())
    return found


def explain(kernel: ir.Kernel) -> str:
    """In words: which parts of the kernel the JIT runs on threads, and why the others run serially
    (what `Kernel.inspect_threads(...)` prints)."""
    lines = []
    pvars, extents, body, prologue, epilogue = program_space(kernel)
    if not pvars:
        lines.append("programs: one (no SPMD grid, no top-level affine_range loop)")
    else:
        what = (f"SPMD grid {list(extents)}" if kernel.grid else
                f"{extents[0]} iterations of the affine_range loop {pvars[0]}{_at_loop(kernel.body, pvars[0])}")
        extra = " and ".join(w for w, on in (("after a prologue", prologue), ("before an epilogue", epilogue)) if on)
        extra = f" {extra}" if extra else ""
        if analysis.of(kernel).programs_independent:
            lines.append(f"programs: {what}{extra}: on threads")
        else:
            bufs = kernel.buffer_map
            if all(n <= 1 for n in extents):
                why = "a single program"
            elif any(host_effect(i) for i, _ in ir.walk(kernel.body)):
                why = "the kernel prints (device_print keeps its order)"
            elif any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm"
                     for b in bufs.values()):
                why = "the kernel has shared HBM scratch"
            else:
                why = why_dependent(kernel, pvars, extents, body, private_buffers(kernel), {}, epilogue)
            lines.append(f"programs: {what}{extra}: serial, because {why}")
    found = regions(kernel)
    for lp in found:
        lines.append(f"parallel region: the affine_range loop {lp.var}{_loc_of(lp)}, {lp.trip} iterations: "
                     "on threads")
    if not found:
        lines.append(f"parallel regions: none (nested affine_range loops need independent iterations and "
                     f">= {REGION_MIN_ELEMENTS} element-steps per run)")
    return "\n".join(lines)


def _loc_of(lp: ir.Loop) -> str:
    return f" ({lp.loc.file.rsplit('/', 1)[-1]}:{lp.loc.line})" if lp.loc is not None else ""


def _at_loop(nodes, var: str) -> str:
    for n in nodes:
        if isinstance(n, ir.Loop) and n.var == var:
            return _loc_of(n)
    return ""
