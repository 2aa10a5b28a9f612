"""Python lists of tiles indexed by loop variables: the loops involved are traced unrolled.

Contract: `list_index_unroll(index_vars)` is called when a symbolic index is used where Python needs an
int. When every variable is the variable of an open symbolic loop and the kernel statement executing
subscripts a Python list or tuple (`lhsT_tiles[k]`, `result_tmps[m][bm][bn]`), it returns the
(file, line) locations of the loops to trace unrolled (lang/tracer.UnrollRequest, lang/trace.py):
- the open loops whose variables the index uses, and
- the loops that fill the list: every `for` loop enclosing a `NAME.append(...)` / `.extend` / `.insert`
  / `NAME += ...` of the list inside the function that subscripts it, without enclosing the statement
  that creates the list (`NAME = []`), followed through lists appended into it (lists of lists).
Otherwise it returns None and the caller raises its error (NL-E802).
`index_error_unroll(exc)`: the same filling loops for an IndexError raised by such a subscript with an int
index (the indexing loops already unrolled, or of one iteration): lang/trace.py retraces with them unrolled.

Why: in the current dialect every `for` loop is a Python loop (NKI's language guide, "all for loops
(except dynamic_range) are unrolled at specialization time"), so a list appended in one
`nl.affine_range` loop holds one tile per iteration. nki_lite keeps loops symbolic (the IR size does not
depend on trip counts), which leaves such a list with one symbolic tile; unrolling exactly the loops
that build and index the list gives the Python semantics while every other loop stays a loop.
"""
from __future__ import annotations

import ast
import sys

from ..loc import _is_internal
from .source import stmt_at
from .tracer import active

_GROW = ("append", "extend", "insert")


def list_index_unroll(index_vars: set[str]) -> set | None:
    tr = active()
    if tr is None or not index_vars or any(v.startswith(("@", "pid")) for v in index_vars):
        return None
    locs = tr.open_loop_locs(index_vars)
    if not locs:
        return None
    frame = _user_frame()
    if frame is None:
        return None
    chain = stmt_at(frame.f_code.co_filename, frame.f_lineno)
    stmt = next((n for n in reversed(chain) if isinstance(n, ast.stmt)), None)
    func = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if stmt is None or func is None:
        return None
    names = {n for n in _subscripted_names(stmt) if isinstance(_lookup(frame, n), (list, tuple))}
    if not names:
        return None
    return locs | _filling_loops(func, names, frame.f_code.co_filename)


def index_error_unroll(exc: IndexError) -> set | None:
    """The loops filling the Python list whose subscript raised `exc` in kernel code (a list appended once
    per iteration of a loop traced symbolically holds one tile, so an int index past 0 fails where NKI's
    Python loop would have appended one per iteration); None when the failing statement is not kernel code
    subscripting such a list."""
    tb, frame, line = exc.__traceback__, None, 0
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    if frame is None:
        return None
    chain = stmt_at(frame.f_code.co_filename, line)
    stmt = next((n for n in reversed(chain) if isinstance(n, ast.stmt)), None)
    func = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if stmt is None or func is None:
        return None
    names = {n for n in _subscripted_names(stmt) if isinstance(_lookup(frame, n), (list, tuple))}
    return _filling_loops(func, names, frame.f_code.co_filename) if names else None


def _user_frame():
    f = sys._getframe(2)
    while f is not None and _is_internal(f.f_code.co_filename):
        f = f.f_back
    return f


def _lookup(frame, name: str):
    if name in frame.f_locals:
        return frame.f_locals[name]
    return frame.f_globals.get(name)


def _subscripted_names(stmt: ast.stmt) -> set[str]:
    """Root names of subscript chains in the statement (`a[i][j]` -> a)."""
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
    return out


def _parents(func: ast.AST) -> dict:
    parent = {}
    for node in ast.walk(func):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    return parent


def _loops_above(node, parent, func) -> list[ast.For]:
    out = []
    while node is not func and node in parent:
        node = parent[node]
        if isinstance(node, (ast.For, ast.AsyncFor)):
            out.append(node)
    return out


def _growth(func: ast.AST, name: str):
    """(statement growing the list, the names appended into it) for every growth of `name`."""
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROW
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
            yield node, {a.id for a in node.args if isinstance(a, ast.Name)}
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            yield node, {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}


def _filling_loops(func: ast.AST, names: set[str], file: str) -> set:
    parent = _parents(func)
    out: set = set()
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        made = [n for n in ast.walk(func) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        outer = {id(lp) for m in made for lp in _loops_above(m, parent, func)}
        for grow, inner in _growth(func, name):
            for lp in _loops_above(grow, parent, func):
                if id(lp) not in outer:
                    out |= {(file, lp.lineno), (file, lp.iter.lineno)}
            todo.extend(inner)
    return out
