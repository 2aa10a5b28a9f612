"""Tensor views of the current dialect: `t.ap(...)`, `slice`, `select`, `expand_dim`, `squeeze_dim`,
`flatten_dims`, `reshape_dim`, `reshape`, `permute`, `rearrange`, `broadcast`, `view(dtype)`,
`vector_select` and `is_indirect` (NKI's nki/deep-dives/nki-aps.rst and the NkiTensor reference).

Contract:
- One mechanism: a view is an affine map from the view's index space to its storage's, i.e. a plain
  `Tile` over an `ir.Access` (no copy, no new IR op), so verification, the interpreter, the JIT and the
  engine model treat it as any other access (the cost model charges its descriptors as it does any
  strided access).
- Primitives that only re-index axes (slice, select, expand/squeeze, permute, broadcast, reshape_dim)
  substitute the view's axis variables. Primitives that need the linear layout (`.ap`, merging
  dimensions) work on the storage's linear offset — for on-chip tensors (partition index, offset in
  the partition), for HBM the offset in the root tensor — and lower it back with
  flat_storage.unflatten; where no per-dimension index is exact, an HBM view addresses a 1-D alias of
  its root and an on-chip buffer is stored [partitions, free size] (flat_storage.flatten_buffers).
- `.ap(pattern, offset)`: `[step, num]` pairs, outermost first; the view's shape is the nums. On SBUF/PSUM
  the first pair is the partition access and its step must be the tensor's free size (contiguous
  partitions; any step when num is 1). `offset` is added to the view's storage offset (None: the view's
  own offset), as the reference's NkiTensor.ap documents. An access that provably leaves the tensor is
  NL-E501 at the line (ranges over loop variables are exact); a malformed pattern is NL-E112.
- View primitives whose arguments break the reference's rules (partition dim of on-chip tensors, size-1
  dims, permutations, element counts) are NL-E113; merging dimensions that are not contiguous in
  storage is NL-E114. Dynamic views (`select(dim, tile)`, `vector_select`, `.ap(scalar_offset= /
  vector_offset=)`) are lang/ops_indirect.IndirectView (DMA only), with their run-time bounds checks.
- `.ap(dtype=)` of another dtype: of an on-chip tensor, a read-only view of its bytes (lang/views_bitcast.py);
  of an HBM kernel input the kernel never writes, any element size (the pattern counts the new elements).
- Not built: other HBM reinterpretations between dtypes of different element sizes (NL-E904), writing
  through an on-chip dtype view (NL-E904), dynamic offsets of on-chip views (NL-E916), `.indirect` (Trn3
  tensor indirection; no method).
"""
from __future__ import annotations

from functools import reduce

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..core.affine import Affine, axis_var
from ..loc import capture_loc
from .flat_storage import flat_index, unflatten
from .index import Index, as_index
from .memory import ON_CHIP, resolve_dtype
from .tile import Tile, broadcast_access, provide_tile_ops
from .tracer import user_text
from .views_bitcast import dtype_view


def _err(name: str, msg: str, hint: str | None = None):
    return errors.make(name, msg, loc=capture_loc(), hint=hint)


def _prod(xs) -> int:
    return reduce(lambda a, b: a * b, xs, 1)


def _on_chip(t: Tile) -> bool:
    return t.space in ON_CHIP


def _int(x, what: str) -> int:
    if isinstance(x, Index) and x.ndim == 0 and x.expr.is_const:
        return int(x.expr.const)       # index arithmetic that left no variable (e.g. `pid // 2` at pid 1)
    if isinstance(x, bool) or not hasattr(x, "__index__") or isinstance(x, (Index, Tile)):
        raise _err("view", f"{what} must be a Python int known at trace time, got {x!r}")
    return int(x)


def _dim(t: Tile, dim, what: str = "dim", extra: int = 0) -> int:
    d = _int(dim, what)
    n = t.ndim + extra
    if d < 0:
        d += n
    if not 0 <= d < n:
        raise _err("view", f"{what}={dim} is outside the {n} dimensions of a view of shape {list(t.shape)}")
    return d


def _not_partition(t: Tile, d: int, what: str) -> None:
    if _on_chip(t) and d == 0:
        raise _err("view", f"{what} on dim 0 of a {t.space.value} tensor: dim 0 is the partition dimension, "
                   "which on-chip views keep as it is", "apply it to a free dimension (dim >= 1)")


def _remap(t: Tile, mapping: dict, shape) -> Tile:
    acc = t.access
    idx = tuple(e.subst(mapping) for e in acc.index)
    return t.view_of(ir.Access(acc.buffer, idx, tuple(int(s) for s in shape)))


def _shift(start: int, stop: int, by: int) -> dict:
    """Old axis variables start..stop-1 renamed to the axes `by` places further."""
    return {axis_var(k): Affine.var(axis_var(k + by)) for k in range(start, stop)}


def _extents(t: Tile, shape) -> dict:
    ext = dict(t._tracer.var_extents)
    ext.update({axis_var(a): n for a, n in enumerate(shape)})
    return ext


# ---------------------------------------------------------------- linear storage

def _root(t: Tile) -> ir.Buffer:
    b = t.buf
    while b.base is not None:
        b = t._tracer.buffers[b.base]
    return b


def _linear(t: Tile) -> tuple[Affine | None, Affine]:
    """(partition index, linear offset in the partition) of an on-chip view; (None, offset in the root's
    storage) of an HBM one. Both over the view's axis variables."""
    acc, buf = t.access, t.buf
    if not _on_chip(t):
        return None, flat_index(buf.shape, acc.index)
    if buf.par_axis != 0:
        raise _err("unsupported", "a view of an on-chip tile whose partition dimension is not dim 0 (nl.par_dim) "
                   "is not built")
    if len(acc.index) == 2 and len(buf.shape) > 2:        # already in the [P, free] form
        return acc.index[0], acc.index[1]
    return acc.index[0], flat_index(buf.shape[1:], acc.index[1:])


def _range_error(e: Affine, size: int, ext: dict, what: str, t: Tile):
    if any(v not in ext for v in e.vars()):
        return None              # an unknown range: the verifier checks the lowered access
    lo, hi = e.bounds(ext)
    if lo < 0 or hi >= size:
        return _err("out_of_bounds", f"the view reaches outside {what} of '{_root(t).name}': element offsets "
                    f"`{user_text(e)}` range over [{lo}, {hi}], outside [0, {size - 1}]",
                    "fix the pattern's nums / steps or the offset so the view stays inside the tensor")
    return None


def _check_range(e: Affine, size: int, ext: dict, what: str, t: Tile) -> None:
    err = _range_error(e, size, ext, what, t)
    if err is not None:
        raise err


def _deferred(tile: Tile, err) -> Tile:
    """A view that reaches outside its tensor is an error when an instruction uses it, not when it is made:
    kernels build a view before the `if` that decides whether to use it (output_proj_tkg's last, partial
    PSUM tile), and on the hardware an unused access pattern moves nothing. The error keeps the view's line."""
    if err is not None:
        tile._deferred_error = err
    return tile


def _lower(t: Tile, part: Affine | None, free: Affine, shape, dtype: str | None = None) -> Tile:
    """The Tile of a view given in linear form (see _linear); dtype: a same-size reinterpretation (HBM)."""
    tr, buf = t._tracer, t.buf
    shape = tuple(int(s) for s in shape)
    ext = _extents(t, shape)
    dtype = dtype or t.dtype_name
    if _on_chip(t):
        err = _range_error(part, buf.shape[0], ext, "the partitions", t) or \
            _range_error(free, _prod(buf.shape[1:]), ext, "the free elements", t)
        idx = None
        if len(buf.shape) > 2 and buf.name not in tr.flat_buffers and err is None:
            idx = unflatten(free, buf.shape[1:], ext)
        if idx is None and len(buf.shape) > 2:
            if err is None:
                tr.flat_buffers.add(buf.name)
            idx = (free,)
        if idx is None:
            idx = (free,) if len(buf.shape) == 2 else ()
        return _deferred(Tile(tr, ir.Access(buf.name, (part,) + tuple(idx), shape), dtype), err)
    root = _root(t)
    err = _range_error(free, root.size, ext, "the elements", t)
    if dtype == buf.dtype and err is None:
        idx = unflatten(free, buf.shape, ext)
        if idx is not None:
            return Tile(tr, ir.Access(buf.name, idx, shape), dtype)
    alias = _alias(t, root, (root.size,), dtype)
    return _deferred(Tile(tr, ir.Access(alias.name, (free,), shape), dtype), err)


def _alias(t: Tile, root: ir.Buffer, shape, dtype: str) -> ir.Buffer:
    """An HBM view buffer of `root` (same linear storage) with this shape and dtype, made once."""
    tr = t._tracer
    for b in tr.buffers.values():
        if b.base == root.name and b.shape == tuple(shape) and b.dtype == dtype and b.kind == "view":
            return b
    return tr.add_buffer(ir.Buffer(tr.fresh(root.name + "_v"), ir.Space.HBM, tuple(shape), dtype, "view", 0,
                                   root.name, loc=capture_loc(), hbm_kind=root.hbm_kind))


def _same_size_dtype(t: Tile, dtype, what: str, resize: bool = False) -> str | None:
    """The dtype of a reinterpreting HBM view (None: no reinterpretation). With `resize`, an x4 MX
    container view of a read-only kernel input may change the element size (_resized_view)."""
    if dtype is None:
        return None
    dt = resolve_dtype(dtype, capture_loc())
    if dt == t.dtype_name:
        return None
    a, b = D.INFO[t.dtype_name], D.INFO[dt]
    if resize and _resizable(t, a, b):
        return dt
    if _on_chip(t) or a.itemsize != b.itemsize or any(i.bits != 8 * i.itemsize for i in (a, b)):
        raise _err("unsupported", f"{what} reinterpreting {t.dtype_name} as {dt}"
                   f"{' on ' + t.space.value if _on_chip(t) else ''}: only HBM views between dtypes of the same "
                   "element size whose values use every bit are built",
                   "reinterpret the HBM tensor before loading it")
    return dt


def _resizable(t: Tile, a, b) -> bool:
    """An `.ap(dtype=)` view with another element size (the nki-samples MXFP tutorial views uint8 host
    data as float4_e2m1fn_x4, the NKI Library's mxfp_load bf16 input as fp32 pairs): built for a kernel
    input whose bytes the new element size divides, to a dtype whose values use every bit; writing
    that input anywhere is NL-E904 (verify_params rule 10: the analyses compare flat offsets in each view's
    own elements, so such a tensor may only be read)."""
    root = _root(t)
    return (not _on_chip(t) and (b.name in D.MX_X4 or b.bits == 8 * b.itemsize) and a.bits == 8 * a.itemsize
            and root.kind == "input"
            and (root.size * a.itemsize) % b.itemsize == 0)


def _resized_view(t: Tile, free: Affine, terms: Affine, shape, dt: str) -> Tile:
    """`.ap` of an HBM tensor as dtype `dt` of another element size: the pattern and offset count `dt`
    elements from the view's first byte (which must be a whole number of `dt` elements in)."""
    a, b = D.INFO[t.dtype_name], D.INFO[dt]
    if not free.is_const or (free.const * a.itemsize) % b.itemsize:
        raise _err("unsupported", f".ap(dtype={dt}) of a view starting at element `{user_text(free)}` of "
                   f"{t.dtype_name}: an element-size-changing view must start at a whole {dt} element",
                   "take the dtype view of the whole tensor and put the offset in its pattern")
    root = _root(t)
    flat = Affine(free.const * a.itemsize // b.itemsize) + terms
    n = root.size * D.INFO[root.dtype].itemsize // b.itemsize
    tr = t._tracer
    ext = _extents(t, tuple(int(x) for x in shape))
    lo, hi = flat.bounds(ext) if not (flat.vars() - set(ext)) else (0, 0)
    if lo < 0 or hi >= n:
        raise _err("out_of_bounds", f"the view reaches outside '{root.name}': {dt} element offsets range over "
                   f"[{lo}, {hi}], outside [0, {n - 1}]", "fix the pattern's nums / steps or the offset")
    alias = _alias(t, root, (n,), dt)
    return Tile(tr, ir.Access(alias.name, (flat,), tuple(int(x) for x in shape)), dt)


# ---------------------------------------------------------------- .ap

def _pattern(pattern) -> list[tuple[int, int]]:
    if not isinstance(pattern, (list, tuple)) or not pattern:
        raise _err("access_pattern", f"an access pattern is a non-empty list of [step, num] pairs, got {pattern!r}")
    out = []
    for pair in pattern:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise _err("access_pattern", f"each entry of an access pattern is a [step, num] pair, got {pair!r}")
        try:
            step, num = (_int(x, "a pattern's step and num") for x in pair)
        except errors.NkiLiteError:
            raise _err("access_pattern", f"pattern entry {list(pair)!r}: step and num must be Python ints known "
                       "at trace time") from None
        if num < 1:
            raise _err("access_pattern", f"pattern entry [{step}, {num}]: num must be at least 1")
        out.append((step, num))
    return out


def ap(t: Tile, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim: int = 0,
       dtype=None) -> Tile:
    """NkiTensor.ap: the view `storage[offset + sum(step_k * i_k)]` over i_k in [0, num_k)."""
    from .registers import VirtualRegister
    if isinstance(scalar_offset, VirtualRegister):      # a register (a dynamic loop's value): its int32 cell
        scalar_offset = scalar_offset.tile
    pat = _pattern(pattern)
    if dtype is not None and _on_chip(t) and resolve_dtype(dtype, capture_loc()) != t.dtype_name:
        snap, start = dtype_view(t, resolve_dtype(dtype, capture_loc()), *_linear(t))   # a refreshed snapshot
        o = Affine(0) if offset is None else as_index(offset)
        if o is NotImplemented or (not isinstance(o, Affine) and o.ndim):
            raise _err("access_pattern", f"offset must be an int or a loop-variable expression, got {offset!r}")
        return ap(snap, pattern, Index(start + (o if isinstance(o, Affine) else o.expr)), scalar_offset,
                  vector_offset, indirect_dim)
    dt = _same_size_dtype(t, dtype, ".ap(dtype=...)", resize=True)
    shape = tuple(n for _, n in pat)
    part, free = _linear(t)
    at0 = {axis_var(k): 0 for k in range(t.ndim)}
    if offset is None:
        extra = Affine(0)
    else:
        o = as_index(offset)
        if o is NotImplemented or o.ndim:
            raise _err("access_pattern", f"offset must be an int or a loop-variable expression, got {offset!r}")
        extra = o.expr
    terms = Affine(0)
    if not _on_chip(t):
        for k, (step, _) in enumerate(pat):
            terms = terms + Affine.var(axis_var(k), step)
        if dt is not None and D.INFO[dt].itemsize != D.INFO[t.dtype_name].itemsize:
            if scalar_offset is not None or vector_offset is not None:
                raise _err("nki_argument_not_built", ".ap with a dynamic offset and an element-size-changing dtype "
                           "is not built")
            return _resized_view(t, free.subst(at0), extra + terms, shape, dt)
        flat = free.subst(at0) + extra + terms
        if scalar_offset is not None or vector_offset is not None:
            return _dynamic_ap(t, flat, shape, scalar_offset, vector_offset, indirect_dim, dt)
        return _lower(t, None, flat, shape, dt)
    if scalar_offset is not None or vector_offset is not None:
        raise _err("nki_argument_not_built", ".ap with scalar_offset / vector_offset of an on-chip tensor is not built",
                   "use it on the HBM side of the DMA")
    fsize = _prod(t.buf.shape[1:])
    (pstep, pnum), rest = pat[0], pat[1:]
    if pnum > 1 and pstep != fsize:
        raise _err("access_pattern", f"the first pair [{pstep}, {pnum}] of an access pattern of a {t.space.value} "
                   f"tensor is its partition access: its step must be the tensor's free size {fsize} (partitions are "
                   "accessed contiguously)", f"write [{fsize}, {pnum}] first and the free-dimension pairs after it")
    start = part.subst(at0).scale(fsize) + free.subst(at0) + extra
    pstart, fstart = _split_offset(start, fsize)
    for k, (step, _) in enumerate(rest):
        terms = terms + Affine.var(axis_var(k + 1), step)
    return _lower(t, pstart + Affine.var(axis_var(0)), fstart + terms, shape)


def _split_offset(start: Affine, fsize: int) -> tuple[Affine, Affine]:
    """A storage offset of an on-chip tensor as (partition, offset in the partition)."""
    p, f = Affine(start.const // fsize), Affine(start.const % fsize)
    for v, c in start.terms:
        if c % fsize == 0:
            p = p + Affine.var(v, c // fsize)
        else:
            f = f + Affine.var(v, c)
    return p, f


def _dynamic_ap(t: Tile, flat: Affine, shape, scalar_offset, vector_offset, indirect_dim, dt) -> Tile:
    """`.ap` with a run-time offset on `indirect_dim` of the base tensor (HBM): an IndirectView."""
    if scalar_offset is not None and vector_offset is not None:
        raise _err("access_pattern", "at most one of scalar_offset and vector_offset can be given")
    base = t.buf
    d = _dim(t, indirect_dim, "indirect_dim") if t.access == ir.Access.full(base) else _int(indirect_dim, "indirect_dim")
    if vector_offset is not None and d != 0:
        raise _err("access_pattern", "vector_offset supports indirect_dim=0 only (nki-aps deep dive)")
    if scalar_offset is not None and not isinstance(scalar_offset, Tile):
        # a trace-time value (an int or a loop variable, as the library's `scalar_offset=block_idx` of a loop):
        # the same offset known statically, `scalar_offset` elements along the base tensor's indirect_dim
        o = as_index(scalar_offset)
        if o is NotImplemented or o.ndim or not 0 <= d < len(base.shape):
            raise _err("view", f"scalar_offset must be an SBUF tensor, an int or a loop-variable expression, "
                       f"got {scalar_offset!r}")
        return _lower(t, None, flat + o.expr.scale(_prod(base.shape[d + 1:])), shape, dt)
    if vector_offset is not None:                 # the leading stride is the base's row size, by the docs
        flat = flat - Affine.var(axis_var(0), flat.coeff(axis_var(0)))
    view = _lower(t, None, flat, shape, dt)
    if view.buf.name != base.name:
        raise _err("nki_argument_not_built", "a dynamic .ap whose static part does not follow the base tensor's "
                   "dimensions is not built")
    idx = vector_offset if vector_offset is not None else scalar_offset
    return _indirect(view, d, idx)


def _indirect(view: Tile, d: int, idx) -> Tile:
    from .ops_indirect import IndirectView
    if not isinstance(idx, Tile) or not _on_chip(idx):
        raise _err("view", f"a dynamic index must be an SBUF tensor of integers, got {idx!r}")
    if not D.INFO[idx.dtype_name].is_int:
        raise _err("dtype", f"a dynamic index tensor must hold integers, not {idx.dtype_name}")
    iacc = broadcast_access(idx.access, view.shape, "index tensor")
    return IndirectView(view._tracer, view.access, view.dtype_name, d, iacc)


# ---------------------------------------------------------------- re-indexing primitives

def slice_(t: Tile, dim, start, end, step=1) -> Tile:
    d = _dim(t, dim)
    n = t.shape[d]
    step = _int(step, "step")
    if step < 1:
        raise _err("view", f"slice step must be >= 1, got {step}")
    s = as_index(start)
    if s is NotImplemented or s.ndim:
        raise _err("view", f"slice start must be an int or a loop-variable expression, got {start!r}")
    if s.expr.is_const:
        e = _int(end, "end")
        if not 0 <= s.expr.const < e:
            raise _err("view", f"slice(dim={d}, start={s.expr.const}, end={e}): needs 0 <= start < end")
        if e > n:
            raise _err("out_of_bounds", f"slice(dim={d}, start={s.expr.const}, end={e}) reaches past the end of "
                       f"dimension {d} (size {n})")
        size = len(range(s.expr.const, e, step))
    else:
        span = as_index(end) - s if as_index(end) is not NotImplemented else NotImplemented
        if span is NotImplemented or not span.expr.is_const or span.expr.const < 1:
            raise _err("view", "a slice with a symbolic start needs end = start + a positive constant")
        size = len(range(0, span.expr.const, step))
    shape = t.shape[:d] + (size,) + t.shape[d + 1:]
    walk = s.expr + Affine.var(axis_var(d), step)
    _check_range(walk, n, _extents(t, shape), f"dimension {d}", t)
    return _remap(t, {axis_var(d): walk}, shape)


def select(t: Tile, dim, index) -> Tile:
    d = _dim(t, dim)
    if isinstance(index, Tile):
        return _dynamic_select(t, d, index)
    _not_partition(t, d, "select")
    i = as_index(index)
    if i is NotImplemented or i.ndim:
        raise _err("view", f"select index must be an int, a loop-variable expression or an SBUF tensor, got {index!r}")
    e = i.expr
    if e.is_const and e.const < 0:
        e = Affine(e.const + t.shape[d])
    _check_range(e, t.shape[d], _extents(t, t.shape), f"dimension {d}", t)
    mapping = {axis_var(d): e, **_shift(d + 1, t.ndim, -1)}
    return _remap(t, mapping, t.shape[:d] + t.shape[d + 1:])


def _dynamic_select(t: Tile, d: int, index: Tile) -> Tile:
    if _on_chip(t):
        _not_partition(t, d, "a dynamic select")
        raise _err("nki_argument_not_built", "a dynamic select of an on-chip tensor is not built",
                   "select on the HBM side of the DMA")
    if _prod(index.shape) != 1:
        raise _err("view", f"a dynamic select takes a (1, 1) index tensor, got shape {list(index.shape)}",
                   "use vector_select for one index per partition")
    from . import indirect
    bd = indirect.dynamic_dim(t.access, d)
    view = _remap(t, {axis_var(d): Affine(0), **_shift(d + 1, t.ndim, -1)}, t.shape[:d] + t.shape[d + 1:])
    return _indirect(view, bd, index)


def vector_select(t: Tile, dim, vector_offset) -> Tile:
    d = _dim(t, dim)
    if d != 0 or _on_chip(t):
        raise _err("view", "vector_select takes dim=0 of an HBM tensor (the reference's constraint)")
    if not isinstance(vector_offset, Tile) or vector_offset.ndim != 2 or vector_offset.shape[1] != 1:
        raise _err("view", "vector_select's vector_offset is an SBUF tensor of shape (partitions, 1)")
    from . import indirect
    bd = indirect.dynamic_dim(t.access, 0)
    view = _remap(t, {axis_var(0): Affine(0)}, (vector_offset.shape[0],) + t.shape[1:])
    return _indirect(view, bd, vector_offset)


def is_indirect(t: Tile) -> bool:
    return bool(t._is_view_indirect)


def _strides(t: Tile) -> list:
    """Each view axis's step in the storage's linear order (on-chip: partition step = free size)."""
    part, free = _linear(t)
    lin = free if part is None else part.scale(_prod(t.buf.shape[1:])) + free
    return [lin.coeff(axis_var(k)) for k in range(t.ndim)]


def get_pattern(t: Tile) -> list:
    """NkiTensor.get_pattern: [[step, num], ...], one pair per view dimension."""
    return [[s, n] for s, n in zip(_strides(t), t.shape)]


def is_contiguous(t: Tile) -> bool:
    """Every non-size-1 dim's step is the product of the inner sizes (on-chip: free dims only)."""
    st, inner = _strides(t), 1
    for k in reversed(range(1 if _on_chip(t) else 0, t.ndim)):
        if t.shape[k] != 1 and st[k] != inner:
            return False
        inner *= t.shape[k]
    return True


def expand_dim(t: Tile, dim) -> Tile:
    d = _dim(t, dim, extra=1)
    _not_partition(t, d, "expand_dim")
    return _remap(t, _shift(d, t.ndim, 1), t.shape[:d] + (1,) + t.shape[d:])


def squeeze_dim(t: Tile, dim) -> Tile:
    d = _dim(t, dim)
    _not_partition(t, d, "squeeze_dim")
    if t.shape[d] != 1:
        raise _err("view", f"squeeze_dim({d}) of a view of shape {list(t.shape)}: dimension {d} has size "
                   f"{t.shape[d]}, not 1")
    return _remap(t, {axis_var(d): Affine(0), **_shift(d + 1, t.ndim, -1)}, t.shape[:d] + t.shape[d + 1:])


def permute(t: Tile, dims) -> Tile:
    dims = tuple(_int(x, "dims") for x in dims)
    if sorted(dims) != list(range(t.ndim)):
        raise _err("view", f"permute{dims} of a view of rank {t.ndim}: dims must be a permutation of "
                   f"{tuple(range(t.ndim))}")
    if _on_chip(t) and dims[0] != 0:
        raise _err("view", f"permute{dims} of a {t.space.value} tensor: dims[0] must be 0 (the partition dimension "
                   "stays outermost)")
    mapping = {axis_var(old): Affine.var(axis_var(new)) for new, old in enumerate(dims)}
    return _remap(t, mapping, tuple(t.shape[k] for k in dims))


def broadcast(t: Tile, dim, size) -> Tile:
    d = _dim(t, dim)
    _not_partition(t, d, "broadcast")
    size = _int(size, "size")
    if t.shape[d] != 1 or size < 1:
        raise _err("view", f"broadcast({d}, {size}) of a view of shape {list(t.shape)}: dimension {d} must have "
                   "size 1 and size must be positive")
    return _remap(t, {axis_var(d): Affine(0)}, t.shape[:d] + (size,) + t.shape[d + 1:])


def _split_sizes(n: int, shape, what: str) -> tuple[int, ...]:
    sizes = [_int(s, "shape") for s in shape]
    if sizes.count(-1) > 1 or any(s < 1 and s != -1 for s in sizes):
        raise _err("view", f"{what}: sizes must be positive, with at most one -1, got {tuple(sizes)}")
    if -1 in sizes:
        known = _prod(s for s in sizes if s != -1)
        if known == 0 or n % known:
            raise _err("view", f"{what}: cannot infer -1 in {tuple(sizes)} for {n} elements")
        sizes[sizes.index(-1)] = n // known
    if _prod(sizes) != n:
        raise _err("view", f"{what}: {tuple(sizes)} holds {_prod(sizes)} elements, the dimension has {n}")
    return tuple(sizes)


def reshape_dim(t: Tile, dim, shape) -> Tile:
    d = _dim(t, dim)
    sizes = _split_sizes(t.shape[d], shape, f"reshape_dim({d}, ...)")
    if _on_chip(t) and d == 0 and len(sizes) != 1:
        _not_partition(t, d, "reshape_dim")
    k = len(sizes)
    split = Affine(0)
    for j, s in enumerate(sizes):
        split = split + Affine.var(axis_var(d + j), _prod(sizes[j + 1:]))
    mapping = {axis_var(d): split, **_shift(d + 1, t.ndim, k - 1)}
    return _remap(t, mapping, t.shape[:d] + sizes + t.shape[d + 1:])


provide_tile_ops({"view_ap": ap, "view_slice": slice_, "view_select": select, "view_vector_select": vector_select,
                  "view_is_indirect": is_indirect, "view_get_pattern": get_pattern, "view_is_contiguous": is_contiguous, "view_expand_dim": expand_dim, "view_squeeze_dim": squeeze_dim,
                  "view_permute": permute, "view_broadcast": broadcast, "view_reshape_dim": reshape_dim})


# what the compatibility table (nki/compat_table.py, docs/compat_nki.md) lists as missing
Tile.ap.__nki_partial__ = {"dtype": "on-chip: read-only; HBM: same element size, or any for a read-only input",
                           "scalar_offset / vector_offset": "HBM tensors only"}
Tile.select.__nki_partial__ = {"index": "a run-time (tensor) index on HBM tensors only"}
