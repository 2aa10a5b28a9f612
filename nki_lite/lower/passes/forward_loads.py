"""The "forward-loads" pass (JIT only, lower/passes/pipeline.py): changes neither a result bit nor
an error report, only the work.

`forward_loads(kernel, origin)`: a copy of an HBM region into a fresh on-chip tile `t` — either one
`t = load(x[view])` covering t, or a loop whose whole body is one load `t[i, ...] = load(x[view(i)])`
whose destinations over the loop's iterations cover t exactly once (a K x 512 matmul panel loaded
tile by tile) — unmasked, same dtype, followed in the same body by the only reads of t, is rewritten
so those reads (also inside later loops of the body) address x directly, when x is never written by
the kernel and t is written only by that copy. Reading the source instead of its exact copy gives
the same bits; the copy pass disappears (an elementwise reader finds the source row in cache after
its first read; a matmul's micro-kernel packs its operands anyway). Readers must be ops whose JIT
rule reads every input through the generic access path (trait `plain_reads`), each read statically
inside the tile. The copy stays in the body as a bounds check only (attr `forwarded`), so an
out-of-bounds load still fails at the load's line.
"""
from __future__ import annotations

from dataclasses import replace

from ...core import ir
from ...core.affine import Affine, axis_var
from ...core.ops import OPS, accumulates
from .origin import replaced as _replaced


def _compose(read: ir.Access, copy: ir.Instr, place: dict) -> ir.Access:
    """The access of the copy's source that `read` (an access of the copy's destination) denotes:
    `place` maps each variable of the destination index (the copy's axes, its loop variable) to
    the destination dimension it alone spans, so the read's index there is that variable's value."""
    src = copy.ins[0]
    to_src = {v: read.index[d] for v, d in place.items()}
    return ir.Access(src.buffer, tuple(e.subst(to_src) for e in src.index), read.shape)


def _placement(dst: ir.Access, shape: tuple, loop: ir.Loop | None) -> dict | None:
    """{variable: dimension} when every dimension of the tile `shape` is spanned by one variable of
    `dst` (coefficient 1, offset 0, its full extent): each axis of the access once, and the loop's
    variable once when the copy is a loop — so the copies together write every element once."""
    ext = {axis_var(k): n for k, n in enumerate(dst.shape)}
    if loop is not None:
        ext[loop.var] = loop.trip
    place = {}
    for d, (e, n) in enumerate(zip(dst.index, shape)):
        terms = e.coeffs
        if e.const != 0 or len(terms) != 1:
            return None
        (v, c), = terms.items()
        if c != 1 or v in place or ext.get(v) != n:
            return None
        place[v] = d
    return place if len(place) == len(ext) else None


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

    def copy_of(n):
        """(the load, its loop or None, placement) when node n is a forwardable copy, else None."""
        loop = None
        if isinstance(n, ir.Loop) and n.dynamic:
            return None            # may run no iteration (or many, at run-time offsets): no forwarding
        if isinstance(n, ir.Loop) and len(n.body) == 1 and isinstance(n.body[0], ir.Instr):
            loop, n = n, n.body[0]
        if not (isinstance(n, ir.Instr) and n.op == "dma_copy" and n.mask is None and len(n.outs) == 1
                and isinstance(n.ins[0], ir.Access)):
            return None
        t, src = bufs[n.out.buffer], n.ins[0]
        sb = bufs[src.buffer]
        if not (t.kind == "local" and t.space != ir.Space.HBM and t.base is None and t.name not in viewed
                and writes.get(t.name) == 1
                and sb.space == ir.Space.HBM and sb.dtype == t.dtype and writes.get(roots[src.buffer], 0) == 0
                and all(e.vars() <= {axis_var(k) for k in range(len(src.shape))} | _outer(e) for e in src.index)):
            return None
        place = _placement(n.out, t.shape, loop)
        return (n, loop, place) if place is not None else None

    def visit(nodes):
        nodes = [replace(n, body=tuple(visit(n.body))) if isinstance(n, ir.Loop) else n for n in nodes]
        for i, n in enumerate(nodes):
            found = copy_of(n)
            if found is None:
                continue
            cp, loop, place = found
            t = cp.out.buffer
            # the source's variables other than the ones the placement binds: the values outside
            # this body, which a read in a later loop of it sees unchanged unless that loop rebinds one
            free = {v for e in cp.ins[0].index for v in e.vars()} - place.keys()
            uses = [(o, trips) for m in nodes[i + 1:] for ins, trips in _instrs(m, {})
                    for o in ins.ins if isinstance(o, ir.Access) and o.buffer == t]
            users = [ins for m in nodes[i + 1:] for ins, _ in _instrs(m, {})
                     if any(isinstance(o, ir.Access) and o.buffer == t for o in ins.ins)]
            if (len(uses) != reads.get(t, 0) or any(not OPS[u.op].plain_reads for u in users)
                    or any(free & trips.keys() for _, trips in uses)
                    or not all(_static_inbounds(o, bufs[t].shape, trips) for o, trips in uses)):
                continue                 # read elsewhere, by another op, or maybe out of bounds

            def fwd(m):
                ins = tuple(_compose(o, cp, place) if isinstance(o, ir.Access) and o.buffer == t else o
                            for o in m.ins)
                return _replaced(origin, m, replace(m, ins=ins))
            for j in range(i + 1, len(nodes)):
                nodes[j] = _map_readers(nodes[j], t, fwd)
            done = _replaced(origin, cp, replace(cp, attrs=cp.attrs + (("forwarded", True),)))
            nodes[i] = replace(loop, body=(done,)) if loop is not None else done
            changed.append(cp)
        return nodes

    changed = []
    body = tuple(visit(list(kernel.body)))
    return replace(kernel, body=body) if changed else kernel


def _instrs(node, trips: dict):
    """(instruction, {loop variable: trip} of the loops around it inside `node`) for node's instructions."""
    if isinstance(node, ir.Loop):
        inner = {**trips, node.var: node.trip}
        for m in node.body:
            yield from _instrs(m, inner)
    else:
        yield node, trips


def _map_readers(node, t: str, fwd):
    """node with every instruction reading buffer t replaced by fwd(instruction)."""
    if isinstance(node, ir.Loop):
        return replace(node, body=tuple(_map_readers(m, t, fwd) for m in node.body))
    if any(isinstance(o, ir.Access) and o.buffer == t for o in node.ins):
        return fwd(node)
    return node


def _static_inbounds(read: ir.Access, shape: tuple, trips: dict) -> bool:
    """True when the access depends only on its own axes and the loops around it inside the body
    (`trips`) and stays inside `shape` (so it needs no run-time check: the forwarded read can never
    be the one that would have failed)."""
    ext = {**trips, **{axis_var(k): n for k, n in enumerate(read.shape)}}
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
