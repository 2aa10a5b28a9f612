"""Broadcasting of tile accesses against a target shape (NKI alignment rules).

Contract: `broadcast_access(acc, target)` views `acc` with shape `target` without moving data, or raises
shape_mismatch (NL-E103) naming the operand. NKI aligns the partition axis first and pads missing free
axes at the end; shapes that differ only by size-1 axes (a [1, F] tile against an [F] view, a [P] reduction
against a [P, 1] column, the 2-D results of integer-indexing on-chip tiles) pair their elements in order.
`broadcast_shapes` is the common shape of elementwise operands under the same rules.
"""

from __future__ import annotations

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core.affine import Affine, axis_var


def _err(name: str, msg: str, hint: str | None = None, depth: int = 3):
    return errors.make(name, msg, loc=capture_loc(depth), hint=hint)


def broadcast_access(acc: ir.Access, target: tuple[int, ...], what: str = "operand") -> ir.Access:
    """View `acc` with shape `target` (NKI alignment: partition axis first, missing free axes at the end)."""
    shape = acc.shape
    if shape == target:
        return acc
    if len(shape) > len(target) and all(s == 1 for s in shape[len(target):]):
        # trailing singleton axes hold no extra elements: a [P, 1] value into a view `t[:, j, k]` whose
        # integer indices left it [P] (the samples' adaptive pooling writes results this way)
        drop = {axis_var(a): Affine(0) for a in range(len(target), len(shape))}
        acc = ir.Access(acc.buffer, tuple(e.subst(drop) for e in acc.index), tuple(shape[:len(target)]))
        shape = acc.shape
        if shape == target:
            return acc
    if len(shape) != len(target) and _squeezed(shape) == _squeezed(target):
        return _match_unit_axes(acc, target)
    if len(shape) > len(target):
        raise _err("shape_mismatch", f"{what} of shape {shape} cannot broadcast to {target}", depth=4)
    src = tuple(shape) + (1,) * (len(target) - len(shape))
    subst = {}
    for a, (s, t) in enumerate(zip(src, target)):
        if s == t:
            subst[axis_var(a)] = Affine.var(axis_var(a))
        elif s == 1:
            subst[axis_var(a)] = Affine(0)
        else:
            hint = ("partition dimensions differ: call nl.broadcast_to(x, shape=...) explicitly" if a == 0
                    else "make the free dimensions equal, or 1 to broadcast")
            raise _err("shape_mismatch", f"{what} of shape {shape} cannot broadcast to {target}", hint, depth=4)
    return ir.Access(acc.buffer, tuple(e.subst(subst) for e in acc.index), tuple(target))


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _match_unit_axes(acc: ir.Access, target: tuple[int, ...]) -> ir.Access:
    """View `acc` with shape `target` when the two differ only by size-1 axes (the same elements in the
    same order): a [1, F] tile against an [F] view, a [P] reduction result against a [P, 1] tile. Each
    axis of size > 1 maps onto the next target axis of the same size; size-1 source axes take index 0."""
    tgt_axes = iter([a for a, n in enumerate(target) if n != 1])
    subst = {axis_var(a): (Affine(0) if n == 1 else Affine.var(axis_var(next(tgt_axes))))
             for a, n in enumerate(acc.shape)}
    return ir.Access(acc.buffer, tuple(e.subst(subst) for e in acc.index), tuple(target))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NKI broadcasting of tile shapes: align partition axes, pad free axes at the end."""
    nd = max(len(s) for s in shapes)
    out = []
    for a in range(nd):
        sizes = {s[a] if a < len(s) else 1 for s in shapes}
        sizes.discard(1)
        if len(sizes) > 1:
            hint = ("partition dimensions differ: call nl.broadcast_to(x, shape=...) explicitly" if a == 0
                    else "free dimensions must be equal, or 1 to broadcast")
            raise _err("shape_mismatch", f"operand shapes {' and '.join(map(str, shapes))} do not broadcast", hint,
                       depth=4)
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
