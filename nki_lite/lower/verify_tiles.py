"""Verifier rules 1 and 2: tile partition dimension and per-instruction free-size limits.

Rule 1 (partition_limit, partition_axis): the partition dimension of every on-chip access (the tile
axis whose index carries the buffer's partition dimension) has at most `target.partitions` rows;
compute instructions take *tiles*: their partition axis is axis 0 (block dimensions in front of
the partition dimension must be indexed away first).
Rule 2 (free_size_limit): Vector/Scalar instructions read at most `vector_sbuf_fmax` elements per
partition from SBUF and `vector_psum_fmax` from PSUM; bn_stats reads at most `bn_stats_fmax`;
a Tensor Engine transpose is at most 128x128 and a Vector Engine transpose at most 32x32.
"""
from __future__ import annotations

from .. import errors
from ..core.affine import axis_var
from ..core.ir import Space
from .analysis.accesses import accesses
from .analysis.program import Site
from .analysis.ranges import prod
from ..core.ops import engine_of, is_compute
from .verify_common import MULTI, Ctx, buf_desc, fmt_shape, partition_axis

_ROLE = {"out": "output", "in": "input"}


def _operand_name(instr, role: str, k: int) -> str:
    return f"{_ROLE[role]} {k}" if (len(instr.outs) if role == "out" else len(instr.ins)) > 1 else _ROLE[role]


def check_partition(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    # memset (nl.zeros/ones/full) initialises whole tensors, block dimensions included (NKI tutorials
    # do this): like DMA it only needs the partition extent within the limit
    compute = is_compute(instr) and instr.op != "memset"
    pmax = ctx.target.partitions
    for role, k, acc in accesses(instr):
        buf = ctx.buf(acc.buffer)
        if buf.space == Space.HBM or not acc.shape:
            continue
        pa = partition_axis(buf, acc)
        what = f"{_operand_name(instr, role, k)} '{buf.name}' ({buf_desc(buf)}) of '{instr.op}'"
        if compute:
            if pa is not None and pa != 0:
                where = ("several tile axes" if pa == MULTI else f"tile axis {pa}")
                raise errors.make(
                    "partition_axis",
                    f"{what} is accessed as a tile of shape {fmt_shape(acc.shape)} whose partition dimension "
                    f"(buffer axis {buf.par_axis}) is on {where}; compute instructions take tiles whose first "
                    f"axis is the partition axis",
                    loc=instr.loc,
                    hint=(f"index the block dimension(s) in front of the partition dimension away first, e.g. "
                          f"{buf.name}[i] inside a loop over the {prod(buf.shape[:buf.par_axis])} blocks"
                          if buf.par_axis > 0 else
                          "put the partition index first: x[ip, i_f] with ip = nl.arange(P)[:, None]"))
            pext = acc.shape[0]
        else:
            if pa is None or pa == MULTI:
                continue
            pext = acc.shape[pa]
        if pext > pmax:
            raise errors.make(
                "partition_limit",
                f"{what} spans {pext} partitions (tile shape {fmt_shape(acc.shape)}); {ctx.target.name} has "
                f"{pmax} partitions",
                loc=instr.loc,
                hint=f"split the partition axis into a loop over {pmax}-row tiles "
                     f"(for i in nl.affine_range({-(-pext // pmax)}): ... x[i * {pmax} + ip, ...])")


def _free(acc) -> int:
    return prod(acc.shape[1:]) if len(acc.shape) > 1 else 1


def _read_free(acc) -> int:
    """Elements per partition an engine reads through acc: a broadcast axis (one no index uses, a stride-0
    view such as the library's `mean.expand_dim(2).broadcast(2, H1)` of a PSUM tile) re-reads the same
    elements and adds none."""
    used = set().union(*(e.vars() for e in acc.index)) if acc.index else set()
    return prod(n for k, n in enumerate(acc.shape) if k >= 1 and axis_var(k) in used) if len(acc.shape) > 1 else 1


def check_free_size(ctx: Ctx, site: Site) -> None:
    instr = site.instr
    if not is_compute(instr) or instr.op == "nc_matmul":
        return
    t = ctx.target
    eng = engine_of(instr)
    if instr.op == "transpose":
        src = next((a for r, _, a in accesses(instr) if r == "in"), None)
        if src is not None and len(src.shape) >= 1:
            P, F = src.shape[0], _free(src)
            limit = t.transpose_tensor_max if eng == "tensor" else t.transpose_vector_max if eng == "vector" else None
            if limit is not None and (P > limit or F > limit):
                raise errors.make(
                    "free_size_limit",
                    f"transpose on the {eng} engine handles at most {limit}x{limit}; the input tile is "
                    f"{P}x{F} ({fmt_shape(src.shape)})",
                    loc=instr.loc,
                    hint=f"transpose {limit}x{limit} blocks one at a time"
                         + (" or use the Tensor Engine (engine=nisa.tensor_engine, up to 128x128)"
                            if eng == "vector" else ""))
        return
    if instr.op == "bn_stats":
        src = next((a for r, _, a in accesses(instr) if r == "in"), None)
        if src is not None and _free(src) > t.bn_stats_fmax:
            raise errors.make(
                "free_size_limit",
                f"bn_stats reads {_free(src)} elements per partition (tile {fmt_shape(src.shape)}); the limit "
                f"is {t.bn_stats_fmax} (nl.tile_size.bn_stats_fmax)",
                loc=instr.loc,
                hint=f"call bn_stats on chunks of {t.bn_stats_fmax} free elements and combine them with "
                     "nisa.bn_aggr")
    if eng not in ("vector", "scalar"):
        return
    for role, k, acc in accesses(instr):
        if role != "in":
            continue
        buf = ctx.buf(acc.buffer)
        if buf.space == Space.SBUF:
            limit, mem = t.vector_sbuf_fmax, "SBUF"
        elif buf.space == Space.PSUM:
            limit, mem = t.vector_psum_fmax, "PSUM"
        else:
            continue
        n = _read_free(acc)
        if n > limit:
            raise errors.make(
                "free_size_limit",
                f"'{instr.op}' on the {eng} engine reads {n} elements per partition from {mem} "
                f"('{buf.name}', tile {fmt_shape(acc.shape)}); the limit is {limit} elements per partition "
                f"when reading {mem}",
                loc=instr.loc,
                hint=f"split the free dimension into chunks of at most {limit} elements (a loop over "
                     f"x[:, j * {limit}:(j + 1) * {limit}])")
