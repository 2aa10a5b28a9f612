"""Tensor views that merge dimensions: `flatten_dims`, `reshape`, `rearrange`, and `view(dtype)` of HBM
views (lang/views.py has the contract and the other primitives).

Contract:
- Merging dims start..end is exact when, in every index expression, each merged axis's coefficient is
  the next one's times the next one's size (the dims are contiguous in storage); the merged axis then
  has the innermost coefficient. It is tried on the view's own per-dimension access first, then on
  its linear form (views._linear), which lowers through views._lower (an HBM 1-D alias or an on-chip
  buffer stored [partitions, free size] when no per-dimension index fits). Not contiguous: NL-E114.
- `reshape(shape)`: a whole HBM tensor keeps nki_lite's reshape (an HBM view buffer); any other view is
  merged to one free dimension (on-chip: dims 1.., the partition size unchanged; HBM: all dims) and
  split to the new shape (views.reshape_dim).
- `rearrange(src, dst, fixed_sizes)` (einops style): split src's groups, permute, merge dst's groups.
"""
from __future__ import annotations

from ..core import ir
from ..core.affine import Affine, axis_var
from .ops_memory import reshape as _whole_hbm_reshape, view as _whole_hbm_view
from .tile import Tile, provide_tile_ops
from .views import (_alias, _dim, _err, _linear, _lower, _on_chip, _prod, _remap, _root, _same_size_dtype,
                    _shift, _split_sizes, permute, reshape_dim)


def _merge_exprs(exprs, shape, start: int, end: int):
    """`exprs` with axes start..end merged into axis start (and later axes moved down), or None."""
    live = [k for k in range(start, end + 1) if shape[k] > 1]
    mapping = {axis_var(k): Affine(0) for k in range(start, end + 1)}
    mapping.update(_shift(end + 1, len(shape), start - end))
    out = []
    for e in exprs:
        for a, b in zip(live, live[1:]):
            if e.coeff(axis_var(a)) != e.coeff(axis_var(b)) * shape[b]:
                return None
        inner = e.coeff(axis_var(live[-1])) if live else 0
        out.append(e.subst(mapping) + Affine.var(axis_var(start), inner))
    return out


def flatten_dims(t: Tile, start_dim, end_dim) -> Tile:
    s, e = _dim(t, start_dim, "start_dim"), _dim(t, end_dim, "end_dim")
    if s > e:
        raise _err("view", f"flatten_dims({s}, {e}): start_dim must not exceed end_dim")
    if _on_chip(t) and s == 0:
        raise _err("view", f"flatten_dims({s}, {e}) of a {t.space.value} tensor: start_dim must be > 0 (the "
                   "partition dimension is not merged with free dimensions)")
    if s == e:
        return t
    shape = t.shape[:s] + (_prod(t.shape[s:e + 1]),) + t.shape[e + 1:]
    own = _merge_exprs(t.access.index, t.shape, s, e)
    if own is not None:
        return t.view_of(ir.Access(t.access.buffer, tuple(own), shape))
    part, free = _linear(t)
    lin = _merge_exprs([free] if part is None else [part, free], t.shape, s, e)
    if lin is None:
        raise _err("view_layout", f"flatten_dims({s}, {e}) of a view of shape {list(t.shape)}: dimensions {s}..{e} "
                   "are not contiguous in storage (a permuted, strided or broadcast view), so no single access "
                   "pattern dimension can walk them",
                   "copy the view into a contiguous tile first (nisa.tensor_copy), then merge that tile's dims")
    return _lower(t, None if part is None else lin[0], lin[-1], shape)


def reshape(t: Tile, *dims, shape=None) -> Tile:
    """t.reshape(shape), also t.reshape(a, b) and shape= (the legacy spellings)."""
    if shape is not None:
        if dims:
            raise _err("argument", "reshape takes the new shape once: positionally or as shape=, not both")
        dims = (shape,)
    dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if not _on_chip(t) and t.access == ir.Access.full(t.buf):
        return _whole_hbm_reshape(t, tuple(dims))
    sizes = _split_sizes(_prod(t.shape), dims, f"reshape{tuple(dims)} of a view of shape {list(t.shape)}")
    if _on_chip(t):
        if not sizes or sizes[0] != t.shape[0]:
            raise _err("reshape", f"reshape{tuple(dims)} of a {t.space.value} tensor of shape {list(t.shape)}: the "
                       f"partition size {t.shape[0]} must stay the first dimension (only HBM tensors can be reshaped "
                       "across partitions)", "reshape the HBM tensor before loading it")
        if t.ndim == 1:
            t = _remap(t, {}, t.shape + (1,))
        merged = flatten_dims(t, 1, t.ndim - 1)
        return reshape_dim(merged, 1, sizes[1:])
    merged = flatten_dims(t, 0, t.ndim - 1)
    return reshape_dim(merged, 0, sizes)


def _names(pattern, what: str) -> list:
    out = []
    for p in pattern:
        group = tuple(p) if isinstance(p, (tuple, list)) else (p,)
        if not group or not all(isinstance(n, str) for n in group):
            raise _err("view", f"rearrange {what} pattern entries are names or tuples of names, got {p!r}")
        out.append(group)
    return out


def rearrange(t: Tile, src_pattern, dst_pattern, fixed_sizes=None) -> Tile:
    src, dst = _names(src_pattern, "source"), _names(dst_pattern, "destination")
    fixed = dict(fixed_sizes or {})
    if len(src) != t.ndim:
        raise _err("view", f"rearrange: the source pattern has {len(src)} entries, the view has {t.ndim} dims")
    order = [n for g in src for n in g]
    if sorted(order) != sorted(n for g in dst for n in g) or len(set(order)) != len(order):
        raise _err("view", f"rearrange: the destination pattern must use each name of the source once, got "
                   f"{tuple(src_pattern)} -> {tuple(dst_pattern)}")
    for d in reversed(range(len(src))):          # split from the right: dims to the left keep their place
        if len(src[d]) > 1:
            t = reshape_dim(t, d, tuple(fixed.get(n, -1) for n in src[d]))
    t = permute(t, tuple(order.index(n) for g in dst for n in g))
    pos = 0
    spans = []
    for g in dst:
        spans.append((pos, pos + len(g) - 1))
        pos += len(g)
    for s, e in reversed(spans):
        if e > s:
            t = flatten_dims(t, s, e)
    return t


def view(t: Tile, dtype) -> Tile:
    """t.view(dtype): the same storage as another dtype of the same element size (HBM)."""
    if not _on_chip(t) and t.access == ir.Access.full(t.buf) and t.buf.base is None:
        return _whole_hbm_view(t, dtype)
    dt = _same_size_dtype(t, dtype, "view(dtype)")
    if dt is None:
        return t
    alias = _alias(t, _root(t), t.buf.shape, dt)
    return Tile(t._tracer, ir.Access(alias.name, t.access.index, t.shape), dt)


provide_tile_ops({"view_flatten_dims": flatten_dims, "view_reshape": reshape, "view_rearrange": rearrange,
                  "view_dtype": view})
Tile.view.__nki_partial__ = {"dtype": "same element size, HBM only"}
