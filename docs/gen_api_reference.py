"""Generate docs/api_reference.md from the docstrings of nki_lite's public namespaces.

    python docs/gen_api_reference.py > docs/api_reference.md

Contract: `render()` returns the whole page as a string, deterministic for a given source tree
(names sorted, object addresses scrubbed). Covered namespaces: `nki_lite`, `nki_lite.language`,
`nki_lite.isa`, `nki_lite.stdlib`, `nki_lite.testing`. A namespace's public names are its `__all__`
when it has one, else every attribute not starting with `_` except modules, `__future__` features
and modules' own imports of foreign helpers (`np`, `D`, ...); the top-level package's submodules
are listed separately, restricted to the documented ones (PUBLIC_SUBMODULES). Each name gets its
signature (when it has one) and its docstring; classes defined in nki_lite also list their public
methods and properties with the first line of each docstring. Names without a docstring say so,
and the page's header counts them. tests/test_api_reference.py keeps the committed page equal to
this output.
"""
from __future__ import annotations

import __future__
import inspect
import re
import sys
import textwrap
import types

import nki_lite
import nki_lite.isa
import nki_lite.language
import nki_lite.stdlib
import nki_lite.testing

NAMESPACES = [("nki_lite", "nki", nki_lite), ("nki_lite.language", "nl", nki_lite.language),
              ("nki_lite.isa", "nisa", nki_lite.isa), ("nki_lite.stdlib", "nki_lite.stdlib", nki_lite.stdlib),
              ("nki_lite.testing", "nki_lite.testing", nki_lite.testing)]
# the package's user-facing submodules (the rest are implementation layers, docs/architecture.md)
PUBLIC_SUBMODULES = ["compat", "compiler", "errors", "isa", "language", "stdlib", "testing", "typing"]
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def public_names(mod) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is not None:
        return sorted(names)
    out = []
    for n in dir(mod):
        if n.startswith("_"):
            continue
        obj = getattr(mod, n)
        if isinstance(obj, (types.ModuleType, __future__._Feature)):
            continue
        out.append(n)
    return sorted(out)


def _signature(obj) -> str | None:
    try:
        return _ADDRESS.sub("", str(inspect.signature(obj)))
    except (TypeError, ValueError):
        return None


def _own(obj) -> bool:
    """Defined in nki_lite (its docstring is ours to show), not re-exported from numpy/ml_dtypes."""
    return (getattr(obj, "__module__", None) or "").startswith("nki_lite")


def _doc(obj) -> str | None:
    d = obj.__doc__ if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) or \
        callable(obj) else None
    return inspect.cleandoc(d) if d else None


def _members(cls) -> list[str]:
    lines = []
    for n, v in sorted(vars(cls).items()):
        if n.startswith("_"):
            continue
        if isinstance(v, property):
            first = (inspect.cleandoc(v.__doc__).splitlines()[0] if v.__doc__ else "(no docstring)")
            lines.append(f"- `.{n}` (property): {first}")
        elif callable(v):
            fn = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
            sig = _signature(fn) or "(...)"
            sig = re.sub(r"^\(self,? ?", "(", sig)
            first = inspect.cleandoc(fn.__doc__).splitlines()[0] if fn.__doc__ else "(no docstring)"
            lines.append(f"- `.{n}{sig}`: {first}")
        else:
            lines.append(f"- `.{n}` = `{_ADDRESS.sub('', repr(v))}`")
    return lines


def entry(prefix: str, name: str, obj) -> tuple[list[str], bool]:
    """Markdown for one public name, and whether it lacks a docstring of its own."""
    title = f"{prefix}.{name}"
    if isinstance(obj, type) and _own(obj):
        sig = _signature(obj)
        out = [f"### `{title}`" + (f" — class `{sig}`" if sig and sig != "()" else " — class"), ""]
        doc = _doc(obj)
        out += [doc if doc else "(no docstring)", ""]
        members = _members(obj)
        if members:
            out += members + [""]
        return out, doc is None
    if callable(obj) and not isinstance(obj, type) and (_own(obj) or isinstance(obj, types.FunctionType)):
        sig = _signature(obj) or "(...)"
        doc = _doc(obj)
        return [f"### `{title}{sig}`", "", doc if doc else "(no docstring)", ""], doc is None
    # constants, dtypes, re-exported foreign types and objects: their value
    kind = type(obj).__name__
    value = _ADDRESS.sub("", repr(obj))
    return [f"### `{title}`", "", f"`{value}` ({kind})", ""], False


def render() -> str:
    body, missing, total = [], [], 0
    for modname, prefix, mod in NAMESPACES:
        names = public_names(mod)
        body += [f"## `{modname}` (`{prefix}`)", ""]
        mdoc = inspect.cleandoc(mod.__doc__).splitlines()[0] if mod.__doc__ else ""
        if mdoc:
            body += [mdoc, ""]
        if mod is nki_lite:
            body += ["Submodules: " + ", ".join(f"`nki_lite.{m}`" for m in PUBLIC_SUBMODULES), ""]
        for n in names:
            lines, undocumented = entry(prefix, n, getattr(mod, n))
            body += lines
            total += 1
            if undocumented:
                missing.append(f"{prefix}.{n}")
    head = ["# API reference", "",
            "Generated from the docstrings by `python docs/gen_api_reference.py > docs/api_reference.md`; "
            "tests/test_api_reference.py checks it is current. Every public name of nki_lite, "
            "nki_lite.language (nl), nki_lite.isa (nisa), nki_lite.stdlib and nki_lite.testing, with its "
            "signature and docstring. Tutorials: tutorials/README.md; concepts: docs/concepts.md.", "",
            f"{total} names; {len(missing)} without a docstring of their own"
            + (": " + ", ".join(f"`{m}`" for m in missing) if missing else "") + ".", ""]
    return "\n".join(head + body).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
