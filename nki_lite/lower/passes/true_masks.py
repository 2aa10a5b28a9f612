"""The "drop-true-masks" pass (JIT only, lower/passes/pipeline.py): changes neither a result bit nor
an error report, only the work.

`drop_true_masks(kernel, origin)`: a mask whose every comparison holds over the instruction's whole
iteration space is removed. Axis variables range over the instruction's operand shapes, loop
variables over their trip counts, SPMD program ids over the grid. A `valid = i*128 + ip < rows` mask
on a kernel whose rows are a multiple of 128 is the usual case; without the mask the instruction
takes the unmasked (vectorised, fusable) code path.
"""
from __future__ import annotations

from dataclasses import replace

from ...core import ir
from ...core.affine import Mask, axis_var
from .origin import replaced as _replaced


def _holds(lo: int, hi: int, op: str) -> bool:
    return {"<": hi < 0, "<=": hi <= 0, ">": lo > 0, ">=": lo >= 0, "==": lo == hi == 0,
            "!=": hi < 0 or lo > 0}[op]


def _always_true(mask: Mask, instr: ir.Instr, loops: dict) -> bool:
    ext = dict(loops)
    for acc in list(instr.outs) + [o for o in instr.ins if isinstance(o, ir.Access)]:
        for k, n in enumerate(acc.shape):                  # the widest shape: conservative
            ext[axis_var(k)] = max(ext.get(axis_var(k), 1), n)
    for c in mask.terms:
        if not c.expr.vars() <= ext.keys():
            return False
        if not _holds(*c.expr.bounds(ext), c.op):
            return False
    return True


def drop_true_masks(kernel: ir.Kernel, origin: dict) -> ir.Kernel:
    grid = {f"pid{g}": n for g, n in enumerate(kernel.grid or ())}

    changed = []           # (not `body == kernel.body`: comparing deep loop nests recurses per level)

    def visit(nodes, loops):
        out = []
        for n in nodes:
            if isinstance(n, ir.Loop):
                out.append(replace(n, body=tuple(visit(n.body, {**loops, n.var: n.trip}))))
            elif n.mask is not None and _always_true(n.mask, n, loops):
                out.append(_replaced(origin, n, replace(n, mask=None)))
                changed.append(n)
            else:
                out.append(n)
        return out

    body = tuple(visit(kernel.body, grid))
    return replace(kernel, body=body) if changed else kernel
