"""Indirect (tile-valued) indexing: `src[idx_tile, j]`, `dst[idx_tile[i_p, 0], i_f]`,
`sb[ix, offsets[0, k] + iy]` — a view whose offset on one dimension is read from a tile at run time.

Contract:
- `split_key(key)` finds at most one *dynamic* entry in a subscript: an on-chip integer tile, or a
  `DynIndex` (such a tile plus an affine index expression, `offsets[0, k] + iy`). It returns the key
  with that entry replaced by its static part (an `Index` with the tile's layout, so advanced
  indexing sees the tile's axes) and the dynamic entry, or (key, None).
- `IndirectView` (lang/ops_indirect.py, a Tile subclass) is the resulting view: its static access
  (the affine part, as any view), the buffer dimension `dim` whose index gets the run-time value
  added, and `idx`, an access into the index tile with the view's shape (the index tile broadcast
  over the view). Only the data-movement
  APIs take it (nl.load / nl.store / nisa.dma_copy / nl.atomic_rmw / nisa.tensor_copy_dynamic_src,
  through `indirect_parts`); any other use is NL-E504 at the line, so no op can silently read the
  static part alone.
- The IR is docs/architecture.md's "dynamic offsets": an instruction `dma_indirect` /
  `copy_dynamic` carries the index access as an extra input and attrs `dyn` ("in"/"out": which side
  is indirect), `dim`, `oob` and `rmw`; `Affine` is unchanged.
"""
from __future__ import annotations

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..core.affine import Affine, axis_var
from ..loc import capture_loc
from .index import Index, as_index


def _err(name: str, msg: str, hint: str | None = None, depth: int = 4):
    return errors.make(name, msg, loc=capture_loc(depth), hint=hint)


class DynIndex:
    """`tile + index`: a run-time offset (the tile's values) plus an affine part."""

    __array_priority__ = 1001

    def __init__(self, tile, offset: Index):
        self.tile = tile
        self.offset = offset

    def _shift(self, other, sign: int):
        o = as_index(other)
        if o is NotImplemented:
            return NotImplemented
        return DynIndex(self.tile, self.offset + o if sign > 0 else self.offset - o)

    def __add__(self, o): return self._shift(o, 1)
    def __radd__(self, o): return self._shift(o, 1)
    def __sub__(self, o): return self._shift(o, -1)

    def __repr__(self) -> str:
        return f"DynIndex({self.tile!r} + {self.offset!r})"


def dyn_offset(tile, other, name: str, reverse: bool):
    """`tile + index` / `index + tile` / `tile - index`: a DynIndex, else None (not an index sum)."""
    if name not in ("add", "subtract") or isinstance(other, bool):
        return None
    if not isinstance(other, Index):
        return None
    if name == "subtract":
        if reverse:
            return None        # index - tile: a negated run-time offset, not an NKI index form
        return DynIndex(tile, -other)
    return DynIndex(tile, other)


def split_key(key: tuple, is_tile):
    """(key with the dynamic entry replaced by its static part, (position, tile)) or (key, None);
    `is_tile(k)`: is k a tile that can hold indices (a Tile that is not an IndirectView)."""
    pos = [d for d, k in enumerate(key) if isinstance(k, DynIndex) or is_tile(k)]
    if not pos:
        return key, None
    if len(pos) > 1:
        raise _err("unsupported", "indirect indexing on more than one dimension of one subscript",
                   "index one dimension by a tile; the others by nl.arange / slices")
    d = pos[0]
    k = key[d]
    tile, offset = (k.tile, k.offset) if isinstance(k, DynIndex) else (k, Index(Affine(0)))
    if tile.space == ir.Space.HBM:
        raise _err("memory_space", "an index tile of indirect indexing must be on chip (SBUF), not in HBM",
                   "nl.load the indices first")
    if not D.INFO[tile.dtype_name].is_int:
        raise _err("dtype", f"an index tile must have an integer dtype, got {tile.dtype_name}")
    shape = tile.shape
    if any(n != 1 for n in shape) or offset.ndim:
        # the tile's axes are result axes (advanced indexing): its layout joins the subscript's
        ndim = max(len(shape), offset.ndim)
        ext = dict(offset.extents)
        for a, n in enumerate(shape):
            if n != 1 and ext.setdefault(a, n) != n:
                raise _err("shape_mismatch", f"index tile of shape {shape} does not match the subscript's "
                           f"extent {ext[a]} on axis {a}")
        static = Index(offset.expr, ndim, ext)
    else:
        static = offset
    return key[:d] + (static,) + key[d + 1:], (d, tile)


def dynamic_dim(acc: ir.Access, pos: int) -> int:
    """The buffer dimension whose index holds axis `pos` of the indexed tile `acc` (coefficient 1)."""
    v = axis_var(pos)
    dims = [bd for bd, e in enumerate(acc.index) if e.coeff(v) != 0]
    if len(dims) != 1 or acc.index[dims[0]].coeff(v) != 1:
        raise _err("unsupported", "indirect indexing of a reshaped or strided view is not built",
                   "index the tensor itself by the index tile")
    return dims[0]


def use_error(depth: int = 3):
    return _err("indirect_use", "an indirectly indexed view (indexed by a tile) can only be moved by nl.load, "
                "nl.store, nisa.dma_copy, nl.atomic_rmw or nisa.tensor_copy_dynamic_src", depth=depth)
