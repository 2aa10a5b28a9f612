"""Kernels are pure functions of their arguments: warn where traced code mutates outside state.

nki_lite traces a kernel once per signature (shapes, dtypes, constants, grid, target) and reuses the
result, as NKI does ("NKI kernels must be pure functions of their arguments ... the cache may return
a stale compiled artifact", NKI Language Guide, Kernel Caching). A helper that appends to a
module-level list gives one result on the first trace and another after a retrace.

Contract: `watch(sources)` inspects the AST of the kernel and its reachable helpers (lang/source.py)
for statements that can mutate an object that outlives the trace, and fingerprints those objects;
`report(watch)` (after the kernel body ran) issues one `KernelPurityWarning` at the line of every
such statement whose object changed. Watched:
- `X.attr = ...` / `X[k] = ...` / `del X[...]` / augmented forms, and calls of container mutators
  (`append`, `extend`, `update`, `setdefault`, `pop`, ...) or `setattr` on X, where X is a
  module-level name, a closure variable of the kernel or helper (not one created while the kernel
  runs, as a kernel's inner functions' cells are) or a parameter whose default value is a mutable
  container (that default is shared by every call);
- every module-level or closure list/dict/set/bytearray/deque the analysed code reads, so a mutation
  through a call the AST cannot follow (a global list passed to a function that appends) is still
  reported, at the first line that reads it.
Only a change observed during this trace is reported (no warning for a branch not taken), and only
for the objects above: tiles, kernel locals and arguments are never flagged. `global` assignments
are rejected before tracing (lang/syntax.py).
"""
from __future__ import annotations

import ast
import collections
import warnings
from dataclasses import dataclass

from .source import FuncSource

_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
                       "setdefault", "popitem", "add", "discard", "difference_update", "intersection_update",
                       "symmetric_difference_update", "appendleft", "extendleft", "popleft", "rotate",
                       "__setitem__", "__delitem__", "__setattr__", "__iadd__"})
_CONTAINERS = (list, dict, set, bytearray, collections.deque)


class KernelPurityWarning(UserWarning):
    """Traced kernel code changed state that outlives the trace (its result may depend on the trace cache)."""


@dataclass
class _Site:
    src: FuncSource
    node: ast.AST
    root: str                 # the outside name
    path: tuple[str, ...]     # attributes after the root leading to the mutated object
    text: str                 # the statement, for the message
    how: str                  # "module-level" | "closure" | "default argument"


def _scope_locals(fn_node) -> set[str]:
    """Names bound in the function's own scope (parameters, assignments, loop targets, imports, defs)."""
    out: set[str] = set()
    a = fn_node.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
        out.add(arg.arg)

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(child.name)
                continue                                  # its body is another scope
            if isinstance(child, ast.Lambda):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
                out.add(child.id)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                for al in child.names:
                    out.add((al.asname or al.name).split(".")[0])
            elif isinstance(child, ast.ExceptHandler) and child.name:
                out.add(child.name)
            visit(child)
    visit(fn_node)
    return out


def _root(expr) -> tuple[str | None, tuple[str, ...]]:
    """(root name, attribute path) of `X.a.b` / `X.a[k]` (the path stops at the first subscript)."""
    path: list[str] = []
    cut = False
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Attribute):
            path.append(expr.attr)
        else:
            path.clear()
            cut = True
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None, ()
    return expr.id, (() if cut and not path else tuple(reversed(path)))


def _scope_nodes(fn_node, nested: bool = False):
    """The nodes of one function scope (not the bodies of functions defined in it); with nested=True,
    the function definitions directly in this scope instead."""
    todo = list(ast.iter_child_nodes(fn_node))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if nested and not isinstance(node, ast.Lambda):
                yield node
            continue
        if not nested:
            yield node
        todo.extend(ast.iter_child_nodes(node))


_cache: dict[int, tuple] = {}


def _analyse(src: FuncSource):
    """([(node, root, path, kind)], {outer name: first Load node}) for one function (cached)."""
    hit = _cache.get(id(src.node))
    if hit is not None and hit[0] is src.node:
        return hit[1], hit[2]
    sites: list[tuple[ast.AST, str, tuple[str, ...]]] = []
    reads: dict[str, ast.AST] = {}

    def walk(fn_node, enclosing: set[str]):
        local = _scope_locals(fn_node) | enclosing
        params = {a.arg for a in fn_node.args.posonlyargs + fn_node.args.args + fn_node.args.kwonlyargs}
        top = fn_node is src.node

        def outer(name: str) -> bool:
            # parameters of the analysed function are outer only through a mutable default
            if top and name in params:
                return True
            return name not in local

        def target(t, node):
            if isinstance(t, (ast.Tuple, ast.List)):
                for e in t.elts:
                    target(e, node)
            elif isinstance(t, (ast.Attribute, ast.Subscript)):
                name, path = _root(t)
                if isinstance(t, ast.Attribute):
                    path = path[:-1]                      # the object whose attribute is set
                if name and outer(name):
                    sites.append((node, name, path))

        for node in _scope_nodes(fn_node):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    target(t, node)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.target is not None:
                target(node.target, node)
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    target(t, node)
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr in _MUTATORS:
                    name, path = _root(f.value)
                    if name and outer(name):
                        sites.append((node, name, path))
                elif isinstance(f, ast.Name) and f.id in ("setattr", "delattr") and node.args:
                    name, path = _root(node.args[0])
                    if name and outer(name):
                        sites.append((node, name, path))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                reads.setdefault(node.id, node)
        for node in _scope_nodes(fn_node, nested=True):
            walk(node, local)
    walk(src.node, set())
    _cache[id(src.node)] = (src.node, sites, reads)
    return sites, reads


_MISSING = object()


def _resolve(src: FuncSource, name: str):
    """(object, how) for an outside name of `src.fn`, or (_MISSING, '')."""
    fn = src.fn
    code = fn.__code__
    if name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
        defaults = _defaults(fn)
        if name in defaults and isinstance(defaults[name], _CONTAINERS):
            return defaults[name], "default argument"
        return _MISSING, ""
    if fn.__closure__ and name in code.co_freevars:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents, "closure"
        except ValueError:
            return _MISSING, ""
    if name in fn.__globals__:
        return fn.__globals__[name], "module-level"
    return _MISSING, ""


def _defaults(fn) -> dict:
    code = fn.__code__
    pos = code.co_varnames[:code.co_argcount]
    d = dict(zip(pos[len(pos) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    d.update(fn.__kwdefaults__ or {})
    return d


_MAX_ITEMS = 1 << 16        # larger containers are not fingerprinted (a bound on the cost per trace)


def _fingerprint(obj):
    """A cheap value that changes when `obj` is mutated in place (None: cannot tell)."""
    try:
        if len(obj) > _MAX_ITEMS:
            return None
    except Exception:           # no len(), or a len() that fails: fingerprint by type below
        pass
    if isinstance(obj, dict):
        return ("dict", tuple((id(k), id(v)) for k, v in obj.items()))
    if isinstance(obj, (list, collections.deque)):
        return ("seq", tuple(map(id, obj)))
    if isinstance(obj, set):
        return ("set", frozenset(map(id, obj)))
    if isinstance(obj, bytearray):
        return ("bytes", bytes(obj))
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        return ("attrs", tuple((k, id(v)) for k, v in d.items()))
    return None


def _follow(obj, path):
    for a in path:
        obj = getattr(obj, a, _MISSING)
        if obj is _MISSING:
            return _MISSING
    return obj


@dataclass
class Watch:
    entries: list            # (site | (src, node, name, how), object, fingerprint)


def watch(sources: list[FuncSource]) -> Watch:
    entries = []
    seen: set[int] = set()
    for src in sources:
        sites, reads = _analyse(src)
        for node, name, path in sites:
            obj, how = _resolve(src, name)
            if obj is _MISSING or how == "":
                continue
            obj = _follow(obj, path)
            fp = _fingerprint(obj) if obj is not _MISSING else None
            if fp is None:
                continue
            entries.append((_Site(src, node, name, path, _text(src, node), how), obj, fp))
            seen.add(id(obj))
        for name, node in reads.items():
            obj, how = _resolve(src, name)
            fp = _fingerprint(obj) if isinstance(obj, _CONTAINERS) and id(obj) not in seen else None
            if fp is not None:
                seen.add(id(obj))
                entries.append((_Site(src, node, name, (), name, how), obj, fp))
    return Watch(entries)


def _text(src: FuncSource, node) -> str:
    try:
        s = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node the parser makes
        return "this statement"
    return s if len(s) <= 60 else s[:57] + "..."


def report(w: Watch, kernel_name: str) -> None:
    fired: set[int] = set()
    for site, obj, fp in w.entries:
        if id(obj) in fired or _fingerprint(obj) == fp:
            continue
        fired.add(id(obj))
        what = f"the {site.how} {type(obj).__name__} '{'.'.join((site.root,) + site.path)}'"
        if isinstance(site.node, ast.Name):
            msg = (f"{what}, read here, was modified while kernel '{kernel_name}' was traced")
        else:
            msg = f"`{site.text}` modifies {what} while kernel '{kernel_name}' is traced"
        msg += ("; it outlives the trace, and nki_lite (like NKI) reuses a traced kernel for every call with "
                "the same signature, so results depend on when the kernel was traced. Keep the state local "
                "to the kernel or pass it as an argument (a kernel must be a pure function of its arguments)")
        loc = site.src.loc(site.node)
        registry = site.src.fn.__globals__.setdefault("__warningregistry__", {})
        warnings.warn_explicit(KernelPurityWarning(msg), KernelPurityWarning, loc.file, loc.line,
                               module=site.src.fn.__globals__.get("__name__"), registry=registry)
