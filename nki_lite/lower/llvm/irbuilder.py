"""A small text builder for LLVM IR functions: SSA names, basic blocks, counted loops, constants.

Contract: `FnBuilder` accumulates the body of one function as text. `op(text)` emits
`%tN = text` and returns `%tN`; `loop(count)` is a context manager yielding the i64 induction
variable of a `for (i = 0; i < count; i++)` loop whose body is the `with` block; `block()` /
`br()` / `cond_br()` manage blocks and always track the current block (needed by phis).
`f32(x)` / `i64(x)` format constants exactly (floats as the hex double of their float32 value).
"""
from __future__ import annotations

import contextlib
import struct

import numpy as np


def f32(x: float) -> str:
    """An exactly representable float constant in LLVM's hex-double form."""
    v = np.float32(x)
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def f32_bits(bits: int) -> str:
    """A float constant from its IEEE bit pattern (NaNs included)."""
    v = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    if np.isnan(v):
        # LLVM writes float NaNs as the double whose bits widen the float's exactly
        sign = (bits >> 31) & 1
        mant = bits & 0x7FFFFF
        d = (sign << 63) | (0x7FF << 52) | (mant << 29)
        return "0x%016X" % d
    return f32(float(v))


def i64(x: int) -> str:
    return str(int(x))


class FnBuilder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.nb = 0
        self.block_name = "entry"
        self.lines.append("entry:")

    # ---- values
    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def op(self, text: str, hint: str = "t") -> str:
        r = self.tmp(hint)
        self.emit(f"{r} = {text}")
        return r

    # ---- blocks
    def new_label(self, hint: str = "b") -> str:
        self.nb += 1
        return f"{hint}{self.nb}"

    def block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block_name = label

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")

    def cond_br(self, cond: str, then: str, other: str) -> None:
        self.emit(f"br i1 {cond}, label %{then}, label %{other}")

    @contextlib.contextmanager
    def loop(self, count: str | int, hint: str = "L"):
        """for (i = 0; i < count; ++i) { body }  — yields the i64 SSA name of i."""
        head, body, done = self.new_label(hint + "h"), self.new_label(hint + "b"), self.new_label(hint + "x")
        pre = self.block_name
        self.br(head)
        self.block(head)
        i = self.tmp("i")
        nxt = self.tmp("inext")
        phi_index = len(self.lines)
        self.lines.append("")  # placeholder for the phi (needs the latch label)
        c = self.op(f"icmp slt i64 {i}, {count}", "c")
        self.cond_br(c, body, done)
        self.block(body)
        yield i
        self.emit(f"{nxt} = add nsw i64 {i}, 1")
        latch = self.block_name
        self.br(head)
        self.lines[phi_index] = f"  {i} = phi i64 [ 0, %{pre} ], [ {nxt}, %{latch} ]"
        self.block(done)

    @contextlib.contextmanager
    def while_(self, cond_fn, hint: str = "W"):
        """while (cond_fn()) { body } — cond_fn emits the test (re-evaluated before each iteration)."""
        head, body, done = self.new_label(hint + "h"), self.new_label(hint + "b"), self.new_label(hint + "x")
        self.br(head)
        self.block(head)
        self.cond_br(cond_fn(), body, done)
        self.block(body)
        yield
        self.br(head)
        self.block(done)

    @contextlib.contextmanager
    def if_(self, cond: str, hint: str = "if"):
        then, done = self.new_label(hint + "t"), self.new_label(hint + "d")
        self.cond_br(cond, then, done)
        self.block(then)
        yield
        self.br(done)
        self.block(done)

    def text(self) -> str:
        return "\n".join(self.lines)
