"""nisa.local_gather (legacy form): the GpSimd Engine's per-core gather of SBUF data.

Contract (NKI's documented semantics, api/nki/isa at aws-neuron-sdk 1db4d74e^): each of the eight
GpSimd cores owns 16 contiguous partitions. Core c flattens its 16-partition slice of `index`
partition-first (indices_1d[k] = index[16c + k % 16, k // 16], the index tile's free axes
flattened) and keeps the first `num_valid_indices` (default: all). Output partition p of core c
then holds, for each k, the `num_elem_per_idx` contiguous elements of src partition p starting at
element offset indices_1d[k] of its flattened free axes. Constraints (NKI): src and index have the
same partition count, a multiple of 16; index is uint16; num_elem_per_idx in {1, 2, 4, 8, 16, 32};
at most 4096 indices per core; no dtype conversion.

nki_lite's choices where NKI is silent: the result tile is [P, *index.shape[1:], 16, n] when every
index is valid (the layout of NKI's own example), else [P, num_valid_indices, n]; an offset past
the end of src's partition (undefined on hardware) is NL-E501 at the line, in both backends. A src
that is a view is copied to a fresh tile first, so the gather addresses whole tiles only.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from .api import isa
from .masks import to_mask
from .memory import new_buffer
from .ops_math import tile_operand
from .tile import Tile
from .tracer import attrs, current

CORE_PARTITIONS = 16
ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)


def _whole(tr, t: Tile, loc) -> Tile:
    if t.access == ir.Access.full(t.buf) and t.space == ir.Space.SBUF:
        return t
    buf = new_buffer(tr, t.shape, t.dtype_name, ir.Space.SBUF, t.name + "_g", loc)
    acc = ir.Access.full(buf)
    tr.emit(ir.Instr("tensor_copy", (acc,), (t.access,), attrs(engine="gpsimd"), None, loc))
    return Tile(tr, acc, t.dtype_name)


@isa("nisa.local_gather")
def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None) -> Tile:
    tr = current()
    loc = capture_loc(2)
    src = tile_operand(src_buffer, "src_buffer", "local_gather", loc)
    idx = tile_operand(index, "index", "local_gather", loc)
    P = src.shape[0]
    if idx.shape[0] != P or P % CORE_PARTITIONS:
        raise errors.make("shape_mismatch", f"local_gather: src_buffer {tuple(src.shape)} and index "
                          f"{tuple(idx.shape)} need the same partition count, a multiple of {CORE_PARTITIONS}",
                          loc=loc)
    if idx.dtype_name != "uint16":
        raise errors.make("dtype", f"local_gather: index must be uint16, got {idx.dtype_name}", loc=loc)
    n = int(num_elem_per_idx)
    if n not in ELEMS_PER_INDEX:
        raise errors.make("argument", f"local_gather: num_elem_per_idx={num_elem_per_idx} is not one of "
                          f"{ELEMS_PER_INDEX}", loc=loc)
    per_core = CORE_PARTITIONS * int(np.prod(idx.shape[1:]))
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    most = tr.hw.gather_max_indices
    if not 0 < valid <= min(per_core, most):
        raise errors.make("argument", f"local_gather: num_valid_indices={valid} must be in 1..{min(per_core, most)} "
                          f"(the index slice of a core holds {per_core} indices; at most {most})", loc=loc)
    shape = (P, *idx.shape[1:], CORE_PARTITIONS, n) if valid == per_core else (P, valid, n)
    src = _whole(tr, src, loc)
    out = ir.Access.full(new_buffer(tr, shape, src.dtype_name, ir.Space.SBUF, "gather", loc))
    tr.emit(ir.Instr("local_gather", (out,), (src.access, idx.access),
                     attrs(engine="gpsimd", num_elem_per_idx=n, num_valid=valid), to_mask(mask, shape, loc), loc))
    return Tile(tr, out, src.dtype_name)
