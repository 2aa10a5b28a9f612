"""Indirect data movement: the IR ops `dma_indirect` (a DMA) and `copy_dynamic` (an on-chip copy)
that nl.load / nl.store / nisa.dma_copy emit for a tile-indexed view (lang/indirect.py), plus
nl.atomic_rmw, nisa.tensor_copy_dynamic_src and nl.gather_flattened.

Contract: `emit(op, dst, src, ...)` emits one instruction `outs=(dst static access,)`,
`ins=(src static access[, index access])` with attrs `dyn` ("in" when the source is indirect, "out"
when the destination is, "" for none), `dim` (the indirect buffer dimension), `oob` ("error" or
"skip": what an out-of-range index does at run time, docs/numerics.md) and `rmw` ("add": the
destination becomes dst + value, NKI's dst_rmw_op / atomic_rmw; "" otherwise). At most one side is
indirect. The interpreter, the JIT and the engine model read the same instruction.
"""
from __future__ import annotations

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..loc import capture_loc
from .api import api, isa
from .index import arange
from .isa_common import engine_name
from .masks import to_mask
from .memory import ON_CHIP, new_buffer, resolve_dtype
from . import indirect
from .tile import Tile, broadcast_access, compose, provide_tile_ops
from .tracer import Tracer, attrs, current

_RMW_OPS = {"add"}


class IndirectView(Tile):
    """A view with a run-time offset on buffer dimension `dim`, read from access `idx` (lang/indirect.py).
    Tile's indexing builds it through TILE_OPS["indirect_view"]."""

    _is_view_indirect = True

    def __init__(self, tracer: Tracer, access: ir.Access, dtype: str, dim: int, idx: ir.Access):
        super().__init__(tracer, access, dtype)
        self.dim = dim
        self.idx = idx

    @staticmethod
    def of(tile: Tile, key: tuple, dyn) -> "IndirectView":
        pos, idx_tile = dyn
        bd = indirect.dynamic_dim(tile.access, pos)
        acc = compose(tile.access, key, tile._tracer)
        idx = broadcast_access(idx_tile.access, acc.shape, "index tile")
        return IndirectView(tile._tracer, acc, tile.dtype_name, bd, idx)

    @property
    def static_access(self) -> ir.Access:
        return self._access

    @property
    def access(self) -> ir.Access:      # every op but the DMA family reads this: refuse at the line
        raise indirect.use_error()

    @property
    def buf(self) -> ir.Buffer:
        return self._tracer.buffers[self._access.buffer]

    @property
    def shape(self) -> tuple[int, ...]:
        return self._access.shape

    def __repr__(self) -> str:
        return f"IndirectView({self._access}, dim={self.dim}, idx={self.idx})"

    def __getitem__(self, key):
        raise indirect.use_error()

    def __setitem__(self, key, value):
        raise indirect.use_error()


def indirect_parts(t: Tile):
    """(static access, index access or None, dynamic buffer dim or None) of a DMA operand."""
    if isinstance(t, IndirectView):
        return t.static_access, t.idx, t.dim
    return t.access, None, None


provide_tile_ops({"indirect_view": IndirectView.of})


def rmw_name(op, loc) -> str:
    """NKI's dst_rmw_op / atomic_rmw op (np.add, nl.add) as an IR name; only add is documented."""
    name = getattr(op, "__name__", None) or getattr(op, "name", None)
    if name in _RMW_OPS:
        return name
    raise errors.make("unsupported", f"read-modify-write with op {op!r} is not built: NKI documents np.add only",
                      loc=loc, hint="pass op=np.add")


def oob_name(mode, loc) -> str:
    """nisa.oob_mode.error / .skip (NKI's IntEnum values 0 / 1 too) as the IR's `oob` attr."""
    m = "error" if mode is None else getattr(mode, "value", mode)
    m = {0: "error", 1: "skip"}.get(m, m) if not isinstance(m, bool) else m
    if m not in ("error", "skip"):
        raise errors.make("argument", f"oob_mode must be nisa.oob_mode.error or .skip, got {mode!r}", loc=loc)
    return m


def is_indirect(*tiles) -> bool:
    return any(isinstance(t, IndirectView) for t in tiles)


def emit(op: str, dst: Tile, src: Tile, mask, loc, *, oob: str = "error", rmw: str = "",
         engine: str = "dma") -> None:
    dacc, didx, ddim = indirect_parts(dst)
    sacc, sidx, sdim = indirect_parts(src)
    if didx is not None and sidx is not None:
        raise errors.make("unsupported", "a copy with indirect indices on both source and destination",
                          loc=loc, hint="gather into an SBUF tile first, then scatter it")
    if rmw and D.INFO[dst.dtype_name].is_int:
        raise errors.make("unsupported", "an integer read-modify-write DMA is not built", loc=loc)
    sacc = broadcast_access(sacc, dacc.shape, "src")
    ins = (sacc,) if sidx is None and didx is None else (sacc, sidx if sidx is not None else didx)
    dyn, dim = ("in", sdim) if sidx is not None else (("out", ddim) if didx is not None else ("", None))
    current().emit(ir.Instr(op, (dacc,), ins, attrs(engine=engine, dyn=dyn, dim=dim, oob=oob, rmw=rmw,
                                                                   accumulate=True if rmw else None),
                            to_mask(mask, dacc.shape, loc), loc))


def load_indirect(src: IndirectView, mask, dtype, loc) -> Tile:
    """nl.load of a tile-indexed HBM view into a new SBUF tile."""
    tr = current()
    shape = src.shape if len(src.shape) != 1 else src.shape + (1,)
    if len(shape) != len(src.shape):
        raise errors.make("rank", "nl.load of an indirectly indexed 1-D view", loc=loc,
                          hint="index a 2-D view: t[idx_tile, nl.arange(n)[None, :]]")
    dt = src.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    buf = new_buffer(tr, shape, dt, ir.Space.SBUF, src.name + "_sb", loc)
    out = Tile(tr, ir.Access.full(buf), dt)
    emit("dma_indirect", out, src, mask, loc)
    return out


@api("nl.atomic_rmw")
def atomic_rmw(dst, value, op, *, mask=None) -> None:
    """nl.atomic_rmw: dst = op(dst, value) on HBM, dst usually indexed by an index tile."""
    loc = capture_loc(2)
    if not isinstance(dst, Tile) or dst.space != ir.Space.HBM:
        raise errors.make("memory_space", "nl.atomic_rmw: dst must be a view of an HBM tensor", loc=loc)
    if not isinstance(value, Tile):
        raise errors.make("unsupported", "nl.atomic_rmw with a scalar value is not built", loc=loc,
                          hint="pass a tile (nl.full(...))")
    if value.space not in ON_CHIP:
        raise errors.make("memory_space", "nl.atomic_rmw: value must be an on-chip tile", loc=loc)
    emit("dma_indirect", dst, value, mask, loc, rmw=rmw_name(op, loc))


@isa("nisa.tensor_copy_dynamic_src")
def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=None):
    """Copy an on-chip tile read at a run-time offset along a free dimension into a new SBUF tile."""
    tr = current()
    loc = capture_loc(2)
    if not isinstance(src, Tile) or src.space not in ON_CHIP:
        raise errors.make("memory_space", "nisa.tensor_copy_dynamic_src: src must be an SBUF/PSUM tile", loc=loc)
    if isinstance(src, IndirectView) and src.dim == src.buf.par_axis:
        raise errors.make("unsupported", "a dynamic offset on the partition dimension: NKI's "
                          "tensor_copy_dynamic_src offsets free dimensions only", loc=loc)
    dt = src.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    buf = new_buffer(tr, src.shape, dt, ir.Space.SBUF, "dyn", loc)
    out = Tile(tr, ir.Access.full(buf), dt)
    emit("copy_dynamic", out, src, mask, loc, engine=engine_name(engine, "vector"))
    return out



@api("nl.gather_flattened")
def gather_flattened(data, indices, *, mask=None, dtype=None):
    """nl.gather_flattened: out[p, j] = data[p, indices[p, j]] (each partition gathers from its own
    row), the same dynamic copy as tensor_copy_dynamic_src with an index per element."""
    tr = current()
    loc = capture_loc(2)
    for what, t in (("data", data), ("indices", indices)):
        if not isinstance(t, Tile) or t.space not in ON_CHIP or isinstance(t, IndirectView):
            raise errors.make("memory_space", f"nl.gather_flattened: {what} must be an SBUF/PSUM tile", loc=loc)
    if len(data.shape) != 2 or len(indices.shape) != 2:
        raise errors.make("unsupported", "nl.gather_flattened of 3-D/4-D tiles is not built (2-D only)", loc=loc,
                          hint="reshape the free dimensions into one first")
    if indices.shape[0] != data.shape[0]:
        raise errors.make("shape_mismatch", f"nl.gather_flattened: indices {indices.shape} and data {data.shape} "
                          "differ in partitions", loc=loc)
    view = data[arange(data.shape[0])[:, None], indices]
    dt = data.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    out = Tile(tr, ir.Access.full(new_buffer(tr, view.shape, dt, ir.Space.SBUF, "gather", loc)), dt)
    emit("copy_dynamic", out, view, mask, loc, engine="gpsimd")
    return out
