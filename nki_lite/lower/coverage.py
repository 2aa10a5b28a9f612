"""Proving that a kernel writes every element of an output (so the JIT may skip pre-filling it).

Contract: `fully_written(kernel, name)` returns True only when one write instruction provably covers
every element of output `name`; False means "not proven" (the caller then NaN-fills the output so
unwritten elements are visible, as the interpreter does). The proof handles the common "box" form:
each output dimension's index is an affine expression of its own variables (loop variables, program
ids, tile axes), each mask comparison involves the variables of a single dimension, and then the
written set is the product over dimensions of the per-dimension value sets, each enumerated exactly.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..core import ir
from ..core.affine import Affine, axis_var

BUDGET = 1 << 20          # points enumerated per dimension


def _var_extents(instr: ir.Instr, loops, grid) -> dict[str, int]:
    ext = {f"pid{k}": g for k, g in enumerate(grid)}
    ext.update({lp.var: lp.trip for lp in loops})
    ext.update({axis_var(a): n for a, n in enumerate(instr.outs[0].shape)})
    return ext


def _values(expr: Affine, terms, ext: dict, dim: int) -> np.ndarray | None:
    """Boolean [dim] of the values expr takes where all (single-dimension) mask terms hold."""
    names = sorted(expr.vars() | {v for t in terms for v in t.expr.vars()})
    sizes = [ext[v] for v in names]
    if int(np.prod(sizes, dtype=np.int64)) > BUDGET:
        return None
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in sizes], indexing="ij") if names else []
    env = {v: g.ravel() for v, g in zip(names, grids)}
    n = grids[0].size if names else 1

    def ev(e: Affine):
        val = np.full(n, e.const, dtype=np.int64)
        for v, c in e.terms:
            val = val + c * env[v]
        return val
    ok = np.ones(n, dtype=bool)
    for t in terms:
        ok &= {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}[t.op](ev(t.expr), 0)
    vals = ev(expr)[ok]
    hit = np.zeros(dim, dtype=bool)
    hit[vals[(vals >= 0) & (vals < dim)]] = True
    return hit


def _holds(v: int, op: str) -> bool:
    return {"<": v < 0, "<=": v <= 0, ">": v > 0, ">=": v >= 0, "==": v == 0, "!=": v != 0}[op]


def fully_written(kernel: ir.Kernel, name: str) -> bool:
    buf = kernel.buffer(name)
    for instr, loops in ir.walk(kernel.body):
        if any(lp.trip <= 0 for lp in loops):
            continue
        for acc in instr.outs:
            if acc.buffer != name:
                continue
            dims_vars = [e.vars() for e in acc.index]
            if any(a & b for a, b in itertools.combinations(dims_vars, 2)):
                continue                                   # not a box: variables shared by dimensions
            terms = list(instr.mask.terms) if instr.mask is not None else []
            per_dim: list[list] = [[] for _ in acc.index]
            box = True
            for t in terms:
                if not t.expr.vars():                      # a constant comparison
                    if not _holds(t.expr.const, t.op):
                        box = False
                        break
                    continue
                owners = [d for d, vs in enumerate(dims_vars) if t.expr.vars() & vs]
                if len(owners) != 1 or not t.expr.vars() <= dims_vars[owners[0]]:
                    box = False
                    break
                per_dim[owners[0]].append(t)
            if not box:
                continue
            ext = _var_extents(instr, loops, kernel.grid or ())
            covered = True
            for d, e in enumerate(acc.index):
                hit = _values(e, per_dim[d], ext, buf.shape[d])
                if hit is None or not hit.all():
                    covered = False
                    break
            if covered:
                return True
    return False
