"""Python constructs a kernel may not use (unsupported_syntax, NL-E803), checked before tracing.

Contract: `check(sources)` walks the AST of a kernel and of the user helpers it reaches
(lang/source.py) and raises NL-E803 at the first rejected construct, naming it, the reason and the
alternative. It is run by lang/trace.py before the kernel body executes, so the interpreter and the
JIT reject exactly the same kernels.

What is rejected, and why (docs/syntax.md has the table with sources). nki_lite implements the
legacy dialect, whose front end ran kernels as Python (any construct passed); NKI's current compiler
front end (leanprover/KLR interop/klr/gather.c, KLR/NKI/Simplify.lean) rejects many statement and
expression kinds. Rejected here are the constructs that NKI's compiler rejects, that no public NKI
kernel uses inside a kernel (aws-neuron/nki-samples, nki-library, the SDK tutorials), and that break
tracing: try (it swallows trace errors and leaves loops half-recorded), global/nonlocal (state that
outlives the trace), class definitions, async def/for/with and await (a coroutine body never runs),
generator expressions that escape and yield (evaluated lazily, so their instructions would land
wherever the generator is consumed, not where it is written; a generator passed straight to a
consuming builtin, `tuple(s for s in shape)`, is as eager as a list comprehension and accepted) and `with` other than NKI's one form, a single
argument-less call (`with nl.no_reorder():`). Constructs NKI's compiler rejects that trace
eagerly and harmlessly (comprehensions, lambda, del, for/while-else, inner function definitions,
which the SDK attention tutorials use) are accepted; `raise` and `import` inside kernels are used by
nki-library. `print` is legal (NKI evaluates it at compile time); printing a tile warns
(lang/tile.py) and points to nl.device_print.
"""
from __future__ import annotations

import ast

from .. import errors
from .source import FuncSource

_WHY = "NKI's compiler rejects it"

# node type -> (what, alternative)
_STATEMENTS: dict[type, tuple[str, str]] = {
    ast.Try: ("a `try` statement", "check conditions with if/else at trace time; assert for fatal errors"),
    ast.Global: ("a `global` statement", "kernels cannot assign to global variables: pass values as arguments "
                 "and return results"),
    ast.Nonlocal: ("a `nonlocal` statement", "return the value from the helper instead of assigning to an "
                   "enclosing function's variable"),
    ast.ClassDef: ("a class definition inside a kernel", "define the class at module level and pass or "
                   "construct its instances"),
    ast.AsyncFunctionDef: ("`async def`", "use ordinary (synchronous) functions"),
    ast.AsyncFor: ("`async for`", "use ordinary for loops (nl.affine_range / nl.sequential_range / range)"),
    ast.AsyncWith: ("`async with`", "use `with` on an NKI context manager, e.g. `with nl.no_reorder():`"),
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = _STATEMENTS[ast.Try]

_EXPRESSIONS: dict[type, tuple[str, str]] = {
    ast.GeneratorExp: ("a generator expression that escapes (it runs later, where it is consumed)",
                       "use a list comprehension, or consume it at once (tuple(...), sum(...), any(...), ...)"),
    ast.Yield: ("`yield` (a generator kernel)", "return the output tensors"),
    ast.YieldFrom: ("`yield from` (a generator kernel)", "return the output tensors"),
    ast.Await: ("`await`", "use ordinary (synchronous) calls"),
}


def _reject(src: FuncSource, node: ast.AST, what: str, alternative: str, why: str = _WHY):
    return errors.make("unsupported_syntax", f"{what} is not supported inside an NKI kernel ({why}); "
                       f"found in '{src.fn.__name__}'", loc=src.loc(node), hint=alternative)


def _with_ok(node: ast.With) -> str | None:
    """None when `node` is NKI's one `with` form: one argument-less call of a (dotted) name, no `as`."""
    if len(node.items) != 1:
        return "a `with` statement with several context managers"
    item = node.items[0]
    if item.optional_vars is not None:
        return "a `with ... as name` binding"
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return "a `with` statement whose context is not a function call"
    if call.args or call.keywords:
        return "a `with` context called with arguments"
    f = call.func
    while isinstance(f, ast.Attribute):
        f = f.value
    if not isinstance(f, ast.Name):
        return "a `with` context that is not a simple (dotted) function name"
    return None


# builtins that consume a generator at once: `tuple(s for s in shape)` is as eager as a list comprehension
_EAGER = frozenset({"tuple", "list", "set", "frozenset", "dict", "sum", "any", "all", "max", "min", "sorted"})


def _consumed_at_once(gen: ast.GeneratorExp, parent: ast.AST | None) -> bool:
    if not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is gen):
        return False
    f = parent.func
    return (isinstance(f, ast.Name) and f.id in _EAGER) or (isinstance(f, ast.Attribute) and f.attr == "join")


_cache: dict[int, tuple] = {}


def violations(src: FuncSource) -> list[tuple[ast.AST, str, str]]:
    """(node, what, alternative) of every rejected construct in one function, in source order."""
    key = id(src.node)
    hit = _cache.get(key)
    if hit is not None and hit[0] is src.node:
        return hit[1]
    found: list[tuple[ast.AST, str, str]] = []
    if isinstance(src.node, ast.AsyncFunctionDef):
        found.append((src.node,) + _STATEMENTS[ast.AsyncFunctionDef])
    parents = {id(c): p for p in ast.walk(src.node) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(src.node):
        if node is src.node:
            continue
        t = type(node)
        if t is ast.GeneratorExp and _consumed_at_once(node, parents.get(id(node))):
            continue
        if t in _STATEMENTS:
            found.append((node,) + _STATEMENTS[t])
        elif t in _EXPRESSIONS:
            found.append((node,) + _EXPRESSIONS[t])
        elif t is ast.With:
            bad = _with_ok(node)
            if bad:
                found.append((node, bad, "NKI's only `with` form is an argument-less call of an NKI context "
                              "manager, e.g. `with nl.no_reorder():`"))
    found.sort(key=lambda f: (getattr(f[0], "lineno", 0), getattr(f[0], "col_offset", 0)))
    _cache[key] = (src.node, found)
    return found


def check(sources: list[FuncSource]) -> None:
    for src in sources:
        found = violations(src)
        if found:
            node, what, alternative = found[0]
            raise _reject(src, node, what, alternative)
