"""Type checks of instruction arguments, with one message shape for every API.

`expect(x, cls, api, what, expected, loc)` returns `x` when it is an instance of `cls`, and otherwise raises
the NKI error `code` (default "argument") at the user's line: "<api>: <what> must be <expected>, got <type>".
One helper, so every instruction words the mistake the same way and names the same things.
"""
from __future__ import annotations

from .. import errors


def expect(x, cls, api: str, what: str, expected: str, loc, code: str = "argument"):
    if not isinstance(x, cls):
        raise errors.make(code, f"{api}: {what} must be {expected}, got {type(x).__name__}", loc=loc)
    return x
