"""Declaring the `nki` dialect's surface: built APIs with checked signatures, and not-built stubs.

Contract:
- `@instruction("nki.isa.tensor_tensor", partial={"param": "what is missing"})` wraps a dst-first
  wrapper: a call is bound against the wrapper's own signature (the reference's parameter list) before
  the body runs; an unknown keyword is NL-E906 (with a did-you-mean hint), a wrong number of
  positional arguments or a missing / doubled argument is NL-E907, both at the kernel's line. The
  wrapper's `__nki_partial__` records the documented parameters whose non-default values are not built
  (the body raises NL-E916 for them through `not_built_argument`); docs/compat_nki.md shows them.
- `NotBuilt(name)` stands for a reference name nki_lite has not built: importing it works (kernels
  import names they never call), calling it, or reading an attribute of it, raises NL-E913 naming
  the API. `fill(namespace, module)` adds a NotBuilt for every name of `module` in the committed
  reference (reference.py) that the namespace does not define, so no reference name is ever an
  AttributeError.
"""
from __future__ import annotations

import difflib
import functools
import inspect

from .. import errors
from ..loc import capture_loc
from .reference import REFERENCE


def _bind(sig: inspect.Signature, name: str, args, kwargs):
    try:
        return sig.bind(*args, **kwargs)
    except TypeError as e:
        text = str(e)
        if "unexpected keyword argument" in text:
            bad = text.rsplit("'", 2)[-2] if text.count("'") >= 2 else "?"
            known = [p for p in sig.parameters]
            close = difflib.get_close_matches(bad, known, n=1)
            raise errors.make("unknown_keyword", f"{name}() got an unexpected keyword argument {bad}=",
                              loc=capture_loc(), hint=(f"did you mean {close[0]}=? " if close else "") +
                              f"{name} takes: {', '.join(known)}") from None
        raise errors.make("call_signature", f"{name}{sig}: {text}", loc=capture_loc()) from None


def instruction(name: str, partial: dict | None = None):
    """Declare a built API of the dialect (see the module contract)."""
    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            _bind(sig, name, args, kwargs)
            return fn(*args, **kwargs)
        call.__nki_name__ = name
        call.__nki_partial__ = dict(partial or {})
        return call
    return wrap


def not_built_argument(api: str, what: str) -> errors.NkiLiteError:
    return errors.make("nki_argument_not_built", f"{api}: {what} is not built in nki_lite yet", loc=capture_loc())


class NotBuilt:
    """A reference name that nki_lite does not build yet (see the module contract)."""

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def _error(self) -> errors.NkiLiteError:
        return errors.make("nki_not_built", f"{self._name} is not built in nki_lite yet", loc=capture_loc())

    def __call__(self, *args, **kwargs):
        raise self._error()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self._error()

    def __repr__(self) -> str:
        return f"<{self._name}: not built in nki_lite (NL-E913)>"


def is_not_built(obj) -> bool:
    return isinstance(obj, NotBuilt)


def fill(namespace: dict, module: str) -> list[str]:
    """Add a NotBuilt stub for each reference name of `module` missing from `namespace`; return them."""
    added = []
    prefix = module + "."
    for full in REFERENCE:
        if not full.startswith(prefix):
            continue
        short = full[len(prefix):]
        if "." in short or short in namespace:
            continue
        namespace[short] = NotBuilt(full)
        added.append(short)
    return sorted(added)
