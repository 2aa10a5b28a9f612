"""nki.language (nl) of the current `nki` dialect: nki_lite.language plus the new dialect's names.

Contract:
- Every name of nki_lite.language is re-exported unchanged (the value-returning nl functions are the
  same in both dialects: nl.load, nl.add, nl.exp, ... return tiles).
- New here: `NKIObject` (base of kernels' configuration classes: keyword arguments become
  attributes), `NkiTensor` (the type of a kernel's tensors and tiles, for isinstance), `MemoryRegion`
  (its members are the nl.sbuf / nl.psum / nl.private_hbm / nl.shared_hbm objects), the buffer
  predicates `is_hbm` / `is_on_chip` / `is_psum` / `is_sbuf`, `no_reorder()` (a no-op context: nki_lite
  keeps program order).
- `nl.ndarray(shape, dtype, buffer=nl.sbuf, name='', address=None)`: as nki_lite's, with the new
  dialect's default buffer; a PSUM tensor starts at zero so that nisa.nc_matmul's default
  `accumulate=None` ("first write overwrites, later writes accumulate", nki/migration) is an
  accumulation into zeros (docs/nki_dialect.md). `address=` is accepted and ignored, as nki_lite
  allocates automatically.
- Every other name of the reference (reference.py) is a NotBuilt stub: NL-E913 when used.
"""
from __future__ import annotations

import contextlib

from .. import language as _legacy
from ..language import *  # noqa: F401,F403
from ..language import bool_, psum, private_hbm, sbuf, shared_hbm  # noqa: F401
from . import _bridge
from .surface import fill as _fill, instruction as _instruction

# `from ... import *` skips nothing public of nki_lite.language that has no __all__; names starting
# with an underscore stay private.
NkiTensor = _bridge.Tile


class NKIObject:
    """Base class of NKI configuration objects: NKIObject(a=1) has the attribute a == 1."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class MemoryRegion:  # noqa: N801 - the reference's enum; its members are nki_lite's buffer objects
    sbuf = sbuf
    psum = psum
    private_hbm = private_hbm
    shared_hbm = shared_hbm


def _space(buffer) -> str:
    name = getattr(buffer, "name", buffer)
    return {"hbm": "private_hbm"}.get(str(name), str(name))


def is_hbm(buffer) -> bool:
    return _space(buffer) in ("private_hbm", "shared_hbm")


def is_on_chip(buffer) -> bool:
    return _space(buffer) in ("sbuf", "psum")


def is_psum(buffer) -> bool:
    return _space(buffer) == "psum"


def is_sbuf(buffer) -> bool:
    return _space(buffer) == "sbuf"


@contextlib.contextmanager
def no_reorder():
    yield


@_instruction("nki.language.ndarray")
def ndarray(shape, dtype, buffer=sbuf, name="", address=None):
    t = _legacy.ndarray(shape, dtype, buffer=buffer, name=name)
    if is_psum(buffer):
        t[...] = 0        # accumulate=None matmuls accumulate into zeros (see the module contract)
    return t


# The reference's keyword names where nki_lite's legacy spelling differs (same behaviour otherwise).
@_instruction("nki.language.affine_range")
def affine_range(start, stop=None, step=1):
    return _legacy.affine_range(*_range_args(start, stop, step))


@_instruction("nki.language.sequential_range")
def sequential_range(start, stop=None, step=1):
    return _legacy.sequential_range(*_range_args(start, stop, step))


@_instruction("nki.language.static_range")
def static_range(start, stop=None, step=1):
    return _legacy.static_range(*_range_args(start, stop, step))


def _range_args(start, stop, step) -> tuple:
    return (start,) if stop is None and step == 1 else ((0 if stop is None else start), (start if stop is None
                                                                                           else stop), step)


@_instruction("nki.language.broadcast_to")
def broadcast_to(x, shape, dtype=None):
    out = _legacy.broadcast_to(x, shape)
    return out if dtype is None else _legacy.copy(out, dtype=dtype)


@_instruction("nki.language.zeros_like")
def zeros_like(x, dtype=None, buffer=None, name=""):
    return _legacy.zeros_like(x, dtype, buffer=buffer, name=name)


@_instruction("nki.language.empty_like")
def empty_like(x, dtype=None, buffer=None, name=""):
    return _legacy.empty_like(x, dtype, buffer=buffer, name=name)


@_instruction("nki.language.device_print")
def device_print(print_prefix, tensor):
    return _legacy.device_print(print_prefix, tensor)


# exported by nki_lite.language but raising NL-E904 whatever the arguments: not built in this dialect either
for _name in ("power",):
    del globals()[_name]

NOT_BUILT = _fill(globals(), "nki.language")
