"""nki.isa.register_alloc / register_move / register_load / register_store and nki.language.dynamic_range /
fori_loop / while_loop of the current dialect.

Contract: the reference's signatures (nki/api/nki/isa, nki/api/nki/language), forwarded to
lang/registers.py, which traces registers as one-element int32 buffers and dynamic loops as
`ir.Loop(kind="dynamic")` with a run-time trip count.
"""
from __future__ import annotations

from ..lang import registers as _r
from ..lang.registers import VirtualRegister  # noqa: F401  (nki.isa.VirtualRegister)


def register_alloc(x=None):
    return _r.register_alloc(x)


def register_move(dst, src):
    return _r.register_move(dst, src)


def register_load(dst, src):
    return _r.register_load(dst, src)


def register_store(dst, src):
    return _r.register_store(dst, src)


def dynamic_range(start, stop=None, step=1):
    return _r.dynamic_range(start, stop, step)


def fori_loop(lower, upper, body_fun, step=1):
    return _r.fori_loop(lower, upper, body_fun, step)


def while_loop(init, body_fun):
    return _r.while_loop(init, body_fun)
