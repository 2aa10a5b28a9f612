"""Which kernels may run their "programs" in parallel without changing any result.

Programs are the SPMD grid's instances — or, for a kernel without a grid, the iterations of its last
top-level `affine_range` loop (`program_space`). Statements before that loop are the *prologue*
(typically loads of weights into SBUF), statements after it the *epilogue*. One call of the native
function runs any of three phases: the prologue, a range [lo, hi) of programs, the epilogue
(lower/llvm/abi.py). Serially one call runs all three. In parallel the calling thread runs the
prologue, worker threads run ranges of programs, then the calling thread runs the epilogue.

Memory during the programs phase: on-chip buffers allocated inside the program body are *private*
(each worker has its own copy, `private_buffers`); every other on-chip buffer is *shared* (the
calling thread's, written by the prologue, only read by the programs).

Contract: `programs_independent(kernel)` returns True only when that parallel schedule gives exactly
the serial results:
- every HBM write of a program is separated by program id — for each program axis with more than one
  program, some dimension of the write's index is `c * pid + rest` with the rest spanning less than
  |c|, so two programs never write the same element — and a program only reads HBM the programs write
  through exactly the access it writes it with (its own region);
- programs write on-chip memory only in private buffers (no accumulation into shared state), and the
  epilogue reads no private buffer (serially it would see the last program's values);
- no device_print, no HBM views of written tensors, no shared HBM scratch.
The prologue runs once before any program and the epilogue after all of them, as in the serial order,
so what they read and write needs no further condition. False means "not proven": run serially.
"""
from __future__ import annotations

import functools

from ..core import ir
from ..core.affine import Affine, axis_var
from .analysis.accesses import root_name


def _span(e: Affine, ext: dict, skip: str) -> int:
    """max - min of e without its `skip` term, over vars ranging in [0, ext)."""
    lo = hi = 0
    for v, c in e.terms:
        if v == skip:
            continue
        n = ext.get(v)
        if n is None:
            return 1 << 62
        lo += min(0, c * (n - 1))
        hi += max(0, c * (n - 1))
    return hi - lo


def program_space(kernel: ir.Kernel) -> tuple[tuple[str, ...], tuple[int, ...], tuple, tuple, tuple]:
    """(program variables, their extents, the body each program runs, prologue, epilogue)."""
    grid = kernel.grid or ()
    if grid:
        return tuple(f"pid{g}" for g in range(len(grid))), tuple(grid), kernel.body, (), ()
    loops = [k for k, n in enumerate(kernel.body) if isinstance(n, ir.Loop) and n.kind == "affine"]
    if not loops:
        return (), (), kernel.body, (), ()
    k = loops[-1]
    lp = kernel.body[k]
    return (lp.var,), (lp.trip,), lp.body, kernel.body[:k], kernel.body[k + 1:]


def private_buffers(kernel: ir.Kernel) -> set[str]:
    """On-chip buffers (roots) allocated inside the program body: one copy per worker thread."""
    body = program_space(kernel)[2]
    bufs = kernel.buffer_map
    return {root_name(bufs, i.out.buffer) for i, _ in ir.walk(body) if i.op == "alloc"}


def programs_independent(kernel: ir.Kernel) -> bool:
    pvars, extents, body, prologue, epilogue = program_space(kernel)
    if not pvars or all(n <= 1 for n in extents):
        return False
    bufs = kernel.buffer_map
    if any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm" for b in bufs.values()):
        return False
    if any(i.op == "device_print" for i, _ in ir.walk(kernel.body)):
        return False
    return _iterations_independent(kernel, pvars, extents, body, private_buffers(kernel), {}, epilogue)


def _iterations_independent(kernel, pvars, extents, body, private: set, fixed: dict, after) -> bool:
    """The programs (values of `pvars` over `extents`) of `body` are independent (module contract);
    `fixed` names enclosing loop variables that keep one value while they run; `after` is what runs
    after them and must not read a private buffer."""
    return _why_dependent(kernel, pvars, extents, body, private, fixed, after) is None


def _at(instr: ir.Instr) -> str:
    loc = instr.loc
    return f" ({loc.file.rsplit('/', 1)[-1]}:{loc.line})" if loc is not None else ""


def _why_dependent(kernel, pvars, extents, body, private: set, fixed: dict, after) -> str | None:
    """None when `_iterations_independent`, else the first reason why not, in words."""
    bufs = kernel.buffer_map
    root = functools.partial(root_name, bufs)
    writes: dict[str, set] = {}
    for instr, loops in ir.walk(body):
        if instr.op == "alloc":
            continue
        for acc in instr.outs:
            b = bufs[acc.buffer]
            if b.space != ir.Space.HBM:
                if root(acc.buffer) not in private:
                    return (f"{instr.op}{_at(instr)} writes '{root(acc.buffer)}', an on-chip buffer allocated "
                            "outside the loop: iterations could accumulate into it")
                continue
            if b.base is not None:
                return f"{instr.op}{_at(instr)} writes a reshaped view of '{b.base}'"
            ext = dict(zip(pvars, extents))
            ext.update(fixed)
            ext.update({lp.var: lp.trip for lp in loops})
            ext.update({axis_var(a): n for a, n in enumerate(acc.shape)})
            for pid, n in zip(pvars, extents):
                if n == 1:
                    continue
                if not any(e.coeff(pid) != 0 and _span(e, ext, pid) < abs(e.coeff(pid)) for e in acc.index):
                    return (f"{instr.op}{_at(instr)} writes '{acc.buffer}' where different values of {pid} "
                            "may write the same elements")
            writes.setdefault(acc.buffer, set()).add(acc)
        if instr.op == "nc_matmul" and instr.attr("accumulate") and root(instr.out.buffer) not in private:
            return f"nc_matmul{_at(instr)} accumulates into '{root(instr.out.buffer)}', allocated outside the loop"
    for instr, _ in ir.walk(body):
        for acc in instr.ins:
            if isinstance(acc, ir.Access):
                r = root(acc.buffer)
                if r in writes and acc not in writes[r]:
                    return f"{instr.op}{_at(instr)} reads '{r}' in a region other iterations write"
    for instr, _ in ir.walk(after):
        for o in instr.ins:
            if isinstance(o, ir.Access) and root(o.buffer) in private:
                return f"{instr.op}{_at(instr)} reads '{root(o.buffer)}', a tile of the loop, after it"
    return None


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
    if any(i.op == "device_print" for i, _ in ir.walk(kernel.body)):
        return []
    _, _, body, prologue, epilogue = program_space(kernel)
    # the programs' own loops stay inside them when the programs already run on threads
    scope = tuple(prologue) + tuple(epilogue) if programs_independent(kernel) else kernel.body
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
                private = {root_name(bufs, i.out.buffer) for i, _ in ir.walk(n.body) if i.op == "alloc"}
                inside = {id(i) for i, _ in ir.walk(n.body)}
                # everything else runs before or after the loop, in this or another enclosing iteration
                others = tuple(i for i, _ in ir.walk(kernel.body) if id(i) not in inside)
                fixed = {lp.var: 1 for lp in enclosing}
                fixed.update({f"pid{g}": 1 for g in range(len(kernel.grid or ()))})
                if _iterations_independent(kernel, (n.var,), (n.trip,), n.body, private, fixed, others):
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
        if programs_independent(kernel):
            lines.append(f"programs: {what}{extra}: on threads")
        else:
            bufs = kernel.buffer_map
            if all(n <= 1 for n in extents):
                why = "a single program"
            elif any(i.op == "device_print" for i, _ in ir.walk(kernel.body)):
                why = "the kernel prints (device_print keeps its order)"
            elif any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm"
                     for b in bufs.values()):
                why = "the kernel has shared HBM scratch"
            else:
                why = _why_dependent(kernel, pvars, extents, body, private_buffers(kernel), {}, epilogue)
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
