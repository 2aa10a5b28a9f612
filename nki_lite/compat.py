"""Legacy import shims: make `neuronxcc.nki` (and friends) resolve to nki_lite.

    import nki_lite.compat
    nki_lite.compat.install()
    from neuronxcc import nki              # -> nki_lite
    import neuronxcc.nki.language as nl    # -> nki_lite.language

Contract: `install()` registers module aliases in sys.modules (idempotent) and returns the alias
names; `uninstall()` removes exactly what install() added. `install(dialect="nki")` installs the
current dialect's `import nki` (compat_nki.py), `install()` both, `install(dialect="legacy")` the
legacy one. Nothing is patched in nki_lite itself.
"""
from __future__ import annotations

import sys
import types

_ADDED: list[str] = []


def _aliases() -> dict[str, types.ModuleType]:
    import nki_lite
    from nki_lite import compiler, compiler_backends, isa, language, typing
    root = types.ModuleType("neuronxcc")
    root.__doc__ = "nki_lite compatibility alias of the Neuron compiler package (only .nki is provided)"
    root.nki = nki_lite
    return {"neuronxcc": root, "neuronxcc.nki": nki_lite, "neuronxcc.nki.language": language,
            "neuronxcc.nki.isa": isa, "neuronxcc.nki.typing": typing, "neuronxcc.nki.compiler": compiler,
            **compiler_backends.modules()}


def install(dialect: str | None = None) -> list[str]:
    if dialect not in (None, "legacy", "nki"):
        from .errors import make
        raise make("argument", f"compat.install(dialect={dialect!r}): use 'legacy' (neuronxcc.nki), 'nki' or "
                   "None (both)")
    if dialect == "nki":
        from . import compat_nki
        return compat_nki.install()
    for name, mod in _aliases().items():
        if name not in sys.modules:
            sys.modules[name] = mod
            _ADDED.append(name)
    import nki_lite
    nki_lite.compiler = sys.modules["neuronxcc.nki.compiler"]
    if dialect is None:
        from . import compat_nki
        return list(_ADDED) + compat_nki.install()
    return list(_ADDED)


def uninstall() -> None:
    from . import compat_nki
    compat_nki.uninstall()
    while _ADDED:
        sys.modules.pop(_ADDED.pop(), None)
