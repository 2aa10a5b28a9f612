"""Which kernels may run their "programs" in parallel without changing any result.

Programs are the SPMD grid's instances — or, for a kernel without a grid whose body ends with an
`affine_range` loop, that loop's iterations (`program_space`); the statements before that loop are
the *prologue* (typically loads of weights or constants into SBUF). The JIT runs the prologue and
then a range of programs per call of the native function; the runtime may split the range over
threads, each of which then runs the prologue into its own on-chip memory.

Contract: `programs_independent(kernel)` returns True only when running the programs in any order,
concurrently, gives exactly the serial results: every write to memory shared between programs
(HBM inputs/outputs) is separated by program id — for each grid axis with more than one program,
some dimension of the write's index is `c * pid + rest` with the rest spanning less than |c|, so two
programs never write the same element — and a program only reads shared memory the kernel writes
through exactly the access it writes it with (its own region). Kernels with device_print, HBM views
of written tensors, or shared HBM scratch are kept serial. False means "not proven": run serially.
"""
from __future__ import annotations

from . import ir
from .affine import Affine, axis_var


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


def program_space(kernel: ir.Kernel) -> tuple[tuple[str, ...], tuple[int, ...], tuple, tuple]:
    """(program variables, their extents, the body each program runs, the prologue run before the
    programs of each native call)."""
    grid = kernel.grid or ()
    if grid:
        return tuple(f"pid{g}" for g in range(len(grid))), tuple(grid), kernel.body, ()
    if kernel.body and isinstance(kernel.body[-1], ir.Loop) and kernel.body[-1].kind == "affine":
        lp = kernel.body[-1]
        return (lp.var,), (lp.trip,), lp.body, kernel.body[:-1]
    return (), (), kernel.body, ()


def _prologue_repeatable(kernel: ir.Kernel, prologue: tuple, body: tuple) -> bool:
    """Running the prologue once per thread (each into its own on-chip memory) gives the serial
    results: it writes no HBM, reads no HBM the kernel writes, and what it writes on chip the
    programs only read; every on-chip buffer the programs write is allocated inside them (so no
    program accumulates into state another program would see)."""
    bufs = kernel.buffer_map
    root = lambda name: bufs[name].base or name          # noqa: E731
    written_hbm = {root(o.buffer) for i, _ in ir.walk(kernel.body) if i.op != "alloc" for o in i.outs
                   if bufs[o.buffer].space == ir.Space.HBM}
    pro_written = set()
    for instr, _ in ir.walk(prologue):
        if instr.op == "device_print":
            return False
        for o in instr.outs:
            if bufs[o.buffer].space == ir.Space.HBM:
                return False
            pro_written.add(root(o.buffer))
        for o in instr.ins:
            if isinstance(o, ir.Access) and root(o.buffer) in written_hbm:
                return False
    allocated_inside = {root(i.out.buffer) for i, _ in ir.walk(body) if i.op == "alloc"}
    for instr, _ in ir.walk(body):
        if instr.op == "alloc":
            continue
        for o in instr.outs:
            r = root(o.buffer)
            if bufs[o.buffer].space != ir.Space.HBM and (r in pro_written or r not in allocated_inside):
                return False
    return True


def programs_independent(kernel: ir.Kernel) -> bool:
    pvars, extents, body, prologue = program_space(kernel)
    if not pvars or all(n <= 1 for n in extents):
        return False
    if prologue and not _prologue_repeatable(kernel, prologue, body):
        return False
    bufs = kernel.buffer_map
    if any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm" for b in bufs.values()):
        return False
    writes: dict[str, set] = {}
    for instr, loops in ir.walk(kernel.body):
        if instr.op == "device_print":
            return False
        for acc in instr.outs:
            b = bufs[acc.buffer]
            if b.space != ir.Space.HBM:
                continue
            if b.base is not None:
                return False
            ext = dict(zip(pvars, extents))
            ext.update({lp.var: lp.trip for lp in loops})
            ext.update({axis_var(a): n for a, n in enumerate(acc.shape)})
            for pid, n in zip(pvars, extents):
                if n == 1:
                    continue
                if not any(e.coeff(pid) != 0 and _span(e, ext, pid) < abs(e.coeff(pid)) for e in acc.index):
                    return False
            writes.setdefault(acc.buffer, set()).add(acc)
    for instr, _ in ir.walk(kernel.body):
        for acc in instr.ins:
            if isinstance(acc, ir.Access):
                root = bufs[acc.buffer].base or acc.buffer
                if root in writes and acc not in writes[root]:
                    return False
    return True
