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
- Where the reference lists a parameter positionally that nki_lite's legacy form takes by keyword only
  (`dtype` of the math functions, `buffer` of zeros/ones/full, `keepdims` of reductions), the function
  here also takes it by position (one adapter, `_positional`).
- `nl.shared_identity_matrix(n, dtype, dst=None)` is an SBUF tensor, as the reference says (the legacy one is
  an HBM constant): the constant loaded into `dst` or a new SBUF tensor.
- Every other name of the reference (reference.py) is a NotBuilt stub: NL-E913 when used.
"""
from __future__ import annotations

import contextlib
import functools
import inspect

from .. import language as _legacy
from ..language import *  # noqa: F401,F403
from ..language import bool_, psum, private_hbm, sbuf, shared_hbm  # noqa: F401
from . import _bridge
from .reference import REFERENCE
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


# The reference's keyword names where nki_lite's legacy spelling differs. The loops have Python semantics
# (nki/get-started/about: the range helpers "are deprecated and behave as aliases of range()"): a loop
# variable used as a Python value traces that loop unrolled (lang/ranges.py `python_loop`).
@_instruction("nki.language.affine_range")
def affine_range(start, stop=None, step=1):
    return _legacy.affine_range(*_range_args(start, stop, step)).python_loop()


@_instruction("nki.language.sequential_range")
def sequential_range(start, stop=None, step=1):
    return _legacy.sequential_range(*_range_args(start, stop, step)).python_loop()


@_instruction("nki.language.static_range")
def static_range(start, stop=None, step=1):
    return _legacy.static_range(*_range_args(start, stop, step))


# `nl.range`: not in the API reference, but the NKI Library's mxfp_load loops over it; as the other helpers
# it is an alias of range() (a loop with Python semantics, as affine_range).
@_instruction("nki.language.range")
def range(start, stop=None, step=1):   # noqa: A001 - the dialect's name
    return _legacy.affine_range(*_range_args(start, stop, step)).python_loop()


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


@_instruction("nki.language.shared_identity_matrix")
def shared_identity_matrix(n, dtype=_legacy.uint8, dst=None):
    """The current dialect's identity is "an identity matrix in SBUF" (the legacy one is an HBM constant
    that kernels load): the constant loaded once into `dst` or a new SBUF tensor."""
    const = _legacy.shared_identity_matrix(n, dtype=dtype)
    if dst is None:
        dst = _legacy.ndarray(const.shape, const.dtype, buffer=sbuf)
    dst[...] = _legacy.load(const)
    return dst


@_instruction("nki.language.device_print")
def device_print(print_prefix, tensor):
    return _legacy.device_print(print_prefix, tensor)


def _positional(short: str):
    """nki_lite.language's `short`, also taking positionally the parameters the reference lists positionally
    but nki_lite's legacy form has keyword-only (`nl.exp(x, nl.bfloat16)`, `nl.zeros(shape, dtype, nl.sbuf)`);
    None when nothing differs."""
    legacy = getattr(_legacy, short)
    ref = REFERENCE.get(f"nki.language.{short}", (None, ()))[1]
    sig = inspect.signature(legacy)
    params = list(sig.parameters.values())
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or list(ref[:len(pos)]) != pos:
        return None
    extra = [n for n in ref[len(pos):] if n in sig.parameters and sig.parameters[n].kind is inspect.Parameter.KEYWORD_ONLY]
    if not extra or list(ref[len(pos):len(pos) + len(extra)]) != extra:
        return None

    @functools.wraps(legacy)
    def call(*args, **kwargs):
        if len(args) > len(pos):
            names = extra[:len(args) - len(pos)]
            if len(args) - len(pos) <= len(extra) and not any(n in kwargs for n in names):
                kwargs.update(zip(names, args[len(pos):]))
                args = args[:len(pos)]
        return legacy(*args, **kwargs)      # anything still wrong is the legacy checker's NL-E906/E907
    by_name = {p.name: p for p in params}
    order = pos + extra
    call.__signature__ = sig.replace(parameters=[by_name[n].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                                 for n in order] + [p for p in params if p.name not in order])
    return call


for _name in [n.rsplit(".", 1)[1] for n in REFERENCE if n.startswith("nki.language.") and n.count(".") == 2]:
    if inspect.isfunction(globals().get(_name)) and globals()[_name] is getattr(_legacy, _name, None):
        _wrapped = _positional(_name)
        if _wrapped is not None:
            globals()[_name] = _wrapped

# exported by nki_lite.language but raising NL-E904 whatever the arguments: not built in this dialect either
for _name in ("power",):
    del globals()[_name]

from .isa_registers import dynamic_range, fori_loop, while_loop  # noqa: E402,F401  (issue #14)

NOT_BUILT = _fill(globals(), "nki.language")
