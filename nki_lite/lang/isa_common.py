"""What the nisa instructions share: the engine and NeuronCore-version enums, operand helpers, and
the second output (a free-axis reduction into reduce_res) that several instructions can carry.

Contract: `engine_name(e, default)` is the IR engine attribute for an engine= argument (default when
None / engine.unknown); `per_partition(x, like, ...)` accepts a scalar or a [P, 1] tile broadcast
over `like`; `attach_reduce(out, ...)` gives the instruction just emitted for `out` a second output,
reduce_op over its free axes, checked against reduce_res's shape. get_nc_version reads the target's
generation from core/targets.py.
"""
from __future__ import annotations

from enum import Enum

import numpy as np

from .. import errors
from ..core import ir
from .api import api
from .opnames import alu_name
from .ops_math import scalar_imm, tile_operand
from .tile import Tile, broadcast_access
from .tracer import attrs, current


class engine(str, Enum):  # noqa: N801 - NKI's spelling
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    sync = "sync"
    dma = "dma"
    unknown = "unknown"


tensor_engine, vector_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.vector, engine.scalar, engine.gpsimd
sync_engine, unknown_engine = engine.sync, engine.unknown


class nc_version(int, Enum):  # noqa: N801
    gen2 = 2
    gen3 = 3
    gen4 = 4


@api("nisa.get_nc_version")
def get_nc_version() -> nc_version:
    """The NeuronCore generation of the kernel's target (trn1: gen2, trn2: gen3, trn3: gen4)."""
    return nc_version(current().hw.nc_version)


def engine_auto(e) -> bool | None:
    """True when the compiler picks the engine (`engine=None` / `nisa.unknown_engine`): the engine
    model may then balance the instruction over the engines its docs allow (lower/cost/engines.py)."""
    return True if e is None or e == engine.unknown else None


def engine_name(e, default: str) -> str:
    if e is None or e == engine.unknown:
        return default
    return e.value if isinstance(e, engine) else str(e)


def per_partition(x, like: Tile, what: str, op: str, loc):
    """A [P, 1] (or (P,)) tile broadcast over `like`, or a Python scalar as an immediate."""
    if isinstance(x, Tile):
        t = tile_operand(x, what, op, loc)
        if t.shape[0] != like.shape[0] or any(s != 1 for s in t.shape[1:]):
            raise errors.make("shape_mismatch", f"{op} {what} must be a scalar or a [P, 1] tile with P="
                              f"{like.shape[0]}; got shape {t.shape}", loc=loc)
        return broadcast_access(t.access, like.shape, what), t.dtype_name
    if isinstance(x, (int, float, bool, np.number)):
        imm = scalar_imm(x)
        return imm, imm.dtype
    raise errors.make("argument", f"{op} {what} must be a scalar or a [P, 1] tile", loc=loc)


def _reduce_out(reduce_res, data: Tile, op: str, loc) -> ir.Access:
    if not isinstance(reduce_res, Tile):
        raise errors.make("argument", f"{op} needs reduce_res=, a [P, 1] tile to receive the reduction", loc=loc)
    r = tile_operand(reduce_res, "reduce_res", op, loc)
    if r.shape[0] != data.shape[0] or any(s != 1 for s in r.shape[1:]):
        raise errors.make("shape_mismatch", f"{op} reduce_res must have shape [{data.shape[0]}, 1]; got {r.shape}",
                          loc=loc)
    return r.access


def check_reduce_cmd(cmd, loc) -> None:
    """nki_lite reduces each instruction on its own: reduce_cmd idle (the default) or reset_reduce. The
    commands that carry the Scalar Engine's accumulator registers across instructions are not built."""
    value = getattr(cmd, "value", cmd)
    if value not in (None, "idle", "reset_reduce"):
        raise errors.make("unsupported", f"nisa.activation reduce_cmd={value!r} (accumulator registers kept across "
                          "instructions) is not built yet", loc=loc,
                          hint="reduce each instruction into its own [P, 1] reduce_res tile (reduce_cmd=reset_reduce) "
                          "and combine those tiles with nl.add / nl.maximum")


def attach_reduce(out: Tile, data, reduce_op, reduce_res, opname: str, loc) -> None:
    """Give the instruction that produced `out` a second output: the free-axis reduction."""
    tr = current()
    body = tr.stack[-1].nodes
    instr = body[-1]
    rop = alu_name(reduce_op if reduce_op is not None else np.add, loc)
    if rop not in ("add", "maximum", "minimum", "multiply"):
        raise errors.make("unsupported", f"{opname} reduce_op {rop} is not supported (add, max, min, multiply)",
                          loc=loc)
    racc = _reduce_out(reduce_res, out, opname, loc)
    body[-1] = ir.Instr(instr.op, instr.outs + (racc,), instr.ins, instr.attrs + attrs(reduce_op=rop),
                        instr.mask, instr.loc)
