"""Linear storage of tensors: the index arithmetic behind tensor views (lang/views.py).

Contract:
- `flat_index(shape, index)` is the row-major element offset of a multi-dimensional affine index.
- `unflatten(flat, shape, extents)` splits a linear offset back into one affine index per dimension of
  `shape`, or returns None when no such split is exact: each variable's coefficient must be a multiple of
  one dimension's stride, and every dimension's index must stay inside the dimension over the
  variables' ranges (`extents`), so no carry between dimensions can ever happen. When it succeeds,
  the per-dimension indices address exactly the elements of the linear offset.
- `flatten_buffers(buffers, body, names)`: an on-chip buffer whose view merges free dimensions that no
  per-dimension index can express (`t.reshape((P, A*B))` of a [P, A, B] tile) is stored as [P, A*B]:
  the buffer's shape becomes (partitions, free size) and every access written against its original
  dimensions is rewritten to (partition index, linear free index). Accesses made by the views already
  have that form. Same bytes, same partition, same element order: only the index form changes, so
  the interpreter, the JIT and the engine model see one consistent buffer.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from .. import errors
from ..core import ir
from ..core.affine import Affine


def strides(shape: Sequence[int]) -> list[int]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return out[::-1]


def flat_index(shape: Sequence[int], index: Sequence[Affine]) -> Affine:
    off = Affine(0)
    for e, s in zip(index, strides(shape)):
        off = off + e.scale(s)
    return off


def unflatten(flat: Affine, shape: Sequence[int], extents: Mapping[str, int]) -> tuple[Affine, ...] | None:
    if not shape:
        return () if flat == Affine(0) else None
    st = strides(shape)
    total = st[0] * shape[0]
    if any(v not in extents for v in flat.vars()) or not 0 <= flat.const < total:
        return None
    idx = [Affine(0)] * len(shape)
    rest = flat.const
    for d, s in enumerate(st):
        idx[d] = Affine(rest // s)
        rest %= s
    for v, a in flat.terms:
        d = next(d for d, s in enumerate(st) if a % s == 0)
        idx[d] = idx[d] + Affine.var(v, a // st[d])
    for d, e in enumerate(idx):
        lo, hi = e.bounds(extents)
        if lo < 0 or hi >= shape[d]:
            return None
    return tuple(idx)


def flatten_buffers(buffers: dict[str, ir.Buffer], body: tuple, names: set[str]) -> tuple[dict, tuple]:
    """The buffer table and body with the buffers `names` stored as [partitions, free size]."""
    old = {n: buffers[n] for n in names if len(buffers[n].shape) > 2}
    if not old:
        return buffers, body
    new = dict(buffers)
    for n, b in old.items():
        free = 1
        for s in b.shape[1:]:
            free *= s
        new[n] = replace(b, shape=(b.shape[0], free))

    def acc(a):
        if not isinstance(a, ir.Access) or a.buffer not in old or len(a.index) != len(old[a.buffer].shape):
            return a
        shape = old[a.buffer].shape
        return ir.Access(a.buffer, (a.index[0], flat_index(shape[1:], a.index[1:])), a.shape)

    def node(n):
        if isinstance(n, ir.Loop):
            return replace(n, body=tuple(node(c) for c in n.body))
        if n.op == "alloc" and n.outs and n.outs[0].buffer in old:
            return replace(n, outs=(ir.Access.full(new[n.outs[0].buffer]),))
        if not any(isinstance(a, ir.Access) and a.buffer in old for a in n.outs + n.ins):
            return n
        if n.attr("dyn"):
            raise errors.make("unsupported", "an indirect (run-time indexed) copy of an on-chip tensor that a "
                              "view stores with merged free dimensions is not built", loc=n.loc,
                              hint="index a separate tile, or drop the merging reshape / flatten_dims view")
        return replace(n, outs=tuple(acc(a) for a in n.outs), ins=tuple(acc(a) for a in n.ins))

    return new, tuple(node(n) for n in body)
