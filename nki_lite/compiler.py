"""nki_lite.compiler (legacy `neuronxcc.nki.compiler`): allocation and scheduling APIs.

Contract: every API is accepted so legacy kernels run unchanged. nki_lite allocates on-chip memory
itself (the capacity check models automatic allocation), so:
- `sbuf.mod_alloc(...)`, `sbuf.alloc(func)`, `sbuf.auto_alloc()` (and the `psum` ones) passed as
  `buffer=` mean "SBUF" / "PSUM". For the direct ones (alloc / mod_alloc) `Allocator.place` computes
  every logical block's physical tile (core/placement.py) when the tensor is declared: a malformed
  allocator is NL-E909, a tile past the SBUF partition bytes / PSUM banks NL-E506, at the line.
  Overlap of live tiles (NL-E505) is not checked yet.
- `skip_middle_end_transformations`, `enable_stack_allocator`, `force_auto_alloc` are identity
  decorators; `no_reorder()` and `allocation_scope()` are no-op context managers (nki_lite never
  reorders); `multi_buffer(n)` is ignored.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .lang.memory import ALLOCATOR_RESOLVERS as _ALLOCATOR_RESOLVERS
from .lang.memory import psum as _psum_space
from .lang.memory import sbuf as _sbuf_space


@dataclass
class Allocator:
    """What sbuf.mod_alloc(...) etc. return; resolves to its memory space when passed as buffer=."""
    space: object
    kind: str
    options: dict = field(default_factory=dict)

    def __call__(self, *args, **kwargs):   # alloc(func) style allocators are called with indices
        return self

    def place(self, dims: tuple, par_axis: int, itemsize: int, hw, loc) -> dict:
        """{block index: PhysTile} of a tensor of shape `dims` declared with this allocator (NL-E909 /
        NL-E506 at `loc`); {} for auto_alloc."""
        if not self.direct:
            return {}
        from . import errors
        from .core import placement
        psum = self.space is _psum_space
        fdim = itemsize
        for s in dims[par_axis + 1:]:
            fdim *= s
        try:
            if self.options.get("_positional"):
                raise placement.MalformedAllocation(
                    f"{self.kind} got unexpected arguments {self.options['_positional']!r} (mod_alloc takes "
                    "keywords only; alloc takes one function)")
            return placement.place(self.kind, psum, self.options, tuple(dims[:par_axis]), dims[par_axis], fdim,
                                   pmax=hw.partitions, capacity=hw.sbuf_partition_bytes, banks=hw.psum_banks,
                                   bank_bytes=hw.psum_bank_bytes)
        except placement.MalformedAllocation as e:
            raise errors.make("malformed_allocation", f"{self.space!r}.{self.kind}: {e}", loc=loc) from None
        except placement.PastCapacity as e:
            raise errors.make("allocation_capacity", f"on {hw.name}: {e}", loc=loc) from None

    @property
    def direct(self) -> bool:
        """The kernel places the tiles itself (alloc / mod_alloc): capacity overflows are errors."""
        return self.kind != "auto_alloc"


class _Memory:
    def __init__(self, space):
        self._space = space

    def mod_alloc(self, *args, **kwargs) -> Allocator:
        return Allocator(self._space, "mod_alloc", {**kwargs, **({"_positional": args} if args else {})})

    def alloc(self, func=None, *args, **kwargs) -> Allocator:
        extra = args + tuple(kwargs)
        return Allocator(self._space, "alloc", {"func": func, **({"_positional": extra} if extra else {})})

    def auto_alloc(self, *args, **kwargs) -> Allocator:
        return Allocator(self._space, "auto_alloc", dict(kwargs))


sbuf = _Memory(_sbuf_space)
psum = _Memory(_psum_space)


def _resolve(obj):
    return obj.space if isinstance(obj, Allocator) else None


_ALLOCATOR_RESOLVERS.append(_resolve)


def _identity_decorator(func=None, *args, **kwargs):
    if callable(func):
        return func
    return lambda f: f


skip_middle_end_transformations = _identity_decorator
enable_stack_allocator = _identity_decorator
force_auto_alloc = _identity_decorator


@contextlib.contextmanager
def no_reorder():
    yield


@contextlib.contextmanager
def allocation_scope():
    yield


def multi_buffer(factor: int):
    return None
