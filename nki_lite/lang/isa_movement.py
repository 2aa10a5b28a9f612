"""nisa data movement built from the IR's existing copies: dma_transpose and nc_stream_shuffle.

Contract (NKI's documented semantics, api/nki/isa at aws-neuron-sdk 1db4d74e^):
- `dma_transpose(src, *, axes=None, mask=None, dtype=None, dge_mode=None)`: a DMA that permutes the axes of `src`
  (HBM or SBUF) into a new SBUF tile; output axis i is source axis axes[i]. The permutations NKI
  supports are (1, 0), (2, 1, 0) and (3, 1, 2, 0), and the default is the one for src's rank.
  One `dma_copy` whose source access has its axis variables permuted (as nl.load_transpose2d), so
  every backend already runs it; the engine model sees one transposing DMA.
- `nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None)`: within each quadrant of 32
  partitions, dst partition i receives src partition shuffle_mask[i] of the same quadrant (255:
  partition i is left unmodified); the same mask serves every quadrant. src and dst have the same
  dtype and per-partition shape. Emitted as on-chip copies (Vector Engine): one per run of
  consecutive destination partitions reading consecutive source partitions, after a snapshot of
  src when src and dst share storage (an in-place shuffle reads the old values). `mask=` and
  affine-expression mask entries are not built (NL-E904). The engine model therefore charges the
  copies, not one shuffle instruction (docs/engine_model.md).
"""
from __future__ import annotations

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core.affine import Affine, axis_var
from .api import isa
from .masks import to_mask
from .memory import new_buffer, resolve_dtype
from .ops_math import tile_operand
from .tile import Tile
from .tracer import attrs, current

# NKI's supported permutations, by rank (the default when axes= is not given)
_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
QUADRANT = 32
KEEP = 255                       # shuffle_mask value: leave the destination partition unmodified


@isa("nisa.dma_transpose")
def dma_transpose(src, *, axes=None, mask=None, dtype=None, dge_mode=None) -> Tile:
    """dge_mode: a descriptor-generation hint, as for dma_copy (no effect here)."""
    tr = current()
    loc = capture_loc(2)
    if not isinstance(src, Tile) or src.space not in (ir.Space.HBM, ir.Space.SBUF):
        raise errors.make("memory_space", "nisa.dma_transpose src must be a tensor in HBM or a tile in SBUF, got "
                          f"{getattr(getattr(src, 'space', None), 'value', type(src).__name__)}", loc=loc)
    t = src
    rank = len(t.shape)
    if rank not in _DMA_TRANSPOSE_AXES:
        raise errors.make("rank", f"nisa.dma_transpose takes a 2-D, 3-D or 4-D tile, got shape {t.shape}", loc=loc)
    perm = _DMA_TRANSPOSE_AXES[rank] if axes is None else tuple(int(a) for a in axes)
    if perm != _DMA_TRANSPOSE_AXES[rank]:
        raise errors.make("argument", f"nisa.dma_transpose axes={perm} for a {rank}-D tile: NKI supports "
                          f"{_DMA_TRANSPOSE_AXES[rank]} (and (1, 0), (2, 1, 0), (3, 1, 2, 0) by rank)", loc=loc)
    # output axis i reads source axis perm[i]: substitute every source axis variable at once
    sub = {axis_var(perm[i]): Affine.var(axis_var(i)) for i in range(rank)}
    shape = tuple(t.shape[perm[i]] for i in range(rank))
    tsrc = ir.Access(t.access.buffer, tuple(e.subst(sub) for e in t.access.index), shape)
    dt = t.dtype_name if dtype is None else resolve_dtype(dtype, loc)
    out = ir.Access.full(new_buffer(tr, shape, dt, ir.Space.SBUF, t.name + "_T", loc))
    tr.emit(ir.Instr("dma_copy", (out,), (tsrc,), attrs(engine="dma", transpose=True),
                     to_mask(mask, out.shape, loc), loc))
    return Tile(tr, out, dt)


def _shuffle_mask(shuffle_mask, loc) -> list[int]:
    entries = list(shuffle_mask)
    if len(entries) != QUADRANT:
        raise errors.make("argument", f"nc_stream_shuffle shuffle_mask has {len(entries)} entries; it lists the "
                          f"source partition of each of the {QUADRANT} partitions of a quadrant", loc=loc)
    out = []
    for m in entries:
        if not isinstance(m, int) or isinstance(m, bool):
            raise errors.make("unsupported", f"nc_stream_shuffle shuffle_mask entry {m!r}: only integer entries "
                              "are built yet", loc=loc)
        if not (0 <= m < QUADRANT or m == KEEP):
            raise errors.make("argument", f"nc_stream_shuffle shuffle_mask entry {m} is not a partition of a "
                              f"quadrant (0..{QUADRANT - 1}) or {KEEP} (leave unmodified)", loc=loc)
        out.append(m)
    return out


def _runs(mask: list[int], n_dst: int, n_src: int, loc) -> list[tuple[int, int, int]]:
    """(dst_start, src_start, length) runs over every quadrant the destination touches."""
    runs: list[tuple[int, int, int]] = []
    for p in range(n_dst):
        m = mask[p % QUADRANT]
        if m == KEEP:
            continue
        s = (p // QUADRANT) * QUADRANT + m
        if s >= n_src:
            raise errors.make("argument", f"nc_stream_shuffle: destination partition {p} reads source partition "
                              f"{s}, but src has {n_src} partitions", loc=loc)
        if runs and runs[-1][0] + runs[-1][2] == p and runs[-1][1] + runs[-1][2] == s:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((p, s, 1))
    return runs


def _snapshot(tr, t: Tile, loc) -> Tile:
    buf = new_buffer(tr, t.shape, t.dtype_name, ir.Space.SBUF, t.name + "_shuf", loc)
    acc = ir.Access.full(buf)
    tr.emit(ir.Instr("tensor_copy", (acc,), (t.access,), attrs(engine="vector"), None, loc))
    return Tile(tr, acc, t.dtype_name)


@isa("nisa.nc_stream_shuffle")
def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None) -> None:
    tr = current()
    loc = capture_loc(2)
    s = tile_operand(src, "src", "nc_stream_shuffle", loc)
    d = tile_operand(dst, "dst", "nc_stream_shuffle", loc)
    for what, t in (("src", s), ("dst", d)):
        if t.space not in (ir.Space.SBUF, ir.Space.PSUM):
            raise errors.make("memory_space", f"nc_stream_shuffle {what} must be in SBUF or PSUM, got "
                              f"{t.space.value}", loc=loc)
    if s.dtype_name != d.dtype_name or (dtype is not None and resolve_dtype(dtype, loc) != d.dtype_name):
        raise errors.make("dtype", f"nc_stream_shuffle: dst ({d.dtype_name}) must have src's dtype "
                          f"({s.dtype_name})", loc=loc)
    if tuple(s.shape[1:]) != tuple(d.shape[1:]):
        raise errors.make("shape_mismatch", f"nc_stream_shuffle: src {tuple(s.shape)} and dst {tuple(d.shape)} "
                          "differ in their per-partition shape", loc=loc)
    if mask is not None:
        raise errors.make("unsupported", "nc_stream_shuffle(mask=...) is not built yet", loc=loc,
                          hint="mark the unmodified partitions with 255 in shuffle_mask")
    runs = _runs(_shuffle_mask(shuffle_mask, loc), d.shape[0], s.shape[0], loc)
    if _shares_storage(tr, s, d):
        s = _snapshot(tr, s, loc)
    for p, q, n in runs:
        dv, sv = d[p:p + n], s[q:q + n]
        tr.emit(ir.Instr("tensor_copy", (dv.access,), (sv.access,), attrs(engine="vector"), None, loc))


def _shares_storage(tr, a: Tile, b: Tile) -> bool:
    return a.buf.name == b.buf.name or (a.buf.base or a.buf.name) == (b.buf.base or b.buf.name)
