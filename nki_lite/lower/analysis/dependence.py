"""Dependence: when do iterations of a loop (or the SPMD programs) not depend on each other?

One module for the questions the verifier (rule 9, verify_deps.py), the parallel planner
(parallel.py), the JIT and the debug interpreter ask about loop-carried dependencies:
- `allocated_in(kernel, nodes)`: root buffers allocated inside `nodes` (a loop's body): a fresh tile
  in every iteration, so never a dependence between iterations (and one copy per worker thread);
- `hbm_shared_across(root, loop)`: does one HBM tensor exist across the iterations of `loop`
  (kernel inputs/outputs and shared_hbm do; private nl.hbm scratch declared inside the loop does not);
- `accumulation_exempt(bufs, instr, acc)`: the accumulation idioms that are not loop-carried
  dependencies (PSUM `+=`, `nc_matmul(accumulate=True)`, an associative read-modify-write of exactly
  the written location);
- `program_space(kernel)`, `private_buffers(kernel)`, `programs_independent(kernel)`,
  `iterations_independent(...)` / `why_dependent(...)`: may the programs (or a loop's iterations) run
  in parallel with exactly the serial results? The contract follows.

Programs are the SPMD grid's instances — or, for a kernel without a grid, the iterations of its last
top-level `affine_range` loop (`program_space`). Statements before that loop are the *prologue*,
statements after it the *epilogue*; on-chip buffers allocated inside the program body are *private*
(each worker has its own copy), every other on-chip buffer is *shared*.

`programs_independent(kernel)` returns True only when that parallel schedule gives exactly the serial
results:
- every HBM write of a program is separated by program id — for each program axis with more than one
  program, some dimension of the write's index is `c * pid + rest` with the rest spanning less than
  |c|, so two programs never write the same element — and a program only reads HBM the programs write
  through exactly the access it writes it with (its own region);
- programs write on-chip memory only in private buffers (no accumulation into shared state), and the
  epilogue reads no private buffer (serially it would see the last program's values);
- no device_print, no HBM views of written tensors, no shared HBM scratch.
The prologue runs once before any program and the epilogue after all of them, as in the serial order,
so what they read and write needs no further condition. False means "not proven": run serially.
The verifier's rule 9 asks the sharper question (an exact witness of two iterations writing one
element, verify_deps.py) with the same exemptions. Pure functions of the IR; nothing raises.
"""
from __future__ import annotations

import functools

from ...core import ir
from ...core.affine import Affine, axis_var
from ...core.ops import accumulates, dynamic_access, host_effect
from .accesses import root_name

ASSOCIATIVE = ("add", "multiply", "maximum", "minimum")


def allocated_in(kernel: ir.Kernel, nodes) -> set[str]:
    bufs = kernel.buffer_map
    return {root_name(bufs, i.out.buffer) for i, _ in ir.walk(nodes) if i.op == "alloc"}


def hbm_shared_across(root: ir.Buffer, loop: ir.Loop) -> bool:
    """Kernel inputs/outputs and shared_hbm tensors exist once; a private HBM scratch tensor (nl.hbm)
    counts as declared outside the loop only when it provably was (same file, an earlier line): HBM
    buffers have no alloc instruction that would say where they come to life."""
    if root.kind != "local" or root.hbm_kind == "shared_hbm":
        return True
    if root.loc is None or loop.loc is None:
        return False
    return root.loc.file == loop.loc.file and root.loc.line < loop.loc.line


def accumulation_exempt(bufs, instr: ir.Instr, acc: ir.Access) -> bool:
    if accumulates(instr):
        return True
    if (instr.op == "tensor_tensor" and instr.attr("op") == "add" and bufs[acc.buffer].space == ir.Space.PSUM
            and any(isinstance(a, ir.Access) and a.buffer == acc.buffer for a in instr.ins)):
        return True
    # Associative reductions are not loop-carried dependencies (legacy affine_range docs; AWS's mamba
    # tutorial accumulates `sbuf_acc[...] += x` inside affine_range): an element-wise read-modify-write
    # of exactly the written location with an associative, commutative op.
    if (instr.op == "tensor_tensor" and instr.attr("op") in ASSOCIATIVE
            and any(isinstance(a, ir.Access) and a == acc for a in instr.ins)):
        return True
    return False


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
    return allocated_in(kernel, program_space(kernel)[2])


def programs_independent(kernel: ir.Kernel) -> bool:
    pvars, extents, body, prologue, epilogue = program_space(kernel)
    if not pvars or all(n <= 1 for n in extents):
        return False
    bufs = kernel.buffer_map
    if any(b.space == ir.Space.HBM and b.kind == "local" and b.hbm_kind == "shared_hbm" for b in bufs.values()):
        return False
    if any(host_effect(i) for i, _ in ir.walk(kernel.body)):
        return False
    return iterations_independent(kernel, pvars, extents, body, private_buffers(kernel), {}, epilogue)


def iterations_independent(kernel, pvars, extents, body, private: set, fixed: dict, after) -> bool:
    """The programs (values of `pvars` over `extents`) of `body` are independent (module contract);
    `fixed` names enclosing loop variables that keep one value while they run; `after` is what runs
    after them and must not read a private buffer."""
    return why_dependent(kernel, pvars, extents, body, private, fixed, after) is None


def _at(instr: ir.Instr) -> str:
    loc = instr.loc
    return f" ({loc.file.rsplit('/', 1)[-1]}:{loc.line})" if loc is not None else ""


def why_dependent(kernel, pvars, extents, body, private: set, fixed: dict, after) -> str | None:
    """None when `_iterations_independent`, else the first reason why not, in words."""
    bufs = kernel.buffer_map
    root = functools.partial(root_name, bufs)
    writes: dict[str, set] = {}
    for instr, loops in ir.walk(body):
        if instr.op == "alloc":
            continue
        if (dynamic_access(instr) or ("",))[0] == "out":
            # run-time indices may reach any element of their dimension: never proven independent
            return f"{instr.op}{_at(instr)} writes at indices read at run time"
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
        if accumulates(instr) and root(instr.out.buffer) not in private:
            return f"nc_matmul{_at(instr)} accumulates into '{root(instr.out.buffer)}', allocated outside the loop"
    for instr, _ in ir.walk(body):
        dyn = dynamic_access(instr)
        for k, acc in enumerate(instr.ins):
            if isinstance(acc, ir.Access):
                r = root(acc.buffer)
                indirect = dyn is not None and dyn[:2] == ("in", k)     # may read any row of r
                if r in writes and (indirect or acc not in writes[r]):
                    return f"{instr.op}{_at(instr)} reads '{r}' in a region other iterations write"
    for instr, _ in ir.walk(after):
        for o in instr.ins:
            if isinstance(o, ir.Access) and root(o.buffer) in private:
                return f"{instr.op}{_at(instr)} reads '{root(o.buffer)}', a tile of the loop, after it"
    return None
