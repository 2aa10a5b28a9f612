"""Accesses, root buffers and flat (row-major linear) indexing: the storage questions every analysis asks.

Contract:
- `accesses(instr)` yields ('out', k, access) for every output, then ('in', k, access) for every
  Access input (scalar operands are skipped).
- `root_of(bufs, name)` is the buffer that owns the storage of `name`: a view (`base` set, e.g. a
  reshape of an HBM tensor) resolves through its bases to the root; a root is its own root. Chains
  are followed (bounded, so a malformed IR cannot loop). `root_name` is its name.
- `flat_index(shape, index)` is the row-major element offset of an access with per-dimension affine
  `index` into a buffer of `shape`: views share their root's storage in row-major order, so two
  accesses through different views of one root are compared on their flat offsets.
- `roots_with_views(kernel)` names the roots that some view aliases.
Pure functions of the IR; nothing raises.
"""
from __future__ import annotations

from typing import Iterator, Mapping, Sequence

from ...core.affine import Affine
from ...core.ir import Access, Buffer, Instr, Kernel

_MAX_VIEW_DEPTH = 64


def accesses(instr: Instr) -> Iterator[tuple[str, int, Access]]:
    for k, a in enumerate(instr.outs):
        yield "out", k, a
    for k, a in enumerate(instr.ins):
        if isinstance(a, Access):
            yield "in", k, a


def root_of(bufs: Mapping[str, Buffer], name: str) -> Buffer:
    b = bufs[name]
    seen = 0
    while b.base is not None and b.base in bufs and seen < _MAX_VIEW_DEPTH:
        b = bufs[b.base]
        seen += 1
    return b


def root_name(bufs: Mapping[str, Buffer], name: str) -> str:
    return root_of(bufs, name).name


def flat_index(shape: Sequence[int], index: Sequence[Affine]) -> Affine:
    off, stride = Affine(0), 1
    for d in reversed(range(len(shape))):
        off = off + index[d].scale(stride)
        stride *= shape[d]
    return off


def access_flat_index(bufs: Mapping[str, Buffer], acc: Access) -> Affine:
    """`flat_index` of an access over the shape of the buffer (or view) it names."""
    return flat_index(bufs[acc.buffer].shape, acc.index)


def roots_with_views(kernel: Kernel) -> set[str]:
    bufs = kernel.buffer_map
    return {root_name(bufs, b.name) for b in kernel.buffers if b.base is not None}
