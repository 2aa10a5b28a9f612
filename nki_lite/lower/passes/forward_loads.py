"""The "forward-loads" pass (JIT only, lower/passes/pipeline.py): changes neither a result bit nor
an error report, only the work.

`forward_loads(kernel, origin)`: `t = load(x[view])` (an unmasked full copy from HBM into a fresh
on-chip tile, same dtype) followed in the same body by reads of t is rewritten so those reads
address x[view] directly, when x is never written by the kernel and t is written only by that copy.
Reading the source instead of its exact copy gives the same bits; the copy pass disappears (the
source row is in cache after its first reader). The copy stays in the body as a bounds check only
(attr `forwarded`), so an out-of-bounds load still fails at the load's line.
"""
from __future__ import annotations

from dataclasses import replace

from ...core import ir
from ...core.affine import Affine, axis_var
from ...core.ops import OPS, accumulates
from .origin import replaced as _replaced


def _compose(read: ir.Access, copy: ir.Instr) -> ir.Access:
    """The access of the copy's source that `read` (an access of the copy's destination) denotes."""
    src = copy.ins[0]
    to_src = {axis_var(k): e for k, e in enumerate(read.index)}   # dest index k == src axis k
    return ir.Access(src.buffer, tuple(e.subst(to_src) for e in src.index), read.shape)


def forward_loads(kernel: ir.Kernel, origin: dict) -> ir.Kernel:
    bufs = kernel.buffer_map
    roots = {name: (b.base or name) for name, b in bufs.items()}
    writes, reads = {}, {}
    for ins, _ in ir.walk(kernel.body):
        if ins.op == "alloc":
            continue
        for o in ins.outs:
            writes[roots[o.buffer]] = writes.get(roots[o.buffer], 0) + 1
        for o in ins.ins:
            if isinstance(o, ir.Access):
                reads[o.buffer] = reads.get(o.buffer, 0) + 1
        if accumulates(ins):
            reads[ins.out.buffer] = reads.get(ins.out.buffer, 0) + 1
    viewed = {b.base for b in kernel.buffers if b.base}

    def forwardable(n) -> bool:
        if not (isinstance(n, ir.Instr) and n.op == "dma_copy" and n.mask is None and len(n.outs) == 1
                and isinstance(n.ins[0], ir.Access)):
            return False
        t, src = bufs[n.out.buffer], n.ins[0]
        sb = bufs[src.buffer]
        return (t.kind == "local" and t.space != ir.Space.HBM and t.base is None and t.name not in viewed
                and n.out == ir.Access.full(t) and writes.get(t.name) == 1
                and sb.space == ir.Space.HBM and sb.dtype == t.dtype and writes.get(roots[src.buffer], 0) == 0
                and all(e.vars() <= {axis_var(k) for k in range(len(src.shape))} | _outer(e)
                        for e in src.index))

    def visit(nodes):
        nodes = [replace(n, body=tuple(visit(n.body))) if isinstance(n, ir.Loop) else n for n in nodes]
        readers: dict[str, list[int]] = {}        # buffer -> instructions of this body reading it, in order
        for j, m in enumerate(nodes):
            if isinstance(m, ir.Instr):
                for b in dict.fromkeys(o.buffer for o in m.ins if isinstance(o, ir.Access)):
                    readers.setdefault(b, []).append(j)
        for i, n in enumerate(nodes):
            if not forwardable(n):
                continue
            t = n.out.buffer
            users = [j for j in readers.get(t, ()) if j > i]
            uses = [o for j in users for o in nodes[j].ins if isinstance(o, ir.Access) and o.buffer == t]
            if (len(uses) != reads.get(t, 0) or any(not OPS[nodes[j].op].plain_reads for j in users)
                    or not all(_static_inbounds(o, bufs[t].shape) for o in uses)):
                continue                 # read elsewhere (a nested loop, another op) or maybe out of bounds
            for j in users:
                m = nodes[j]
                ins = tuple(_compose(o, n) if isinstance(o, ir.Access) and o.buffer == t else o for o in m.ins)
                nodes[j] = _replaced(origin, m, replace(m, ins=ins))
            nodes[i] = _replaced(origin, n, replace(n, attrs=n.attrs + (("forwarded", True),)))
            changed.append(n)
        return nodes

    changed = []
    body = tuple(visit(list(kernel.body)))
    return replace(kernel, body=body) if changed else kernel


def _static_inbounds(read: ir.Access, shape: tuple) -> bool:
    """True when the access depends only on its own axes and stays inside `shape` (so it needs no
    run-time check: the forwarded read can never be the one that would have failed)."""
    ext = {axis_var(k): n for k, n in enumerate(read.shape)}
    for e, n in zip(read.index, shape):
        if not e.vars() <= ext.keys():
            return False
        lo, hi = e.bounds(ext)
        if lo < 0 or hi >= n:
            return False
    return True


def _outer(e: Affine) -> set:
    """Variables of `e` that are not axis variables (loop variables, program ids)."""
    return {v for v in e.vars() if not v.startswith("@")}
