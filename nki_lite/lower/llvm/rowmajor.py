"""Row-major execution of a body: when every instruction of a loop body works partition by
partition, the JIT runs the whole body for partition 0, then partition 1, ... instead of each
instruction over all 128 partitions. A row's intermediates (a few KB) then stay in L1/L2 instead
of streaming whole tiles through memory between instructions.

Contract: `row_local(em, nodes)` returns the common partition count P when the reordering cannot
change any result, else None. It can't when, for every instruction: the op only combines elements of
one partition (elementwise ops, copies, DMA, free-axis reductions, activation with its row
reduction); its iteration space has P partitions; and every buffer the body writes is accessed — by
every instruction of the body, reads included — only through one and the same partition mapping
(index `@0 + c` in one dimension, no `@0` in the others), so row p only ever reads what row p wrote.
Buffers the body only reads are unconstrained. Nested loops are not reordered.
"""
from __future__ import annotations

from ...core import ir
from ...core.affine import axis_var
from ...core.ops import OPS

_P = axis_var(0)


def _row_index(acc: ir.Access):
    """(dim, index expr) of the dimension carrying the partition axis with coefficient 1, or None."""
    dims = [d for d, e in enumerate(acc.index) if e.coeff(_P) != 0]
    if len(dims) != 1 or acc.index[dims[0]].coeff(_P) != 1:
        return None
    return dims[0], acc.index[dims[0]]


def row_local(em, nodes) -> int | None:
    instrs = [n for n in nodes if isinstance(n, ir.Instr)]
    if len(instrs) != len(nodes) or sum(1 for n in instrs if n.op != "alloc") < 2:
        return None
    work = [n for n in instrs if n.op != "alloc"]
    if any(not OPS[n.op].row_local for n in work):
        return None
    if any(not o.shape for n in work for o in n.outs):
        return None                       # a 0-d view (`t[i, j] = v`) has no partition axis to split
    P = work[0].outs[0].shape[0]
    if P < 2:
        return None
    written: set[str] = set()
    for n in work:
        shape = n.ins[0].shape if OPS[n.op].input_space else n.outs[0].shape
        if not shape or shape[0] != P or any(o.shape[0] != P for o in n.outs):
            return None
        written |= {em.root(o.buffer) for o in n.outs}
    mapping: dict[str, tuple] = {}
    for n in work:
        for acc in list(n.outs) + [o for o in n.ins if isinstance(o, ir.Access)]:
            root = em.root(acc.buffer)
            if root not in written:
                continue
            if acc.buffer != root:                  # an HBM view of a written tensor: keep it simple
                return None
            ri = _row_index(acc)
            if ri is None or mapping.setdefault(root, ri) != ri:
                return None
    return P
