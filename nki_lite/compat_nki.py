"""Import shims for the current dialect: make `import nki` (and its submodules) resolve to nki_lite.nki.

    import nki_lite.compat
    nki_lite.compat.install(dialect="nki")   # or install(): both dialects
    import nki, nki.language as nl, nki.isa as nisa, nki.typing as nt   # -> nki_lite.nki...

Contract: `install()` registers `nki`, `nki.language`, `nki.isa`, `nki.typing`, `nki.simulator`,
`nki.collectives`, `nki.isa.constants` in sys.modules only when the real `nki` package is neither imported nor
importable (an installed AWS package always wins), is idempotent, and returns the names it added;
`uninstall()` removes exactly those.
"""
from __future__ import annotations

import importlib.util
import sys

_ADDED: list[str] = []
SUBMODULES = ("language", "isa", "typing", "simulator", "collectives")


def real_nki_present() -> bool:
    if "nki" in sys.modules:
        return not getattr(sys.modules["nki"], "__name__", "").startswith("nki_lite")
    try:
        return importlib.util.find_spec("nki") is not None
    except (ImportError, ValueError):
        return False


def install() -> list[str]:
    if real_nki_present():
        return list(_ADDED)
    import nki_lite.nki as root
    mods = {"nki": root, **{f"nki.{s}": getattr(root, s) for s in SUBMODULES}, "nki.isa.constants": root.isa.constants}
    for name, mod in mods.items():
        if name not in sys.modules:
            sys.modules[name] = mod
            _ADDED.append(name)
    return list(_ADDED)


def uninstall() -> None:
    while _ADDED:
        sys.modules.pop(_ADDED.pop(), None)
