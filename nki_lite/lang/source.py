"""Kernel source: the AST of a kernel function and of the user-level helpers it reaches.

Contract:
- `function_node(fn)` is the `ast.FunctionDef` of a Python function, parsed from its whole source
  file (so line and column numbers are the file's own), or None when the source is not available
  (REPL, exec'd strings, C functions).
- `reachable(fn, constants)` lists `FuncSource`s for `fn` and every user-level Python function
  reachable from it by name: globals and closure cells of the functions seen so far, their default
  values and the kernel's trace-time constants (functions passed as arguments, the composable
  kernel pattern of NKI's language guide). nki_lite's own code (except `stdlib/`, which is user-level
  kernel code), the Python standard library and numeric libraries are not followed.
- The checks built on this (lang/syntax.py, lang/purity.py) see only what can be resolved
  statically; when a function's source is missing they check nothing rather than guess.
"""
from __future__ import annotations

import ast
import dis
import functools
import linecache
import os
import sysconfig
import types
from dataclasses import dataclass

from ..loc import Loc, _is_internal

_STDLIB_DIRS = tuple(os.path.abspath(p) + os.sep for p in
                     {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")} if p)
# top-level packages whose functions are library code, never kernel helpers
_LIBRARY_PACKAGES = frozenset({"numpy", "ml_dtypes", "scipy", "torch", "jax", "jaxlib", "llvmlite", "pytest",
                               "_pytest", "hypothesis", "math", "functools", "itertools", "builtins"})
_MAX_FUNCTIONS = 256            # reachable helpers examined per kernel (a bound, not a limit users meet)


@dataclass(frozen=True)
class FuncSource:
    fn: types.FunctionType
    node: ast.FunctionDef | ast.AsyncFunctionDef
    file: str

    def loc(self, node: ast.AST) -> Loc:
        return Loc(self.file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                   getattr(node, "end_col_offset", 0) if getattr(node, "end_lineno", None) == getattr(
                       node, "lineno", None) else 0)


@functools.lru_cache(maxsize=256)
def _parse(file: str, text: str) -> dict[tuple[int, str], ast.AST] | None:
    try:
        tree = ast.parse(text, file)
    except (SyntaxError, ValueError):
        return None
    index: dict[tuple[int, str], ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            index.setdefault((first, node.name), node)
            index.setdefault((node.lineno, node.name), node)
    return index


def function_node(fn) -> ast.FunctionDef | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    file = code.co_filename
    lines = linecache.getlines(file, getattr(fn, "__globals__", None))
    if not lines:
        return None
    index = _parse(file, "".join(lines))
    if index is None:
        return None
    return index.get((code.co_firstlineno, code.co_name))


def is_user_function(obj) -> bool:
    """A plain Python function written by the kernel's author (or in nki_lite/stdlib)."""
    if not isinstance(obj, types.FunctionType):
        return False
    file = os.path.abspath(obj.__code__.co_filename)
    if _is_internal(file) or file.startswith(_STDLIB_DIRS) or file.startswith("<"):
        return False
    top = (getattr(obj, "__module__", None) or "").split(".")[0]
    return top not in _LIBRARY_PACKAGES


def unwrap(obj):
    """The Python function behind a helper reference: @nki.jit kernels, bound methods, functools.wraps."""
    inner = getattr(obj, "fn", None)
    if isinstance(inner, types.FunctionType) and hasattr(obj, "inspect_ir"):   # an @nki.jit kernel object
        return inner
    if isinstance(obj, types.MethodType):
        return obj.__func__
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    return getattr(obj, "__wrapped__", obj) if not isinstance(obj, types.FunctionType) else obj


_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


@functools.lru_cache(maxsize=4096)
def _global_loads(code) -> frozenset[str]:
    """Names `code` (and the code nested in it) reads as globals: LOAD_GLOBAL / LOAD_NAME only, so an
    attribute such as `nl.load` never resolves to an unrelated module-level `load`."""
    out: set[str] = set()
    for ins in dis.get_instructions(code):
        if ins.opname in _LOADS:
            out.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_loads(c)
    return frozenset(out)


def referenced_values(fn) -> list:
    """Values `fn` can reach by name: the globals it loads, its closure cells and its default values."""
    out = []
    g = fn.__globals__
    for name in _global_loads(fn.__code__):
        if name in g:
            out.append(g[name])
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:              # an empty cell (assigned later in the enclosing function)
            pass
    out += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    return out


def reachable(fn, constants=()) -> list[FuncSource]:
    """`fn` first, then the user-level helpers it can reach by name (see the module docstring)."""
    seen: set[int] = set()
    out: list[FuncSource] = []
    todo = [fn] + list(constants)
    while todo and len(out) < _MAX_FUNCTIONS:
        f = unwrap(todo.pop(0))
        if not is_user_function(f) or id(f) in seen:
            continue
        seen.add(id(f))
        node = function_node(f)
        if node is None:
            continue
        out.append(FuncSource(f, node, f.__code__.co_filename))
        todo.extend(v for v in referenced_values(f) if not isinstance(v, types.ModuleType))
    return out


def constant_functions(bound_arguments: dict) -> list:
    """Functions among a kernel's trace-time constants (NKI's composable-kernel pattern)."""
    out = []
    for v in bound_arguments.values():
        vals = v if isinstance(v, (tuple, list)) else (v,)
        for x in vals:
            if callable(x) and not isinstance(x, type):
                out.append(x)
    return out


def stmt_at(file: str, line: int) -> list[ast.AST]:
    """The chain of AST nodes (outermost first) whose span contains `line` in `file` (empty if unknown)."""
    lines = linecache.getlines(file)
    if not lines:
        return []
    tree = _tree(file, "".join(lines))
    if tree is None:
        return []
    chain: list[ast.AST] = []
    node = tree
    while True:
        nxt = None
        for child in ast.iter_child_nodes(node):
            lo, hi = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
            if lo is not None and lo <= line <= (hi or lo):
                nxt = child
                break
        if nxt is None:
            return chain
        chain.append(nxt)
        node = nxt


@functools.lru_cache(maxsize=64)
def _tree(file: str, text: str):
    try:
        return ast.parse(text, file)
    except (SyntaxError, ValueError):
        return None


def _contains(node: ast.AST, line: int, col: int) -> bool:
    lo, hi = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if lo is None or not lo <= line <= (hi or lo):
        return False
    if line == lo and col < node.col_offset:
        return False
    if line == hi and node.end_col_offset is not None and col >= node.end_col_offset:
        return False
    return True


def control_flow_test(loc: Loc) -> tuple[str, str] | None:
    """("if" | "while" | "assert" | "and/or/not" | "conditional expression", test source) when `loc`
    lies inside the condition Python evaluates to choose a branch; None otherwise."""
    if loc is None or loc.line <= 0:
        return None
    found = None
    for node in stmt_at(loc.file, loc.line):
        for sub in ast.walk(node):
            kind, test = None, None
            if isinstance(sub, (ast.If, ast.While)):
                kind, test = ("if" if isinstance(sub, ast.If) else "while"), sub.test
            elif isinstance(sub, ast.Assert):
                kind, test = "assert", sub.test
            elif isinstance(sub, ast.IfExp):
                kind, test = "x if cond else y", sub.test
            if test is not None and _contains(test, loc.line, loc.col):
                found = (kind, ast.unparse(test))
        if found:
            return found
    return None


def loop_target(loc: Loc) -> str | None:
    """The variable name of the `for NAME in ...` statement whose iterable is at `loc`."""
    if loc is None or loc.line <= 0:
        return None
    for node in reversed(stmt_at(loc.file, loc.line)):
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name) and \
                getattr(node.iter, "lineno", 0) <= loc.line <= (getattr(node.iter, "end_lineno", 0) or 0):
            return node.target.id
    return None


_LIST_BUILDING = frozenset({"append", "extend", "insert"})


def loop_builds_list(loc: Loc) -> bool:
    """Whether the body of the `for ... in` loop whose iterable is at `loc` grows a list that lives
    across its iterations: `.append` / `.extend` / `.insert` on a name the body does not assign (a
    list created inside the body is fresh per iteration and needs no unrolling of this loop)."""
    if loc is None or loc.line <= 0:
        return False
    for node in reversed(stmt_at(loc.file, loc.line)):
        if isinstance(node, (ast.For, ast.AsyncFor)) and \
                getattr(node.iter, "lineno", 0) <= loc.line <= (getattr(node.iter, "end_lineno", 0) or 0):
            inside = [n for stmt in node.body for n in ast.walk(stmt)]
            assigned = {n.id for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _LIST_BUILDING
                       and not (isinstance(n.func.value, ast.Name) and n.func.value.id in assigned) for n in inside)
    return False


def unpack_shape_mismatch(exc: ValueError):
    """(loc, message) when `exc` is Python's "not enough / too many values to unpack" raised by kernel
    code unpacking a tensor's shape (`rows, cols = x.shape`); None for anything else."""
    import re
    m = re.match(r"(not enough|too many) values to unpack \(expected (\d+)", str(exc))
    if m is None or exc.__traceback__ is None:
        return None
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame, line = tb.tb_frame, tb.tb_lineno
    if _is_internal(frame.f_code.co_filename):
        return None
    loc = Loc(frame.f_code.co_filename, line, 0)
    for node in reversed(stmt_at(loc.file, line)):
        if isinstance(node, (ast.Assign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value if isinstance(node, ast.Assign) else node.iter
            tup = next((t for t in targets if isinstance(t, (ast.Tuple, ast.List))), None)
            if tup is None or any(isinstance(e, ast.Starred) for e in tup.elts):
                return None
            names = [ast.unparse(e) for e in tup.elts]
            src = ast.unparse(value)
            shape = None
            if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
                obj = frame.f_locals.get(value.value.id, frame.f_globals.get(value.value.id))
                shape = getattr(obj, "shape", None)
                what = value.value.id
            if shape is None:
                return None
            loc = Loc(loc.file, line, getattr(node, "col_offset", 0))
            msg = (f"'{frame.f_code.co_name}' expects {what} to be a {len(names)}-D tensor of shape "
                   f"[{', '.join(names)}] (`{', '.join(names)} = {src}`); got {what} of shape {tuple(shape)} "
                   f"({len(shape)}-D)")
            return loc, msg
    return None
