"""`FILE::KERNEL` references: load a kernel from a Python file by name.

Contract:
- `parse_ref("path/k.py::name")` -> (path, name); a missing `::`, empty part, or missing file is
  NL-E908 naming what was given.
- `dialect(path)` reads the file's imports without running it: "legacy" (`neuronxcc.nki`, resolved
  through nki_lite.compat), "nki_lite" (`import nki_lite`), "current" (only `import nki` / `from
  nki...`: NKI's current dialect, nki_lite/nki) or "none". A file that imports both dialects counts
  as legacy (the `nki` import may be a try/except fallback).
- `load_kernel(ref)` installs both dialects' aliases (nki_lite.compat), imports the file as a fresh
  module (its directory on sys.path while it loads, as `python file.py` would) and returns the named
  object as an nki_lite Kernel (a plain function is wrapped with nki_lite.jit; an @autotune kernel
  stays one; a current-dialect `@nki.jit` kernel is its one-core launch). A part of `nki` that
  nki_lite does not provide is NL-E904 at the import line; an unknown name is NL-E908 listing the
  kernels the file defines.
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import sys
from types import ModuleType

from .. import errors
from ..loc import Loc

_COUNTER = itertools.count()


def parse_ref(ref: str) -> tuple[str, str]:
    path, sep, name = ref.rpartition("::")
    if not sep or not path or not name:
        raise errors.make("kernel_reference", f"{ref!r} is not FILE::KERNEL",
                          hint="name the file and the kernel, e.g. kernels/add.py::add_kernel")
    if not os.path.isfile(path):
        raise errors.make("kernel_reference", f"{path!r} is not a file (from {ref!r})")
    return path, name


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module, node.lineno))
    return out


def dialect(path: str) -> tuple[str, int]:
    """(dialect, line of the deciding import; 0 when none)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = {"legacy": 0, "nki_lite": 0, "current": 0}
    for mod, line in _imports(tree):
        top = mod.split(".")[0]
        kind = {"neuronxcc": "legacy", "nki_lite": "nki_lite", "nki": "current"}.get(top)
        if kind and not found[kind]:
            found[kind] = line
    # a file that also imports the legacy dialect may import `nki` only as a fallback (try/except):
    # it runs, and load_module names the missing part if the `nki` import is what fails
    for kind in ("legacy", "nki_lite", "current"):
        if found[kind]:
            return kind, found[kind]
    return "none", 0


def _current_dialect(path: str, line: int) -> errors.NkiLiteError:
    return errors.make("unsupported", f"{path} imports a part of NKI's current dialect (`nki`) that "
                       "nki_lite does not provide", loc=Loc(os.path.abspath(path), line, 0, 0),
                       hint="docs/compat_nki.md lists what the nki dialect supports")


def load_module(path: str) -> ModuleType:
    from .. import compat
    compat.install()
    name = f"_nki_lite_file_{next(_COUNTER)}_{os.path.splitext(os.path.basename(path))[0]}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise errors.make("kernel_reference", f"{path!r} cannot be imported as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod                 # dataclasses / pickling look their module up by name
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(mod)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] == "nki":
            raise _current_dialect(path, _import_line(path)) from None
        raise
    finally:
        sys.path.pop(0)
    return mod


def _import_line(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return next((line for mod, line in _imports(tree) if mod.split(".")[0] == "nki"), 0)


def kernels_in(mod: ModuleType) -> list[str]:
    from ..nki.launch import Kernel as CurrentKernel
    from ..runtime.kernel import Kernel
    from ..tuning import Autotuned
    return sorted(n for n, v in vars(mod).items() if isinstance(v, (Kernel, Autotuned, CurrentKernel)))


def load_kernel(ref: str):
    from ..nki.launch import Kernel as CurrentKernel
    from ..runtime.kernel import Kernel, jit
    from ..tuning import Autotuned
    path, name = parse_ref(ref)
    mod = load_module(path)
    obj = getattr(mod, name, None)
    if isinstance(obj, CurrentKernel):
        return obj._launch()                 # kernel[1]: the one-core launch, an nki_lite Kernel
    if isinstance(obj, (Kernel, Autotuned)):
        return obj
    if callable(obj) and not isinstance(obj, type):
        return jit(obj)
    have = ", ".join(kernels_in(mod)) or "none"
    raise errors.make("kernel_reference", f"{path} has no kernel named {name!r} (kernels there: {have})")
