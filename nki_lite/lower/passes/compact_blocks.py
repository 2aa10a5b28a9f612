"""Block tensors allocated as used: a block-dimension tensor whose blocks each belong to one iteration
of a loop holds only that iteration's blocks, allocated at the top of the loop's body.

Why: public kernels (NKIBench's matmul and lora) declare SBUF/PSUM tensors such as
`(12, 32, 5, par_dim(128), 1024)` up front and touch each block within one iteration; the hardware
compiler keeps only the blocks live at the same time. Allocated at their declared size, both
backends need gigabytes of host memory for a kernel whose on-chip footprint fits the chip.

Contract: `compact_blocks(kernel, origin)` rewrites every tensor with a `BlockScope`
(lower/blocks.py, the rule the capacity footprints charge by) that has one `alloc`, no views and
fewer blocks after compaction: the tensor keeps its name, its block dimensions shrink to the kept
ones (`keep`; the others are fixed within an iteration and dropped from every index), its `alloc`
and fills (whole-tensor memsets) move to the top of the owning loop's body, so every iteration
starts from the contents the declared tensor had at that block's first use. Results are bit for
bit those of the declared tensor; reads of never-written elements read the uninitialised fill
either way. The tile is then an ordinary loop-local tile: the interpreter frees it per iteration,
the JIT's arena reuses its bytes and parallel regions keep it per thread. Runs after verification
(errors and the capacity rule see the tensor as declared), for the interpreter and the JIT; the
engine model keeps the declared tensor. `origin` maps each rewritten instruction to the traced one.
"""
from __future__ import annotations

from dataclasses import replace

from ...core import ir
from ..analysis.accesses import roots_with_views
from ..blocks import block_scopes, compact_blocks as compacted_blocks
from ..analysis.ranges import prod
from ..verify_common import Ctx
from .origin import replaced


def _plan(kernel: ir.Kernel):
    """name -> (scope, compacted buffer) for the tensors worth compacting."""
    ctx = Ctx.build(kernel)
    viewed = roots_with_views(kernel)
    allocs: dict[str, int] = {}
    for ins, _ in ir.walk(kernel.body):
        if ins.op == "alloc":
            allocs[ins.out.buffer] = allocs.get(ins.out.buffer, 0) + 1
    plan = {}
    for name, sc in block_scopes(ctx).items():
        b = kernel.buffer_map[name]
        if allocs.get(name) != 1 or name in viewed or b.base is not None:
            continue
        if compacted_blocks(b, sc) >= prod(b.shape[:b.par_axis]):
            continue
        p = b.par_axis
        nb = replace(b, shape=tuple(b.shape[d] for d in sc.keep) + b.shape[p:], par_axis=len(sc.keep))
        plan[name] = (sc, nb, p)
    return plan


def _access(acc: ir.Access, plan) -> ir.Access:
    hit = plan.get(acc.buffer)
    if hit is None:
        return acc
    sc, _, p = hit
    return replace(acc, index=tuple(acc.index[d] for d in sc.keep) + acc.index[p:])


def compact_blocks(kernel: ir.Kernel, origin: dict) -> ir.Kernel:
    plan = _plan(kernel)
    if not plan:
        return kernel
    moved: set[int] = set()                       # the allocs and fills that move into the loops
    head: dict[int, list[ir.Instr]] = {}          # id(loop) -> instructions opening its body
    for ins, _ in ir.walk(kernel.body):
        if ins.op == "alloc" and ins.out.buffer in plan:
            sc, nb, _ = plan[ins.out.buffer]
            moved.add(id(ins))
            head.setdefault(id(sc.loops[-1]), []).append(
                replaced(origin, ins, replace(ins, outs=(ir.Access.full(nb),))))
    for sc, nb, _ in plan.values():
        for s in sc.fills:
            moved.add(id(s.instr))
            head[id(sc.loops[-1])].append(
                replaced(origin, s.instr, replace(s.instr, outs=(ir.Access.full(nb),))))

    def instr(n: ir.Instr) -> ir.Instr:
        if not any(isinstance(a, ir.Access) and a.buffer in plan for a in n.outs + n.ins):
            return n
        return replaced(origin, n, replace(n, outs=tuple(_access(a, plan) for a in n.outs),
                                           ins=tuple(_access(a, plan) if isinstance(a, ir.Access) else a
                                                     for a in n.ins)))

    def body(nodes) -> tuple:
        out = []
        for n in nodes:
            if isinstance(n, ir.Loop):
                out.append(replace(n, body=tuple(head.get(id(n), ())) + body(n.body)))
            elif id(n) not in moved:
                out.append(instr(n))
        return tuple(out)

    bufs = tuple(plan[b.name][1] if b.name in plan else b for b in kernel.buffers)
    return replace(kernel, buffers=bufs, body=body(kernel.body))
