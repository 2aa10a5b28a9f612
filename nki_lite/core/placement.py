"""Direct allocation: where the nki.compiler allocators put each logical tile of an on-chip tensor.

Contract (pure functions of integers; no tracing, no errors module): a tensor declared with
`buffer=ncc.sbuf.mod_alloc(...)` / `ncc.sbuf.alloc(func)` / the psum ones has logical blocks (the
dimensions before its partition dimension); each block is placed at one physical tile:
- SBUF: (start_partition, byte_addr) per block, `pdim_size` partitions x `fdim_size` bytes;
- PSUM: (bank, start_partition, byte_addr) per block, within one 2 KiB bank.
`mod_alloc` is the documented modulo scheme: along every block dimension d the index is taken
modulo the tile count of that dimension, the resulting index linearised over the tile-count
shape, times the tile size, plus the base (legacy nki.compiler.sbuf.mod_alloc docs). An empty
tile-count tuple means one physical tile per dimension, so every logical block shares it (the
rotation is legal reuse, not overlap). `alloc(func)` calls `func(idx, pdim_size, fdim_size)`.
`place` returns the distinct physical ranges; a malformed allocator raises `MalformedAllocation`
(the frontend reports NL-E909), a range past the capacity `PastCapacity` (NL-E506).
"""
from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass


class MalformedAllocation(ValueError):
    """The allocator call or its function's result breaks the documented form."""


class PastCapacity(ValueError):
    """A physical tile reaches beyond the target's SBUF partition bytes or PSUM banks."""


@dataclass(frozen=True)
class PhysTile:
    bank: int            # -1 for SBUF
    partition: int       # start partition
    addr: int            # byte offset in the partition (PSUM: in the bank)
    pdim: int
    nbytes: int          # bytes per partition

    @property
    def end(self) -> int:
        return self.addr + self.nbytes


def _linear(idx: tuple, shape: tuple) -> int:
    """The reference's `linearize`: index d weighs the product of shape[d+1:] (over the whole shape,
    also when idx is shorter than it)."""
    out, weight = 0, 1
    for d in reversed(range(len(shape))):
        if d < len(idx):
            out += idx[d] * weight
        weight *= shape[d]
    return out


def _modulo(base: int, counts: tuple, idx: tuple, scale: int) -> int:
    """The documented `modulo_allocate_func`: indices and counts paired by `zip` (the shorter decides),
    so a count tuple longer or shorter than the block dimensions is the reference's behaviour, not an
    error (nki-samples' attention v9 passes num_free_tiles=(1,) for tensors without block dimensions)."""
    shape = counts if counts else (1,) * len(idx)
    return base + _linear(tuple(i % s for i, s in zip(idx, shape)), shape) * scale


def _counts(name: str, value) -> tuple:
    try:
        counts = tuple(int(v) for v in value)
    except TypeError:
        raise MalformedAllocation(f"{name}={value!r} must be a tuple of tile counts, e.g. (2,)") from None
    if any(c < 1 for c in counts):
        raise MalformedAllocation(f"{name}={value!r}: tile counts must be >= 1")
    return counts


def _int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise MalformedAllocation(f"{name}={value!r} must be an integer")
    v = int(value)
    if v < 0:
        raise MalformedAllocation(f"{name}={v} must not be negative")
    return v


def mod_alloc_func(psum: bool, options: dict):
    """The (idx, pdim, fdim) -> location function of mod_alloc(**options), validated."""
    known = {"base_addr", "base_partition", "num_par_tiles", "num_free_tiles"} | (
        {"base_bank", "num_bank_tiles"} if psum else set())
    extra = sorted(set(options) - known)
    if extra:
        raise MalformedAllocation(f"mod_alloc does not take {', '.join(extra)} (it takes {', '.join(sorted(known))})")
    if psum and "base_bank" not in options:
        raise MalformedAllocation("psum.mod_alloc needs base_bank=")
    if not psum and "base_addr" not in options:
        raise MalformedAllocation("sbuf.mod_alloc needs base_addr=")
    addr = _int("base_addr", options.get("base_addr", 0))
    part = _int("base_partition", options.get("base_partition", 0))
    bank = _int("base_bank", options.get("base_bank", 0))
    ptiles = _counts("num_par_tiles", options.get("num_par_tiles", ()))
    ftiles = _counts("num_free_tiles", options.get("num_free_tiles", ()))
    btiles = _counts("num_bank_tiles", options.get("num_bank_tiles", ()))

    def func(idx, pdim, fdim):
        loc = (_modulo(part, ptiles, idx, pdim), _modulo(addr, ftiles, idx, fdim))
        return (_modulo(bank, btiles, idx, 1),) + loc if psum else loc
    return func


def _check_partition(start: int, pdim: int, pmax: int) -> None:
    allowed = (0,) if pdim > 64 else (0, 64) if pdim > 32 else (0, 32, 64, 96)
    if start not in allowed or start + pdim > pmax:
        raise MalformedAllocation(f"start partition {start} is not allowed for a tile of {pdim} partitions "
                                  f"(allowed: {', '.join(map(str, allowed))})")


def _call_allocation_function(func, idx: tuple, pdim: int, fdim: int):
    """func(idx, pdim_size, fdim_size), by the documented parameter names when func accepts them (a
    `functools.partial(f, bank_map=...)` of `f(bank_map, idx, pdim_size, fdim_size)`, as nki-samples'
    allocated attention passes, binds only that way), else positionally."""
    kwargs = {"idx": idx, "pdim_size": pdim, "fdim_size": fdim}
    try:
        inspect.signature(func).bind(**kwargs)
    except (TypeError, ValueError):
        return func(idx, pdim, fdim)
    return func(**kwargs)


def _location(func, idx: tuple, pdim: int, fdim: int, psum: bool, pmax: int) -> PhysTile:
    try:
        got = _call_allocation_function(func, idx, pdim, fdim)
    except Exception as e:          # the kernel's own function failed: report it at the declaration
        raise MalformedAllocation(f"the allocation function raised {type(e).__name__}: {e} for block {idx}") from e
    want = 3 if psum else 2
    try:
        vals = tuple(_int("location", v) for v in got)
    except TypeError:
        vals = ()
    if len(vals) != want:
        form = "(bank, start_partition, byte_addr)" if psum else "(start_partition, byte_addr)"
        raise MalformedAllocation(f"the allocation function returned {got!r} for block {idx}; it must return {form}")
    bank, part, addr = vals if psum else (-1,) + vals
    _check_partition(part, pdim, pmax)
    return PhysTile(bank, part, addr, pdim, fdim)


def place(kind: str, psum: bool, options: dict, blocks: tuple, pdim: int, fdim: int, *, pmax: int,
          capacity: int, banks: int, bank_bytes: int, align: int = 4) -> dict:
    """{logical block index: PhysTile} for a tensor with block shape `blocks`, checked against the target."""
    if kind == "mod_alloc":
        func = mod_alloc_func(psum, options)
    else:
        func = options.get("func")
        if not callable(func):
            raise MalformedAllocation(f"alloc() needs a function (idx, pdim_size, fdim_size) -> location, got {func!r}")
    out = {}
    for idx in itertools.product(*(range(b) for b in blocks)):
        p = _location(func, idx, pdim, fdim, psum, pmax)
        if psum:
            if p.addr != 0 or p.partition != 0:
                raise MalformedAllocation(f"PSUM block {idx} at partition {p.partition}, byte {p.addr}: a directly "
                                          "allocated PSUM tile starts at partition 0, byte 0 of its bank")
            if p.nbytes > bank_bytes:
                raise PastCapacity(f"PSUM block {idx} holds {p.nbytes} bytes per partition, more than one "
                                   f"{bank_bytes}-byte bank")
            if p.bank >= banks:
                raise PastCapacity(f"PSUM block {idx} is placed in bank {p.bank}, past the last bank ({banks - 1})")
        else:
            if p.addr % align:
                raise MalformedAllocation(f"SBUF block {idx} at byte {p.addr}: addresses are aligned to {align} bytes")
            if p.end > capacity:
                raise PastCapacity(f"SBUF block {idx} occupies bytes {p.addr}..{p.end} of each partition, past the "
                                   f"{capacity} bytes a partition has")
        out[idx] = p
    return out
