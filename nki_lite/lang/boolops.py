"""Python `and` / `or` on index comparisons: `mask=(ix < n // 2 and iy < m // 2)`.

NKI's frontend reads a kernel's source, so `and` of two index comparisons is their conjunction (the
documented `nisa.nc_match_replace8` mask example writes it so). Traced Python evaluates `a and b` by
truth-testing `a`, which a symbolic comparison cannot answer (NL-E802). So before a kernel runs, its
`and` / `or` expressions that have a comparison operand are rewritten to calls that keep Python's
meaning for plain values and combine masks:

- `a and b`: `a & b` when `a` is an index comparison (`Predicate`) and `b` is one or a Python bool;
  otherwise Python's `a and b` (short-circuit kept: `b` is evaluated only when Python would).
- `a or b`: a comparison `or` a Python bool is `True` / the comparison; two comparisons are `a | b`,
  which is an NL-E806 error (masks are conjunctions) unless they compare current-dialect loop variables
  only (then those loops are traced unrolled and `or` is Python's); otherwise Python's `a or b`.
- A comparison of known ints (no variable left, e.g. a one-program launch's program_id) is a bool.

Contract: `rewritten(fn)` is a function equal to `fn` but with those expressions rewritten, or None
when nothing needs rewriting or the source is not available (then `fn` runs as it is). Line and
column numbers are the source file's own (the AST comes from the whole file), so errors and loop
locations name the user's lines unchanged. Closure variables are bound to their values at the call.
"""
from __future__ import annotations

import ast
import copy
import types

import numpy as np

from .index import Predicate, unroll_python_loops
from .source import function_node

_RUNTIME = "__nki_lite_boolop__"


def _decided(x):
    """A comparison of known ints (a one-program launch's program_id) is a Python bool."""
    return bool(x) if isinstance(x, Predicate) and x.is_known else x


def _and(a, rest):
    a = _decided(a)
    if isinstance(a, Predicate):
        b = _decided(rest())
        if isinstance(b, (Predicate, bool, np.bool_)):
            return a & b
        return a and b                    # truth-tests the comparison: NL-E802 at the user's line
    return a and rest()


def _or(a, rest):
    a = _decided(a)
    if isinstance(a, Predicate):
        b = _decided(rest())
        if isinstance(b, (bool, np.bool_)):
            return True if b else a
        try:
            return a | b                  # NL-E806: masks are conjunctions
        except Exception as error:
            if isinstance(b, Predicate):
                # current-dialect loop variables only (`if i == 0 or i == n - 1:`): Python's `or` on
                # ints once those loops are traced unrolled
                unroll_python_loops(a.variables() | b.variables(), error)
            raise
    return a or rest()


def _rewritable(node: ast.BoolOp) -> bool:
    """A BoolOp with a comparison inside (`(flag and j < 3) or False` too) and nothing a lambda would
    change (walrus, yield, await)."""
    inside = list(ast.walk(node))
    if not any(isinstance(n, ast.Compare) for n in inside):
        return False
    return not any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in inside)


class _Rewrite(ast.NodeTransformer):
    def __init__(self):
        self.count = 0

    def visit_BoolOp(self, node: ast.BoolOp):
        rewrite = _rewritable(node)
        self.generic_visit(node)
        if not rewrite:
            return node
        self.count += 1
        which = "and_" if isinstance(node.op, ast.And) else "or_"
        out = node.values[-1]
        for left in reversed(node.values[:-1]):       # a and b and c -> and(a, lambda: and(b, lambda: c))
            rest = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                              body=out)
            fn = ast.Attribute(value=ast.Name(_RUNTIME, ast.Load()), attr=which, ctx=ast.Load())
            out = ast.Call(func=fn, args=[left, rest], keywords=[])
            ast.copy_location(rest, left)
            ast.copy_location(fn, left)
            ast.copy_location(out, node)
        return out


class _Runtime:
    """What the rewritten code calls (a closure variable of the rewritten function, not a global)."""
    and_ = staticmethod(_and)
    or_ = staticmethod(_or)


_CACHE: dict[types.CodeType, types.CodeType | None] = {}


def _outer_code(fn) -> types.CodeType | None:
    """The code of `def outer(runtime, *freevars): def fn(...): ...; return fn`, compiled once per kernel."""
    code = fn.__code__
    if code in _CACHE:
        return _CACHE[code]
    out = None
    node = function_node(fn)
    if node is not None and "__class__" not in code.co_freevars and _RUNTIME not in code.co_freevars:
        inner = copy.deepcopy(node)
        inner.decorator_list = []
        rw = _Rewrite()
        inner = rw.visit(inner)
        if rw.count:
            params = [ast.arg(_RUNTIME)] + [ast.arg(v) for v in code.co_freevars]
            outer = ast.FunctionDef(
                name="__nki_lite_outer__", args=ast.arguments(posonlyargs=[], args=params, kwonlyargs=[],
                                                              kw_defaults=[], defaults=[]),
                body=[inner, ast.Return(ast.Name(inner.name, ast.Load()))], decorator_list=[], returns=None,
                **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
            ast.copy_location(outer, node)
            ast.fix_missing_locations(outer)
            module = ast.Module(body=[outer], type_ignores=[])
            try:
                compiled = compile(module, code.co_filename, "exec")
                out = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
            except (SyntaxError, ValueError, StopIteration):
                out = None
    _CACHE[code] = out
    return out


def rewritten(fn):
    """`fn` with its index-comparison `and` / `or` rewritten (module docstring), or None."""
    if not isinstance(fn, types.FunctionType):
        return None
    outer_code = _outer_code(fn)
    if outer_code is None:
        return None
    try:
        cells = [c.cell_contents for c in (fn.__closure__ or ())]
    except ValueError:                    # a closure variable not bound yet: run the original
        return None
    outer = types.FunctionType(outer_code, fn.__globals__, "__nki_lite_outer__")
    new = outer(_Runtime, *cells)
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    return new
