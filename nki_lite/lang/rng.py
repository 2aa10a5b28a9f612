"""Random numbers: nl.rand, nl.random_seed, nl.dropout and nisa.dropout.

Contract: nki_lite's generator is numerics/rng.py (a counter-based hash; hardware RNG bits cannot be
reproduced on a CPU, docs/numerics.md "Random numbers"). The RNG state lives in the tracer, per
kernel trace: the seed operand of the last nl.random_seed (an immediate, or one element of a tile,
read when each random instruction runs), the loops open at that call, and the number of random
instructions traced since. Each `rand` / `dropout` instruction carries that seed as an input and
its `draw` number and `stream` (the iteration of the loops opened since the seed was set, an
affine expression) as attributes, so it is a pure function of its operands: loops stay independent
and both backends compute the same bits. Without a random_seed call the seed is 0.
- nl.rand(shape, dtype): uniform values in [0, 1) (fp32, then rounded once to dtype).
- nisa.dropout(data, prob) / nl.dropout(x, rate): an element is dropped (set to 0) when its uniform
  value u < prob, else kept unchanged (no 1/(1-p) rescaling: NKI's kernels rescale themselves).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import dtypes as D
from ..core import ir
from ..core.affine import Affine, axis_var
from .api import api, isa
from .isa_common import per_partition
from .masks import to_mask
from .memory import resolve_dtype
from .ops_math import result_access, scalar_imm, tile_operand
from .tile import Tile, broadcast_access
from .tracer import attrs, current


@dataclass
class _State:
    seed: object = field(default_factory=lambda: ir.Imm(0, "uint32"))
    seed_loops: frozenset = frozenset()          # loop variables open when the seed was set
    draws: int = 0


_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _state(tr) -> _State:
    st = _STATES.get(tr)
    if st is None:
        st = _STATES[tr] = _State()
    return st


def _draw(tr) -> tuple:
    """(seed operand, attrs) for the next random instruction, advancing the draw counter."""
    st = _state(tr)
    stream = Affine(0)
    for b in tr.stack[1:]:
        if b.loop["var"] not in st.seed_loops:
            stream = stream.scale(b.loop["trip"]) + Affine.var(b.loop["var"])
    draw = st.draws
    st.draws += 1
    return st.seed, (("draw", draw), ("stream", stream))


def _scalar_seed(x, loc) -> ir.Imm:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise errors.make("argument", f"nl.random_seed seed must be a 32-bit scalar or a tile, got "
                          f"{type(x).__name__}", loc=loc)
    imm = scalar_imm(x)
    return ir.Imm(imm.value, imm.dtype)


@api("nl.random_seed")
def random_seed(seed, *, mask=None):
    """nl.random_seed: later random instructions draw from the sequence of `seed` (an integer, or a
    tile whose first element is read when they run). `mask=` is accepted; the seed is set regardless."""
    tr = current()
    loc = capture_loc(2)
    if isinstance(seed, Tile):
        t = tile_operand(seed, "seed", "random_seed", loc)
        first = {axis_var(a): Affine(0) for a in range(len(t.shape))}
        operand = ir.Access(t.access.buffer, tuple(e.subst(first) for e in t.access.index), (1, 1))
    else:
        operand = _scalar_seed(seed, loc)
    st = _state(tr)
    st.seed, st.seed_loops, st.draws = operand, frozenset(tr.loop_vars()), 0


@api("nl.rand", ignored=("name",))
def rand(shape, dtype=np.float32):
    """nl.rand: a new SBUF tile of uniform random values in [0, 1)."""
    tr = current()
    loc = capture_loc(2)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if len(shape) < 2:
        raise errors.make("rank", f"nl.rand shape {shape}: on-chip tiles are at least 2-D (partition, free...)",
                          loc=loc, hint=f"use shape ({shape[0] if shape else 1}, 1)")
    dt = resolve_dtype(dtype, loc)
    dst = result_access(shape, dt, loc)
    seed, extra = _draw(tr)
    tr.emit(ir.Instr("rand", (dst,), (seed,), extra + attrs(engine="vector"), None, loc))
    return Tile(tr, dst, dt)


def _dropout(x: Tile, prob_acc, dtype, mask, loc, op: str) -> Tile:
    tr = current()
    dt = resolve_dtype(dtype, loc) if dtype is not None else x.dtype_name
    if D.INFO[x.dtype_name].is_int and dt != x.dtype_name:
        raise errors.make("dtype", f"{op} of {x.dtype_name} data must keep its dtype; got dtype={dt}", loc=loc,
                          hint="integer data is dropped in its own dtype: drop dtype=")
    dst = result_access(x.shape, dt, loc)
    seed, extra = _draw(tr)
    tr.emit(ir.Instr("dropout", (dst,), (x.access, prob_acc, seed), extra + attrs(engine="vector"),
                     to_mask(mask, x.shape, loc), loc))
    return Tile(tr, dst, dt)


@isa("nisa.dropout")
def isa_dropout(data, prob, *, mask=None, dtype=None):
    """nisa.dropout: zero each element with probability `prob` (a scalar or a [P, 1] tile)."""
    loc = capture_loc(2)
    x = tile_operand(data, "data", "dropout", loc)
    p, pdt = per_partition(prob, x, "prob", "dropout", loc)
    if D.INFO[x.dtype_name].is_int and isinstance(p, ir.Access) and pdt != "float32":
        raise errors.make("dtype", f"nisa.dropout of {x.dtype_name} data needs a float32 prob tile; got {pdt}",
                          loc=loc)
    if isinstance(p, ir.Imm):
        p = ir.Imm(float(p.value), "float32")
    return _dropout(x, p, dtype, mask, loc, "nisa.dropout")


@api("nl.dropout")
def dropout(x, rate, *, dtype=None, mask=None):
    """nl.dropout: zero each element with probability `rate` (a scalar, or a tile broadcast over x)."""
    loc = capture_loc(2)
    t = tile_operand(x, "x", "dropout", loc)
    if isinstance(rate, Tile):
        r = tile_operand(rate, "rate", "dropout", loc)
        p = broadcast_access(r.access, t.shape, "rate")
    elif isinstance(rate, (int, float, np.integer, np.floating)) and not isinstance(rate, (bool, np.bool_)):
        p = ir.Imm(float(rate), "float32")
    else:
        raise errors.make("argument", f"nl.dropout rate must be a scalar or a tile, got {type(rate).__name__}",
                          loc=loc)
    return _dropout(t, p, dtype, mask, loc, "nl.dropout")
