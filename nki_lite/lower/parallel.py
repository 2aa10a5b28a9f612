"""Which kernels may run their "programs" in parallel without changing any result.

Programs are the SPMD grid's instances — or, for a kernel without a grid whose body is a single
`affine_range` loop, that loop's iterations (`program_space`). The JIT runs a range of programs per
call of the native function; the runtime may split the range over threads.

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


def program_space(kernel: ir.Kernel) -> tuple[tuple[str, ...], tuple[int, ...], tuple]:
    """(program variables, their extents, the body each program runs)."""
    grid = kernel.grid or ()
    if grid:
        return tuple(f"pid{g}" for g in range(len(grid))), tuple(grid), kernel.body
    if len(kernel.body) == 1 and isinstance(kernel.body[0], ir.Loop) and kernel.body[0].kind == "affine":
        lp = kernel.body[0]
        return (lp.var,), (lp.trip,), lp.body
    return (), (), kernel.body


def programs_independent(kernel: ir.Kernel) -> bool:
    pvars, extents, body = program_space(kernel)
    if not pvars or all(n <= 1 for n in extents):
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
