"""Operands of one elementwise instruction with the same element count but different free shapes.

Contract: the current dialect's reference says of its elementwise instructions (tensor_tensor,
tensor_scalar, activation, tensor_copy, ...): "The two tiles must have the same partition axis size
and the same number of elements per partition" — shapes need not be equal, and the engines pair the
elements in each access pattern's own (row-major) order. The NKI Library relies on it: a [128, 160]
score tile minus a [128, 8, 20] broadcast view of the row maxima; a [128, 512, 1] PSUM view plus a
[128, 1, 512] bias view (which numpy-style broadcasting would wrongly widen to [128, 512, 512]).

`conform(dst, *operands)` returns dst and the operands, where every tile whose partition size and
per-partition element count equal dst's is re-viewed with one common free shape: size-1 free axes
dropped, then each axis split (`reshape_dim`, an affine view: no copy) into the common refinement of
all their free shapes — the coarsest shape every one of them splits into, so that the row-major
pairing of elements is the view's elementwise pairing. Other operands (scalars, [P, 1] columns that
broadcast as in the legacy dialect, tiles of another count) are returned unchanged, and so is
everything when the shapes already agree or have no common refinement (the legacy instruction's
NL-E103 then names the shapes).
"""
from __future__ import annotations

from math import prod

from . import _bridge


def conform(dst, *operands) -> tuple:
    if not _bridge.is_tensor(dst) or len(dst.shape) < 2:
        return (dst, *operands)
    part, count = dst.shape[0], prod(dst.shape[1:])
    members = [i for i, t in enumerate((dst, *operands))
               if _bridge.is_tensor(t) and len(t.shape) >= 2 and t.shape[0] == part and prod(t.shape[1:]) == count]
    values = [dst, *operands]
    shapes = {tuple(values[i].shape) for i in members}
    if count <= 1 or len(members) < 2 or len(shapes) == 1:
        return tuple(values)
    refined = _refinement([[n for n in s[1:] if n != 1] for s in shapes])
    if refined is None:
        return tuple(values)
    for i in members:
        values[i] = _split(values[i], refined)
    return tuple(values)


def _refinement(shapes: list[list[int]]) -> list[int] | None:
    """The coarsest shape that each of `shapes` (same product) splits into, or None if there is none
    ((6, 4) and (4, 6): 4 does not divide 6)."""
    cuts = sorted({prod(s[:k]) for s in shapes for k in range(len(s) + 1)})
    if any(b % a for a, b in zip(cuts, cuts[1:])):
        return None
    return [b // a for a, b in zip(cuts, cuts[1:])]


def _split(t, refined: list[int]):
    """t viewed with the free shape `refined`: its size-1 free axes squeezed, each other axis split."""
    for d in range(len(t.shape) - 1, 0, -1):
        if t.shape[d] == 1:
            t = t.squeeze_dim(d)
    start, d = 1, 1
    while d < len(t.shape):
        n, sizes = t.shape[d], []
        while prod(sizes) < n:
            sizes.append(refined[start - 1 + len(sizes)])
        if len(sizes) > 1:
            t = t.reshape_dim(d, sizes)
        start += len(sizes)
        d += len(sizes)
    return t
