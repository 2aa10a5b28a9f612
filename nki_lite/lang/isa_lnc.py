"""LNC=2 tracing: the logical core a trace is for, and the core_barrier / sendrecv frontends.

Contract:
- `tracing_core(core, n)` (a context manager) makes the traces inside it one logical core's program of
  an n-core launch: nl.program_id(0) is the int `core` and nl.num_programs() is n, so Python control
  flow on the core id (`if nl.program_id(0) == 0:`) and shard offsets are decided at trace time, one
  trace per core (runtime/lnc.py). `current_core()` is that (core, n) or None.
- `core_barrier(data, cores)` emits a `core_barrier` IR instruction on the shared HBM tensor `data` (or an
  SBUF tile, as the NKI Library does);
  `sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id)` a `sendrecv` from the SBUF tile src to
  the SBUF tile dst. Both only exist in a per-core trace of a two-core launch: in a one-core launch
  they raise NL-E918 at the line; inside an SPMD grid trace (both cores as one program) they raise
  `PerCoreTraceNeeded`, which runtime/lnc.py answers by tracing once per core.
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from .. import errors
from ..core import ir
from ..loc import capture_loc
from .argcheck import expect
from .tile import Tile
from .tracer import attrs, current

_CORE: contextvars.ContextVar = contextvars.ContextVar("nki_lite_lnc_core", default=None)


class PerCoreTraceNeeded(Exception):
    """A grid trace met an instruction that only a per-core trace can express (not a user error)."""


def current_core():
    return _CORE.get()


@contextlib.contextmanager
def tracing_core(core: int, n: int):
    token = _CORE.set((int(core), int(n)))
    try:
        yield
    finally:
        _CORE.reset(token)


def _need_two_cores(api: str, loc) -> None:
    if current_core() is not None:
        return
    if tuple(current().grid) == (2,):
        raise PerCoreTraceNeeded(api)
    raise errors.make("lnc_unmatched", f"{api} synchronises the two logical NeuronCores of an LNC=2 launch, "
                      f"but this kernel runs on one core (grid {tuple(current().grid) or (1,)})", loc=loc,
                      hint="launch it as kernel[2](...) on trn2 or trn3")


def _tensor(x, what: str, api: str, loc) -> Tile:
    return expect(x, Tile, api, what, "a tensor or tile of the kernel", loc)


def _rank(r):
    """A rank computed from nl.program_id in a per-core trace is a known int (an Index with no variable)."""
    expr = getattr(r, "expr", None)
    if expr is not None and getattr(expr, "is_const", False):
        return int(expr.const)
    return int(r) if isinstance(r, (int, np.integer)) and not isinstance(r, bool) else r


def core_barrier(data, cores=(0, 1), engine=None, name=None):
    loc = capture_loc(2)
    api = "nisa.core_barrier"
    t = _tensor(data, "data", api, loc)
    if tuple(int(c) for c in cores) != (0, 1):
        raise errors.make("argument", f"{api}: cores must be (0, 1) (the two cores of LNC=2), got {tuple(cores)}",
                          loc=loc)
    # The reference asks for shared HBM data, but the NKI Library's bwmm_shard_on_I (run on hardware by AWS's
    # tests) synchronises on an SBUF tile (`core_barrier(block_idx, (0, 1))`): data only names what the
    # barrier orders, so an SBUF tile is accepted too (nothing valid on the hardware may be rejected).
    if t.buf.space not in (ir.Space.HBM, ir.Space.SBUF):
        raise errors.make("memory_space", f"{api}: data must be a shared HBM tensor, got a tile in "
                          f"'{t.buf.space.value if hasattr(t.buf.space, 'value') else t.buf.space}'", loc=loc,
                          hint="allocate it with nl.ndarray(..., buffer=nl.shared_hbm)")
    _need_two_cores(api, loc)
    eng = "gpsimd" if engine is None else str(getattr(engine, "name", engine)).replace("_engine", "")
    current().emit(ir.Instr("core_barrier", (t.access,), (t.access,),
                            attrs(cores=(0, 1), engine=eng if eng in ("gpsimd", "vector", "scalar", "tensor") else
                                  "gpsimd"), None, loc))


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, name=None):
    loc = capture_loc(2)
    api = "nisa.sendrecv"
    s, d = _tensor(src, "src", api, loc), _tensor(dst, "dst", api, loc)
    for what, t in (("src", s), ("dst", d)):
        if t.buf.space != ir.Space.SBUF:
            raise errors.make("memory_space", f"{api}: {what} must be an SBUF tile, got one in "
                              f"'{getattr(t.buf.space, 'value', t.buf.space)}'", loc=loc)
    if tuple(s.shape) != tuple(d.shape):
        raise errors.make("shape_mismatch", f"{api}: src {tuple(s.shape)} and dst {tuple(d.shape)} differ in shape",
                          loc=loc)
    _need_two_cores(api, loc)             # before the ranks: in a grid trace they are symbolic
    send_to_rank, recv_from_rank = _rank(send_to_rank), _rank(recv_from_rank)
    for what, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if not isinstance(r, int) or r not in (0, 1):
            raise errors.make("argument", f"{api}: {what} must be 0 or 1 (a core of LNC=2), got {r!r}", loc=loc)
    gp = "gpsimd" in str(getattr(dma_engine, "name", dma_engine) or "")
    current().emit(ir.Instr("sendrecv", (d.access,), (s.access,),
                            attrs(send_to=int(send_to_rank), recv_from=int(recv_from_rank), pipe_id=int(pipe_id),
                                  dma_engine="gpsimd_dma" if gp else "dma"), None, loc))
