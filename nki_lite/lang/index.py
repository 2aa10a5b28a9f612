"""Symbolic indices: loop variables, program ids, nl.arange / nl.mgrid expressions and masks.

Contract:
- `Index` is an affine expression (core.affine.Affine) plus a *layout*: its rank and the extent
  of each axis variable `@k` it uses. Loop variables and program ids have rank 0; `nl.arange(n)`
  has rank 1 and must be lifted with `[:, None]` / `[None, :]` before indexing tiles.
- Arithmetic with ints and other `Index`es stays affine (multiplying two symbolic values is an
  error). Comparisons build a `Predicate` (a mask); `&` combines predicates.
- Truth-testing or int()-ing an Index raises control_flow_on_index: trace-time Python cannot
  branch on a value that only exists at run time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core.affine import Affine, Cmp, Mask, axis_var
from .api import api

from .list_loops import list_index_unroll
from .tracer import UnrollRequest, active, user_text


def _err(name: str, msg: str, hint: str | None = None):
    return errors.make(name, msg, loc=capture_loc(3), hint=hint)


class Index:
    """An affine index expression with a layout (rank + axis extents)."""

    __slots__ = ("expr", "ndim", "extents")
    __array_priority__ = 1000

    def __init__(self, expr: Affine, ndim: int = 0, extents: dict[int, int] | None = None):
        self.expr = expr
        self.ndim = ndim
        self.extents = dict(extents or {})

    # ---- layout helpers
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.extents.get(k, 1) for k in range(self.ndim))

    @staticmethod
    def _merge(a: "Index", b: "Index") -> tuple[int, dict[int, int]]:
        if a.ndim and b.ndim and a.ndim != b.ndim:
            raise _err("bad_index", f"cannot combine index expressions of rank {a.ndim} and {b.ndim}",
                       "lift every nl.arange to the same rank with [:, None] / [None, :]")
        ext = dict(a.extents)
        for k, v in b.extents.items():
            if ext.get(k, v) != v:
                raise _err("bad_index", f"index expressions disagree on the extent of axis {k}: "
                           f"{ext[k]} vs {v}")
            ext[k] = v
        return max(a.ndim, b.ndim), ext

    # ---- arithmetic
    def _combine(self, other, sign: int) -> "Index":
        o = as_index(other)
        if o is NotImplemented:
            return NotImplemented
        ndim, ext = Index._merge(self, o)
        return Index(self.expr + (o.expr if sign > 0 else -o.expr), ndim, ext)

    def __add__(self, other):
        return self._combine(other, +1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        o = as_index(other)
        return NotImplemented if o is NotImplemented else o._combine(self, -1)

    def __neg__(self):
        return Index(-self.expr, self.ndim, self.extents)

    def __pos__(self):
        return self

    def __mul__(self, other):
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return Index(self.expr.scale(int(other)), self.ndim, self.extents)
        if isinstance(other, Index):
            if other.expr.is_const:
                return self * other.expr.const
            if self.expr.is_const:
                return other * self.expr.const
            raise _err("bad_index", f"the product of two symbolic indices (`{user_text(self.expr)}` * "
                       f"`{user_text(other.expr)}`) is not affine",
                       "multiply loop variables / aranges only by Python ints")
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, int) and self.expr.is_const:
            return Index(Affine(self.expr.const // other))
        if isinstance(other, int) and all(v % other == 0 for _, v in self.expr.terms) and self.expr.const % other == 0:
            return Index(Affine.make(self.expr.const // other, {k: v // other for k, v in self.expr.terms}),
                         self.ndim, self.extents)
        error = _err("bad_index", f"integer division of a symbolic index (`{user_text(self.expr)}` // {other!r}) "
                     "is not affine",
                     "restructure the loop so indices are (loop variable) * constant + constant")
        _unroll_for({v for v, _ in self.expr.terms}, error)     # loop variables only: unroll those loops
        raise error

    def __truediv__(self, other):
        return self._true_division(other, False)

    def __rtruediv__(self, other):
        return self._true_division(other, True)

    def _true_division(self, other, reverse: bool):
        """`i / n` is a Python float: known for a known int; for loop variables of the current dialect
        (Python semantics: `math.ceil((H - i * B) / 128)`) the loops unroll; otherwise NL-E807."""
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, bool) \
                and self.expr.is_const:
            a, b = (other, self.expr.const) if reverse else (self.expr.const, other)
            return a / b
        text = f"{other!r} / `{user_text(self.expr)}`" if reverse else f"`{user_text(self.expr)}` / {other!r}"
        error = _err("bad_index", f"true division of a symbolic index ({text}) is a float known only when the "
                     "kernel runs", "use // for an index, or nl.static_range to unroll the loop")
        unroll_python_loops(self.expr.vars(), error)
        raise error

    def __mod__(self, other):
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool) and self.expr.is_const:
            return Index(Affine(self.expr.const % int(other)))
        # not affine: a value that can only feed hints such as nc_matmul(tile_position=...); any use as
        # an index, mask or shape is an error (NL-E807) naming the remainder
        return NonAffine(f"({self.expr}) % {other!r}", frozenset(self.expr.vars()))

    def __divmod__(self, other):
        # Python's divmod(i, n) is (i // n, i % n): the same rules (a loop of the current dialect unrolls)
        return self // other, self % other

    # ---- comparisons -> masks
    def _cmp(self, other, op: str) -> "Predicate":
        o = as_index(other)
        if o is NotImplemented:
            raise _err("bad_mask", f"cannot compare an index with {type(other).__name__}")
        ndim, ext = Index._merge(self, o)
        return Predicate(Mask((Cmp(self.expr - o.expr, op),)), ndim, ext)

    def __lt__(self, o): return self._cmp(o, "<")
    def __le__(self, o): return self._cmp(o, "<=")
    def __gt__(self, o): return self._cmp(o, ">")
    def __ge__(self, o): return self._cmp(o, ">=")
    def __eq__(self, o): return self._cmp(o, "==")  # noqa: E704
    def __ne__(self, o): return self._cmp(o, "!=")  # noqa: E704
    __hash__ = None  # type: ignore[assignment]

    # ---- things that cannot work at trace time
    def __bool__(self):
        if self.expr.is_const:              # a known int (program_id of a one-program launch, i // n of ints)
            return bool(self.expr.const)
        error = _err("control_flow_on_index",
                     f"Python control flow depends on the symbolic index `{user_text(self.expr)}`, whose value is only "
                     "known when the kernel runs")
        unroll_python_loops(self.expr.vars(), error)       # `if i:` / `not i` in the current dialect
        raise error

    def __index__(self):
        if self.expr.is_const:
            return int(self.expr.const)
        error = _err("control_flow_on_index",
                     f"the symbolic index `{user_text(self.expr)}` was used where Python needs a concrete int "
                     "(range(), list index, int())",
                     "use nl.static_range to unroll, or index tiles with the variable directly")
        # a Python list of tiles indexed by loop variables (`tiles[bm][k]`): unroll the loops that index
        # and fill that list (lang/list_loops.py)
        _request_unroll(list_index_unroll(self.expr.vars()), error)
        unroll_python_loops(self.expr.vars(), error)       # int(i), range(i), a list index in the current dialect
        raise error

    __int__ = __index__

    # ---- lifting aranges
    def __getitem__(self, key):
        if self.ndim != 1:
            raise _err("bad_index", "only a 1-D nl.arange can be lifted with [:, None] / [None, :]")
        key = key if isinstance(key, tuple) else (key,)
        slots = [k for k in key if k is not None]
        if len(slots) != 1 or slots[0] != slice(None):
            raise _err("bad_index", f"unsupported arange lifting {key!r}", "write nl.arange(n)[:, None] or [None, :]")
        pos = next(i for i, k in enumerate(key) if k is not None)
        # the arange uses axis @0 in its 1-D layout: move it to position `pos`
        return Index(self.expr.subst({axis_var(0): Affine.var(axis_var(pos))}), len(key),
                     {pos: self.extents[0]})

    def __repr__(self):
        return f"Index({self.expr}, shape={self.shape})"


class Predicate:
    """A mask: a conjunction of affine comparisons with a layout."""

    __slots__ = ("mask", "ndim", "extents")

    def __init__(self, mask: Mask, ndim: int, extents: dict[int, int]):
        self.mask, self.ndim, self.extents = mask, ndim, extents

    def __and__(self, other: "Predicate") -> "Predicate":
        if isinstance(other, (bool, np.bool_)):
            # a Python condition already decided at trace time (`(i < n) & causal & sliding` where causal
            # is a plain True when the feature is off): True leaves the predicate, False makes it never hold
            return self if other else Predicate(self.mask & Mask((Cmp(Affine(1), "<"),)), self.ndim, self.extents)
        if not isinstance(other, Predicate):
            raise _err("bad_mask", "masks combine with & only with other index comparisons or Python bools")
        ndim = max(self.ndim, other.ndim)
        return Predicate(self.mask & other.mask, ndim, {**self.extents, **other.extents})

    __rand__ = __and__

    def __or__(self, other):
        raise _err("bad_mask", "masks cannot be combined with |: only conjunctions (&) are affine masks",
                   "split the work into two masked instructions")

    def __invert__(self):
        if len(self.mask.terms) == 1:
            c = self.mask.terms[0]
            neg = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[c.op]
            return Predicate(Mask((Cmp(c.expr, neg),)), self.ndim, self.extents)
        raise _err("bad_mask", "only a single comparison can be negated with ~")

    @property
    def is_known(self) -> bool:
        """Every side of every comparison is a known int (no variable)."""
        return all(c.expr.is_const for c in self.mask.terms)

    def variables(self) -> set:
        return {v for c in self.mask.terms for v, _ in c.expr.terms}

    def __bool__(self):
        if self.is_known:
            # every side is a known int (e.g. program_id of a one-program launch): Python decides it now
            return bool(all(c.evaluate({}, ()) for c in self.mask.terms))
        cond = " & ".join(f"{user_text(c.expr)} {c.op} 0" for c in self.mask.terms)
        error = _err("control_flow_on_index",
                     f"Python control flow depends on a comparison of symbolic indices (`{cond}`), whose value is "
                     "only known when the kernel runs",
                     "pass the comparison as mask= to the instruction instead of using if/while")
        _unroll_for({v for c in self.mask.terms for v, _ in c.expr.terms}, error)
        raise error

    def __repr__(self):
        return f"Predicate({self.mask})"


def _unroll_for(variables: set, error: Exception) -> None:
    """Python needs the concrete value of an expression of symbolic loop variables only (a branch,
    `i // 2`, `i % 2` used as an index): ask lang/trace.py to trace again with those loops unrolled
    (tracer.UnrollRequest), as NKI's simulator runs them in Python. Axis variables and program ids:
    return, and the caller raises its error."""
    tr = active()
    if tr is not None and variables and not any(v.startswith(("@", "pid")) for v in variables):
        _request_unroll(tr.open_loop_locs(variables), error)


def unroll_python_loops(variables, error: Exception) -> None:
    """Python needs the value of an expression of loop variables (`if i:`, `int(i)`, `range(i + 1)`) and
    every variable is a loop with Python semantics (the current dialect, lang/ranges.py `python_loop`):
    trace again with those loops unrolled. Otherwise (a legacy loop, an arange axis, a program id)
    return, and the caller raises its error (NL-E802)."""
    tr = active()
    variables = set(variables)
    if tr is not None and variables and variables <= tr.python_loops:
        _request_unroll(tr.open_loop_locs(variables), error)


def _request_unroll(locs, error: Exception) -> None:
    """Raise UnrollRequest for `locs` (loop locations) unless they are empty or already unrolled."""
    tr = active()
    if locs and tr is not None and not locs <= tr.unroll_locs:
        raise UnrollRequest(locs, error)


def as_index(x) -> "Index":
    if isinstance(x, Index):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Index(Affine(int(x)))
    return NotImplemented


# ---------------------------------------------------------------- constructors

@api("nl.arange")
def arange(*args) -> Index:
    """nl.arange(stop) / nl.arange(start, stop): a 1-D affine index (lift it with [:, None])."""
    if len(args) == 1:
        start, stop = 0, args[0]
    elif len(args) == 2:
        start, stop = args
    else:
        raise _err("bad_index", "nl.arange takes (stop) or (start, stop)")
    if not all(isinstance(a, (int, np.integer)) for a in (start, stop)):
        raise _err("bad_index", "nl.arange bounds must be Python ints known at trace time")
    n = int(stop) - int(start)
    if n < 0:                          # n == 0 is an empty axis (an empty tensor's tiles)
        raise _err("bad_index", f"nl.arange({start}, {stop}) has stop < start")
    return Index(Affine.make(int(start), {axis_var(0): 1}), 1, {0: n})


class _MGrid:
    """nl.mgrid[0:P, 0:F, ...] -> per-axis Index expressions (also named .p / .x / .y / .z)."""

    def __getitem__(self, key) -> "_Grid":
        key = key if isinstance(key, tuple) else (key,)
        ndim = len(key)
        outs = []
        for k, s in enumerate(key):
            if not isinstance(s, slice) or s.stop is None:
                raise _err("bad_index", "nl.mgrid takes slices like nl.mgrid[0:128, 0:512]")
            start, stop, step = s.start or 0, s.stop, s.step or 1
            n = len(range(start, stop, step))
            outs.append(Index(Affine.make(start, {axis_var(k): step}), ndim, {k: n}))
        return _Grid(outs)


class _Grid(tuple):
    @property
    def p(self) -> Index:
        return self[0]

    @property
    def x(self) -> Index:
        return self[1]

    # 3-D and 4-D grids name their further axes y and z (nki-samples' vision kernels: mgrid[0:p, 0:w, 0:h, 0:w2])
    @property
    def y(self) -> Index:
        return self._axis(2, "y")

    @property
    def z(self) -> Index:
        return self._axis(3, "z")

    def _axis(self, k: int, name: str) -> Index:
        if k >= len(self):
            raise _err("rank", f"mgrid.{name} names axis {k}, but this grid has {len(self)} axes")
        return self[k]

    def __new__(cls, items):
        return super().__new__(cls, items)


mgrid = _MGrid()


@dataclass(frozen=True)
class DynSlice:
    """nl.ds(start, size): a slice whose start may be symbolic."""
    start: object
    size: int
    step: int = 1


@api("nl.ds")
def ds(start, size) -> DynSlice:
    if not isinstance(size, (int, np.integer)) or size < 0:
        # size 0 is an empty slice, as numpy's (a shard with no rows: the library's cross_entropy on 2 cores
        # with one position); accesses to it move nothing (lower/passes/drop_empty.py)
        raise _err("bad_index", f"nl.ds size must be a non-negative Python int, got {size!r}")
    return DynSlice(start, int(size))


class NonAffine:
    """`i % n` of a loop variable: not an affine index. Arithmetic keeps it non-affine; it is accepted
    only where the value is a hint (nc_matmul tile_position); as an index or mask it is NL-E807."""

    def __init__(self, text: str, variables: frozenset = frozenset()):
        self.text = text
        self.variables = variables

    def _op(self, *_):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __mod__ = _op

    def _fail(self, *_):
        """Used as an index or a value: the loops of its variables are traced unrolled (where every for
        loop is a Python loop, `i % 2` is an int: the double-buffered tutorials), else NL-E807."""
        error = _err("bad_index", f"{self.text}: the remainder of a symbolic index is not affine",
                     "use an extra loop level or nl.mgrid over the split axes")
        _unroll_for(set(self.variables), error)
        raise error

    __index__ = __int__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _fail

    def __repr__(self) -> str:
        return f"{self.text} (the remainder of a symbolic index is not affine)"
