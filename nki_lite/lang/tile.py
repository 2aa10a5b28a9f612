"""Tile proxies: what kernel code holds while it is traced.

Contract:
- A `Tile` is a view: an `ir.Access` into a buffer plus the buffer's dtype. Indexing a tile
  composes affine views (they write through); `t[...] = v` emits a copy, DMA or memset into the
  view; `t += v` updates in place (PSUM accumulation when `v` is a matmul result).
- Python operators and numpy ufuncs on tiles call the nl ops, so `a + b`, `np.exp(a)`,
  `np.max(a, axis=1)` trace like `nl.add(a, b)`, `nl.exp(a)`, `nl.max(a, axis=1)`. The ops build
  Tiles, so they sit above this module: they reach Tile through TILE_OPS, a table of nl functions
  by name that the op modules fill when imported (lang/ops_math.py, lang/ops_memory.py).
- Branching on a tile (`if t:`) raises control_flow_on_tile.
- `PendingMatmul` is the result of nc_matmul/matmul before it has a destination: the next
  statement either gives it one (`psum[...] = mm`, `psum[...] += mm`) or it is materialised into a
  fresh PSUM tile; the tracer flushes it before any other instruction, so order is preserved.
"""
from __future__ import annotations

import ast
import sys
import warnings
from typing import Callable

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core.affine import Affine, axis_var
from ..core import dtypes as D
from .index import DynSlice, Index, NonAffine, as_index
from . import indirect
from .memory import SPACE_OBJECTS, new_buffer
from .opnames import UFUNC_OPS
from .source import control_flow_test, stmt_at
from .broadcast import broadcast_access, broadcast_shapes  # noqa: F401  (re-exported: the ops import them here)
from .tracer import Tracer, attrs, user_text

# nl function name -> the function ("add", "sum", "assign", ...): filled by the op modules on import
TILE_OPS: dict[str, Callable] = {}


def provide_tile_ops(fns: dict[str, Callable]) -> None:
    """Called by each op module at import: the functions Tile's operators and numpy hooks call."""
    TILE_OPS.update(fns)


def _op(name: str) -> Callable:
    fn = TILE_OPS.get(name)
    if fn is None:          # an op module was not imported: a bug in nki_lite, not in the kernel
        raise LookupError(f"nki_lite internal error: no implementation registered for tile operation '{name}' "
                          "(import nki_lite.language)")
    return fn


def _err(name: str, msg: str, hint: str | None = None, depth: int = 3):
    return errors.make(name, msg, loc=capture_loc(depth), hint=hint)


class Tile:
    """A traced tensor or tile: a view into an HBM, SBUF or PSUM buffer."""

    __array_priority__ = 1000
    _is_view_indirect = False       # an IndirectView (lang/ops_indirect.py): only DMAs may take it
    _deferred_error = None          # a view outside its tensor (lang/views.py `_deferred`): raised on use

    def __init__(self, tracer: Tracer, access: ir.Access, dtype: str):
        self._tracer = tracer
        self._access = access
        self._dtype = dtype

    # ---- identity
    @property
    def access(self) -> ir.Access:
        if self._deferred_error is not None:
            raise self._deferred_error
        return self._access

    @property
    def buf(self) -> ir.Buffer:
        acc = self._access if self._deferred_error is not None else self.access
        return self._tracer.buffers[acc.buffer]

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._access if self._deferred_error is not None else self.access).shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return D.to_numpy(self._dtype)

    @property
    def dtype_name(self) -> str:
        return self._dtype

    @property
    def buffer(self):
        return SPACE_OBJECTS[self.buf.space]

    @property
    def space(self) -> ir.Space:
        return self.buf.space

    @property
    def name(self) -> str:
        return self.buf.name

    def __repr__(self) -> str:
        return f"Tile({self.access}, {self._dtype}, {self.space.value})"

    def __str__(self) -> str:
        _warn_if_printed(self)
        return self.__repr__()

    def __format__(self, spec: str) -> str:
        _warn_if_printed(self)
        return format(self.__repr__(), spec)

    def __len__(self) -> int:
        return self.shape[0]

    # ---- views
    def __getitem__(self, key) -> "Tile":
        key, dyn = indirect.split_key(key if isinstance(key, tuple) else (key,), _index_tile)
        if dyn is not None:          # a tile-valued index: lang/ops_indirect.py builds the view
            return _op("indirect_view")(self, key, dyn)
        return Tile(self._tracer, compose(self.access, key, self._tracer), self._dtype)

    def view_of(self, access: ir.Access) -> "Tile":
        return Tile(self._tracer, access, self._dtype)

    def __setitem__(self, key, value) -> None:
        _op("assign")(self[key], value)

    def reshape(self, *dims, shape=None) -> "Tile":
        """t.reshape(a, b), t.reshape((a, b)) or t.reshape(shape=(a, b)) (the legacy samples' spelling);
        a whole HBM tensor, or any view whose merged dims are contiguous (lang/views_merge.py)."""
        return _op("view_reshape")(self, *dims, shape=shape)

    def view(self, dtype) -> "Tile":
        """t.view(dtype): the same storage reinterpreted as dtype (HBM; lang/views_merge.py)."""
        return _op("view_dtype")(self, dtype)

    # ---- the current dialect's view primitives (NkiTensor; lang/views.py, lang/views_merge.py)
    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        return _op("view_ap")(self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype)

    def slice(self, dim, start, end, step=1): return _op("view_slice")(self, dim, start, end, step)
    def select(self, dim, index): return _op("view_select")(self, dim, index)
    def vector_select(self, dim, vector_offset): return _op("view_vector_select")(self, dim, vector_offset)
    def is_indirect(self): return _op("view_is_indirect")(self)
    def get_pattern(self): return _op("view_get_pattern")(self)
    def is_contiguous(self): return _op("view_is_contiguous")(self)
    def expand_dim(self, dim): return _op("view_expand_dim")(self, dim)
    def squeeze_dim(self, dim): return _op("view_squeeze_dim")(self, dim)
    def permute(self, dims): return _op("view_permute")(self, dims)
    def broadcast(self, dim, size): return _op("view_broadcast")(self, dim, size)
    def reshape_dim(self, dim, shape): return _op("view_reshape_dim")(self, dim, shape)
    def flatten_dims(self, start_dim, end_dim): return _op("view_flatten_dims")(self, start_dim, end_dim)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        return _op("view_rearrange")(self, src_pattern, dst_pattern, fixed_sizes)

    def broadcast_to(self, shape) -> "Tile":
        return _op("broadcast_to")(self, shape)

    # ---- control flow cannot depend on data
    def __bool__(self):
        # In the current dialect a tensor is a Python object, so `if params.expert_index:` (the NKI Library's
        # optional-argument tests) is True for any HBM tensor passed; on-chip tiles stay an error (a data test).
        if self.space == ir.Space.HBM and getattr(self._tracer, "object_truth", False):
            return True
        test = control_flow_test(capture_loc(2))
        if test is not None:     # `if t[0, 0] > 0:`: name the statement and the condition
            raise _err("control_flow_on_tile", f"Python control flow (`{test[0]}`) depends on the value of a tile: "
                       f"`{test[1]}` is computed on the device when the kernel runs, so Python cannot branch on "
                       "it while tracing", "use nl.where(cond, a, b) or mask= instead of if/while on tile values",
                       depth=3)
        raise _err("control_flow_on_tile",
                   f"Python control flow (if/while/and/or/not) depends on the value of tile '{self.name}', "
                   "which only exists when the kernel runs", depth=2)

    def __iter__(self):
        raise _err("control_flow_on_tile", f"cannot iterate over tile '{self.name}' in Python",
                   "index it with nl.arange / slices, or loop with nl.affine_range", depth=2)

    def __index__(self):
        raise _err("control_flow_on_tile", f"tile '{self.name}' used where Python needs an int", depth=2)

    __int__ = __index__
    __float__ = __index__

    # ---- operators -> nl ops
    def _bin(self, other, name: str, reverse: bool = False):
        dyn = indirect.dyn_offset(self, other, name, reverse)     # `offsets[0, k] + iy`: an index
        if dyn is not None:
            return dyn
        if isinstance(other, Tile) and self.shape and other.shape and other.shape[0] != self.shape[0]:
            _partition_broadcast_error(name, *((other, self) if reverse else (self, other)))
        fn = _op(name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "subtract")
    def __rsub__(self, o): return self._bin(o, "subtract", True)
    def __mul__(self, o): return self._bin(o, "multiply")
    def __rmul__(self, o): return self._bin(o, "multiply", True)
    def __truediv__(self, o): return self._bin(o, "divide")
    def __rtruediv__(self, o): return self._bin(o, "divide", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __rmod__(self, o): return self._bin(o, "mod", True)
    def __pow__(self, o): return self._bin(o, "power")
    def __rpow__(self, o): return self._bin(o, "power", True)
    def __and__(self, o): return self._bin(o, "bitwise_and")
    def __rand__(self, o): return self._bin(o, "bitwise_and", True)
    def __or__(self, o): return self._bin(o, "bitwise_or")
    def __ror__(self, o): return self._bin(o, "bitwise_or", True)
    def __xor__(self, o): return self._bin(o, "bitwise_xor")
    def __rxor__(self, o): return self._bin(o, "bitwise_xor", True)
    def __lshift__(self, o): return self._bin(o, "left_shift")
    def __rshift__(self, o): return self._bin(o, "right_shift")
    def __lt__(self, o): return self._bin(o, "less")
    def __le__(self, o): return self._bin(o, "less_equal")
    def __gt__(self, o): return self._bin(o, "greater")
    def __ge__(self, o): return self._bin(o, "greater_equal")
    # `t == None` / `t != None` are Python tests of an optional argument (the NKI Library's
    # `kernel_assert(cos != None, ...)`), not elementwise comparisons: a tile is never None.
    def __eq__(self, o): return False if o is None else self._bin(o, "equal")  # noqa: E704
    def __ne__(self, o): return True if o is None else self._bin(o, "not_equal")  # noqa: E704
    __hash__ = object.__hash__

    def __neg__(self):
        return _op("negative")(self)

    def __abs__(self):
        return _op("abs")(self)

    def __invert__(self):
        return _op("invert")(self)

    def _inplace(self, other, name: str):
        return _op("update_in_place")(self, other, name)

    def __iadd__(self, o): return self._inplace(o, "add")
    def __isub__(self, o): return self._inplace(o, "subtract")
    def __imul__(self, o): return self._inplace(o, "multiply")
    def __itruediv__(self, o): return self._inplace(o, "divide")

    # ---- numpy interop: np.add(t, u), np.exp(t), np.sum(t, axis=1), ...
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            if method == "reduce":
                red = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod"}.get(ufunc.__name__)
                if red:
                    return _op(red)(inputs[0], **kwargs)
            return NotImplemented
        fn = TILE_OPS.get(UFUNC_OPS.get(ufunc, ""))
        if fn is None:
            raise _err("unsupported", f"numpy ufunc np.{ufunc.__name__} has no NKI equivalent in nki_lite", depth=2)
        kwargs.pop("out", None)
        return fn(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = {"sum": "sum", "max": "max", "amax": "max", "min": "min", "amin": "min", "mean": "mean",
                "prod": "prod", "all": "all", "var": "var", "transpose": "transpose", "where": "where",
                "matmul": "matmul", "copy": "copy", "broadcast_to": "broadcast_to"}.get(func.__name__)
        if name is None:
            raise _err("unsupported", f"numpy function np.{func.__name__} is not supported on tiles", depth=2)
        return _op(name)(*args, **kwargs)

    def __array__(self, *a, **k):
        nested = _called_kernel(self._tracer)
        if nested is not None:
            raise nested
        raise _err("control_flow_on_tile",
                   f"tile '{self.name}' was converted to a numpy array inside the kernel; its values only "
                   "exist when the kernel runs", depth=2)


_SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "mod": "%", "power": "**",
            "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "left_shift": "<<", "right_shift": ">>",
            "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==",
            "not_equal": "!="}


def _index_tile(k) -> bool:
    return isinstance(k, Tile) and not k._is_view_indirect and not isinstance(k, PendingMatmul)


def _partition_broadcast_error(name: str, x: Tile, y: Tile):
    """NKI's operator overloads do not broadcast over the partition axis (NKI known issues); the nl
    functions do. Raised even when one side has 1 partition, which nl.add would broadcast."""
    small, big = (x, y) if x.shape[0] < y.shape[0] else (y, x)
    target = (big.shape[0],) + tuple(small.shape[1:])
    raise _err("shape_mismatch", f"operator '{_SYMBOLS[name]}' on tiles of shapes {list(x.shape)} and "
               f"{list(y.shape)} would broadcast over the partition axis, which NKI's operator overloads do not "
               "support", f"call nl.{name}(x, y) (the nl functions broadcast over partitions), or broadcast the "
               f"{list(small.shape)} tile explicitly with .broadcast_to({target})", depth=4)

class TilePrintWarning(UserWarning):
    """print() of a tile inside a kernel: it runs at trace time and shows no values (use nl.device_print)."""


def _warn_if_printed(tile: "Tile") -> None:
    loc = capture_loc(3)
    for node in stmt_at(loc.file, loc.line) if loc.line > 0 else ():
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "print"
                    and sub.lineno <= loc.line <= (sub.end_lineno or sub.lineno)):
                warnings.warn_explicit(TilePrintWarning(
                    f"print() of tile '{tile.name}' runs when the kernel is traced and shows the tile's description, "
                    f"not its values (NKI evaluates print at compile time); use nl.device_print('{tile.name}', "
                    f"{tile.name}) to print its values when the kernel runs"), TilePrintWarning, loc.file, loc.line)
                return


def _called_kernel(tracer: Tracer):
    """The error to raise when a tile reaches numpy because kernel code called an @nki.jit kernel (whose
    argument binding converts arrays): the kernel itself (recursion) or another kernel."""
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        callee = frame.f_locals.get("self") if frame.f_code.co_name in ("bind", "__call__", "trace") else None
        if callee is not None and hasattr(callee, "inspect_ir") and hasattr(callee, "fn"):
            break
        frame = frame.f_back
    else:
        return None
    if frame is None:
        return None
    name = getattr(callee.fn, "__name__", "?")
    outer = getattr(tracer.fn, "__name__", tracer.name)
    if callee.fn is tracer.fn:
        return _err("recursive_kernel", f"kernel '{name}' calls itself: a kernel is traced once into straight-line "
                    "instructions and loops, so it cannot recurse", depth=3)
    return _err("unsupported", f"kernel '{outer}' calls the @nki.jit kernel '{name}' with tiles; calling one kernel "
                "from another is not built in nki_lite", depth=3,
                hint=f"call the function behind it instead ({name}.fn, or keep an undecorated helper) so its "
                     "instructions are traced into this kernel")


class PendingMatmul(Tile):
    """A matmul result waiting for its destination (see module docstring)."""

    def __init__(self, tracer: Tracer, shape: tuple[int, int], ins: tuple[ir.Access, ir.Access],
                 op_attrs: tuple, loc):
        self._tracer = tracer
        self._dtype = "float32"
        self._shape = shape
        self._ins = ins
        self._op_attrs = op_attrs
        self._loc = loc
        self._access_cached: ir.Access | None = None
        self.consumed = False
        tracer.pending = self

    @property
    def shape(self):
        return self._shape

    @property
    def is_pending(self) -> bool:
        return self._access_cached is None and not self.consumed

    out_mask = None        # nc_matmul(mask=...): an ir.Mask over the [M, N] output
    chain: tuple = ()      # further (stationary, moving) accesses accumulated after the first (double_row)

    def _matmuls(self, dst: ir.Access, accumulate: bool) -> None:
        for k, ins in enumerate((self._ins,) + self.chain):
            self._tracer.emit_raw(ir.Instr("nc_matmul", (dst,), ins,
                                           self._op_attrs + attrs(accumulate=accumulate or k > 0), None, self._loc))

    def emit_into(self, dst: ir.Access, accumulate: bool) -> None:
        tr = self._tracer
        tr.pending = None
        if self.out_mask is None:
            self._matmuls(dst, accumulate)
            return
        # a masked matmul in existing IR ops: the product into a fresh PSUM tile, then a masked fp32
        # add into (or copy to) the destination; masked-off outputs are not written. The PSUM sum is
        # acc + (sum over k), the order the Tensor Engine's partial sums reach PSUM.
        buf = new_buffer(tr, self._shape, "float32", ir.Space.PSUM, "psum_masked", self._loc, raw=True)
        tmp = ir.Access.full(buf)
        self._matmuls(tmp, False)
        if accumulate:
            # matmul_group: this add is the masked matmul's accumulation into `dst` (passes/accumulation_start.py)
            tr.emit_raw(ir.Instr("tensor_tensor", (dst,), (dst, tmp),
                                 attrs(op="add", engine="vector", matmul_group=True), self.out_mask, self._loc))
        else:
            tr.emit_raw(ir.Instr("tensor_copy", (dst,), (tmp,), attrs(engine="vector"), self.out_mask, self._loc))

    def materialize(self) -> ir.Access:
        if self._access_cached is None:
            buf = new_buffer(self._tracer, self._shape, "float32", ir.Space.PSUM, "psum", self._loc, raw=True)
            self._access_cached = ir.Access.full(buf)
            self.emit_into(self._access_cached, accumulate=False)
        return self._access_cached

    def consume_into(self, dst: ir.Access, accumulate: bool) -> None:
        self.emit_into(dst, accumulate)
        if accumulate:
            self.consumed = True
        else:
            self._access_cached = dst

    @property
    def access(self) -> ir.Access:
        if self.consumed:
            raise _err("consumed_value", "this matmul result was accumulated into a PSUM tile and has no value "
                       "of its own", depth=3)
        return self.materialize()


# ---------------------------------------------------------------- view composition

def _as_index_or_none(x):
    if isinstance(x, Index):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Index(Affine(int(x)))
    return None


def compose(acc: ir.Access, key, tracer: Tracer) -> ir.Access:
    """The access of `tile[key]` for a tile with access `acc` (basic or advanced indexing)."""
    key = key if isinstance(key, tuple) else (key,)
    nd = len(acc.shape)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = nd - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) > nd:
        raise _err("rank", f"too many indices ({len(key)}) for a tile of rank {nd} and shape {acc.shape}")
    advanced = [k for k in key if isinstance(k, Index) and k.ndim > 0]
    if advanced:
        return _compose_advanced(acc, key, advanced)
    key = key + (slice(None),) * (nd - len(key))
    return _compose_basic(acc, key, _kept_points(tracer.buffers[acc.buffer], acc, key))


def _compose_advanced(acc: ir.Access, key: tuple, advanced: list) -> ir.Access:
    """Advanced indexing: every dimension indexed by an nl.arange expression (or an integer); the
    result has the expressions' common layout."""
    nd = len(acc.shape)
    if any(isinstance(k, (slice, DynSlice)) for k in key):
        raise _err("mixed_indexing", "mixing basic indexing (slices) and advanced indexing (nl.arange) "
                   "in one subscript is not supported")
    if len(key) < nd:
        raise _err("rank", f"advanced indexing needs an index for each of the {nd} dimensions of a tile of "
                   f"shape {acc.shape}; got {len(key)}")
    ndim = max(k.ndim for k in advanced)
    extents: dict[int, int] = {}
    for k in advanced:
        if k.ndim != ndim:
            raise _err("bad_index", "index expressions of different rank in one subscript",
                       "lift each nl.arange to the same rank ([:, None] and [None, :] for 2-D)")
        for ax, e in k.extents.items():
            if extents.setdefault(ax, e) != e:
                raise _err("bad_index", f"index expressions disagree on the extent of axis {ax}")
    new_shape = tuple(extents.get(a, 1) for a in range(ndim))
    subst = {}
    for d, k in enumerate(key):
        ix = _as_index_or_none(k)
        if ix is None:
            if isinstance(k, Tile):
                raise _err("unsupported", "indexing by a tile (indirect/dynamic indexing) is not built yet",
                           "index with nl.arange/affine expressions; gather with a loop over the index values "
                           "known at trace time")
            raise _err("bad_index", f"unsupported index {k!r}")
        subst[axis_var(d)] = _unbroadcast(ix.expr, new_shape)
    return ir.Access(acc.buffer, tuple(e.subst(subst) for e in acc.index), new_shape)


def drop_axes(t: Tile, axes) -> Tile:
    """`t` without its size-1 `axes`, whatever its space: a reduction's keepdims=False result, which NKI
    documents as the input's shape with the reduced axes removed (a [P, F] tile reduces to [P])."""
    key = tuple(0 if a in axes else slice(None) for a in range(len(t.shape)))
    return t.view_of(_compose_basic(t.access, key))


def _kept_points(buf: ir.Buffer, acc: ir.Access, key: tuple) -> frozenset[int]:
    """The integer-indexed dimensions of `acc` that stay in `acc[key]` with extent 1. HBM tensors follow
    numpy (every integer index drops its dimension). On-chip (SBUF/PSUM) tiles stay at least 2-D (NKI
    language guide, "The partition dimension is special"): an integer on the partition dimension keeps it
    at size 1, and when dropping the integer-indexed free dimensions would leave fewer than 2 dimensions,
    the last of them is kept at size 1 (`t[:, i]` of a [P, F] tile is [P, 1]; `t[0, 0, 10]` is [1, 1]).
    The partition dimension is the view axis that walks the buffer's partition axis: a legacy
    (n, par_dim(P), F) buffer's leading block axis is dropped like a free one (`t[i]` is [P, F])."""
    if buf.space == ir.Space.HBM:
        return frozenset()
    par = acc.index[buf.par_axis].vars() if buf.par_axis < len(acc.index) else set()
    points = [d for d, k in enumerate(key) if not isinstance(k, (slice, DynSlice))]
    kept = {d for d in points if axis_var(d) in par}
    free_points = [d for d in points if d not in kept]
    if free_points and len(key) - len(free_points) < 2:
        kept.add(free_points[-1])
    return frozenset(kept)


def _compose_basic(acc: ir.Access, key: tuple, kept: frozenset[int] = frozenset()) -> ir.Access:
    """Basic indexing (one key entry per dimension): slices and nl.ds keep a dimension, integers and
    scalar index expressions drop it, except where _kept_points keeps it with extent 1."""
    subst = {}
    new_shape: list[int] = []
    for d, k in enumerate(key):
        size = acc.shape[d]
        if d in kept:
            subst[axis_var(d)] = _point_expr(k, size)
            new_shape.append(1)
        elif isinstance(k, slice):
            subst[axis_var(d)] = _slice_expr(k, size, len(new_shape), new_shape)
        elif isinstance(k, DynSlice):
            s = as_index(k.start)
            if s is NotImplemented:
                raise _err("bad_index", f"unsupported nl.ds start {k.start!r}")
            subst[axis_var(d)] = s.expr + Affine.var(axis_var(len(new_shape)), k.step)
            new_shape.append(k.size)
        else:
            subst[axis_var(d)] = _point_expr(k, size)
    return ir.Access(acc.buffer, tuple(e.subst(subst) for e in acc.index), tuple(new_shape))


def _slice_expr(k: slice, size: int, axis: int, new_shape: list) -> Affine:
    """The source index of a slice over result axis `axis` (appending its extent to new_shape)."""
    start, stop, step = k.start, k.stop, k.step
    step = 1 if step is None else step
    if not isinstance(step, int) or step == 0:
        raise _err("bad_index", f"slice step must be a nonzero Python int, got {step!r}")
    if all(v is None or isinstance(v, (int, np.integer)) for v in (start, stop)):
        r = range(*slice(start, stop, step).indices(size))
        n, first = len(r), (r.start if len(r) else 0)
        if n == 0:
            raise _err("bad_index", f"empty slice {k} of a dimension of size {size}")
        new_shape.append(n)
        return Affine.make(first, {axis_var(axis): step})
    if step != 1:
        raise _err("bad_index", "symbolic slices must have step 1", "use nl.ds(start, size)")
    s = as_index(0 if start is None else start)
    e = as_index(size if stop is None else stop)
    if s is NotImplemented or e is NotImplemented:
        raise _err("bad_index", f"unsupported slice bounds {k}")
    span = (e - s).expr
    if not span.is_const or span.const <= 0:
        raise _err("bad_index", f"the size of slice {k} must be a positive constant; got `{user_text(span)}`",
                   "write x[i*T:(i+1)*T] or nl.ds(i*T, T)")
    new_shape.append(span.const)
    return s.expr + Affine.var(axis_var(axis))


def _point_expr(k, size: int) -> Affine:
    """The source index of an integer or scalar index expression (the dimension is dropped)."""
    if isinstance(k, NonAffine):
        k._fail()                  # `t[:, i % 2]`: unroll i's loop, else NL-E807
    ix = _as_index_or_none(k)
    if ix is None:
        if isinstance(k, Tile):
            raise _err("unsupported", "indexing by a tile (indirect/dynamic indexing) is not built yet")
        raise _err("bad_index", f"unsupported index {k!r} of type {type(k).__name__}")
    if ix.expr.is_const and not -size <= ix.expr.const < size:
        raise _err("out_of_bounds", f"index {ix.expr.const} is out of bounds for a dimension of size {size}")
    e = ix.expr
    if e.is_const and e.const < 0:
        e = Affine(e.const + size)
    return e


def _unbroadcast(expr: Affine, shape: tuple[int, ...]) -> Affine:
    """Axis vars of extent 1 only take the value 0: drop them so the axis becomes a broadcast."""
    return expr.subst({axis_var(a): 0 for a, n in enumerate(shape) if n == 1})
