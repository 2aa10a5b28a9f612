"""Source locations: where in the user's kernel an instruction or error comes from.

Contract: `Loc` is immutable and hashable; `capture_loc()` returns the location of the innermost
stack frame that is not inside the nki_lite package (the user's call site), with the column taken
from CPython's position table so error carets point at the exact expression.
"""
from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True, order=True)
class Loc:
    file: str
    line: int
    col: int = 0
    end_col: int = 0  # exclusive; 0 = unknown (caret of width 1)

    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")


UNKNOWN_LOC = Loc("<unknown>", 0, 0)


_STDLIB_DIR = _PKG_DIR + "stdlib" + os.sep


_INTERNAL: dict[str, bool] = {}     # absolute file name -> _is_internal (loc capture runs per op)


def _is_internal(filename: str) -> bool:
    """Frames of nki_lite itself (kernels in nki_lite/stdlib are user-level code)."""
    hit = _INTERNAL.get(filename)
    if hit is not None:
        return hit
    path = os.path.abspath(filename)
    out = path.startswith(_PKG_DIR) and not path.startswith(_STDLIB_DIR)
    if os.path.isabs(filename):       # a relative name's meaning follows the working directory
        _INTERNAL[filename] = out
    return out


# code object -> its position table: loc capture runs once per traced op, and skipping to the
# current instruction in a fresh co_positions() iterator costs time proportional to the function's
# length. Bounded (cleared when full) so that code objects are not kept alive without limit.
_POSITIONS: dict = {}
_POSITIONS_MAX = 256


def _positions(code) -> list:
    table = _POSITIONS.get(code)
    if table is None:
        if len(_POSITIONS) >= _POSITIONS_MAX:
            _POSITIONS.clear()
        table = _POSITIONS[code] = list(code.co_positions())
    return table


def frame_loc(frame) -> Loc:
    code = frame.f_code
    line, col, end_col = frame.f_lineno, 0, 0
    try:
        pos = _positions(code)[frame.f_lasti // 2]
        if pos[0] is not None:
            line = pos[0]
            col = pos[2] or 0
            end_col = pos[3] or 0 if pos[1] == pos[0] else 0
    except (StopIteration, IndexError, AttributeError):
        pass
    return Loc(code.co_filename, line, col, end_col)


def capture_loc(skip: int = 1) -> Loc:
    """Location of the first frame outside nki_lite, walking outward from our caller.

    `skip` only says where to start looking; internal frames are always skipped, so a value that
    is too small is harmless."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return UNKNOWN_LOC
    return frame_loc(frame)


_ASSIGN_TARGET = None


def assigned_name(loc: Loc) -> str | None:
    """`x` when the source line at `loc` reads `x = ...` or `x: T = ...` (used to name buffers)."""
    global _ASSIGN_TARGET
    if _ASSIGN_TARGET is None:
        import re
        _ASSIGN_TARGET = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]+)?=(?!=)")
    m = _ASSIGN_TARGET.match(loc.source_line()) if loc.line > 0 else None
    return m.group(1) if m else None
