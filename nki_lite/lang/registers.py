"""Virtual registers and dynamic loops: nisa.register_alloc / move / load / store, nl.dynamic_range,
nl.fori_loop and nl.while_loop (and `while reg:`) of the current dialect.

Contract:
- A `VirtualRegister` is a one-element int32 SBUF buffer (`vreg…`) that has no `alloc`: it lives for the
  whole kernel (liveness never frees it, the JIT arena never reuses it). Every write to it and every read
  of it is a `register_move` IR instruction (dst one element, src a register, a one-element tensor or an
  immediate; the value is taken as an integer and wraps to the destination's integer dtype).
- `nl.dynamic_range(start, stop=None, step=1)` yields one VirtualRegister (the loop value) and records an
  `ir.Loop(kind="dynamic", trip=1, bounds=(start, stop, value))`: start/stop are ints or registers read
  once on entry, the trip count is max(0, ceil((stop - start) / step)) at run time (Python's range). The
  body is traced once. step must be a positive compile-time int and int bounds must fit in int32: else
  NL-E117. `nl.fori_loop(lower, upper, body_fun, step)` is that loop calling `body_fun(value)`.
- `nl.while_loop(init, body_fun)` and `while reg:` are a dynamic loop whose condition is a register
  (bounds = ("while", cond, None)): the body runs while the register is nonzero, tested before each
  iteration. `while reg:` is traced by `__bool__`: its first call opens the loop and returns True, the
  next call from the same line closes it and returns False, so Python runs the body once.
- A register read (a loop bound, register_store, register_move's source, a while condition) before any
  write to it in program order is NL-E118.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..loc import capture_loc
from .argcheck import expect
from .tile import Tile
from .tracer import current

INT32 = (-(1 << 31), (1 << 31) - 1)


class VirtualRegister:
    """A scalar register of the engine sequencers (32-bit), as nisa.register_alloc returns it."""

    def __init__(self, tracer, loc, name: str = "vreg"):
        buf = tracer.add_buffer(ir.Buffer(tracer.fresh(name), ir.Space.SBUF, (1, 1), "int32", loc=loc))
        self.tile = Tile(tracer, ir.Access.full(buf), "int32")
        self.is_set = False
        self.loc = loc
        self._while = None                 # (file, line) of the `while reg:` loop this register steers

    @property
    def access(self) -> ir.Access:
        return self.tile.access

    @property
    def name(self) -> str:
        return self.access.buffer

    def __repr__(self) -> str:
        return f"VirtualRegister({self.name})"

    def __bool__(self) -> bool:
        return _while_test(self, capture_loc(2))

    def __int__(self):
        raise errors.make("control_flow_on_tile", f"the value of {self!r} is known on the device only",
                          loc=capture_loc(2), hint="use it as a dynamic_range bound or a scalar_offset")

    __index__ = __int__


def _need_set(r: VirtualRegister, what: str, loc) -> None:
    if not r.is_set:
        raise errors.make("register_unset", f"{what} reads {r.name}, which is read before it is set "
                          f"(allocated at line {r.loc.line if r.loc else '?'} without a value)", loc=loc,
                          hint="give it a value first: nisa.register_alloc(0), register_move or register_load")


def _register(x, what: str, api: str, loc) -> VirtualRegister:
    return expect(x, VirtualRegister, api, what, "a register from nisa.register_alloc", loc)


def _const(x, what: str, api: str, loc) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise errors.make("argument", f"{api}: {what} must be an int or a register, got {type(x).__name__}", loc=loc)
    if not INT32[0] <= int(x) <= INT32[1]:
        raise errors.make("dynamic_bounds", f"{api}: {what}={int(x)} does not fit in a 32-bit register", loc=loc)
    return int(x)


def _one_element(t, what: str, api: str, loc) -> ir.Access:
    expect(t, Tile, api, what, "a tensor", loc)
    if int(np.prod(t.shape)) != 1:
        raise errors.make("shape_mismatch", f"{api}: {what} must hold exactly one element (shape [1] or [1, 1]), "
                          f"got shape {tuple(t.shape)}", loc=loc)
    dt = t.dtype_name
    if D.INFO[dt].kind not in "iu" or D.itemsize(dt) > 4:
        raise errors.make("dtype", f"{api}: {what} must be an integer tensor of at most 32 bits, got {dt}", loc=loc)
    return t.access


def _move(dst: ir.Access, src, loc) -> None:
    current().emit(ir.Instr("register_move", (dst,), (src,), (), None, loc))


def register_alloc(x=None) -> VirtualRegister:
    loc = capture_loc(2)
    r = VirtualRegister(current(), loc)
    if isinstance(x, Tile):              # the NKI Library's `register_alloc(tensor[0, 0])`: a register_load
        register_load(r, x, _loc=loc)
    elif x is not None:
        _move(r.access, ir.Imm(_const(x, "x", "nisa.register_alloc", loc), "int32"), loc)
        r.is_set = True
    return r


def register_move(dst, src, _loc=None) -> None:
    loc = _loc or capture_loc(2)
    d = _register(dst, "dst", "nisa.register_move", loc)
    if isinstance(src, VirtualRegister):
        _need_set(src, "nisa.register_move", loc)
        _move(d.access, src.access, loc)
    else:
        _move(d.access, ir.Imm(_const(src, "src", "nisa.register_move", loc), "int32"), loc)
    d.is_set = True


def register_load(dst, src, _loc=None) -> None:
    loc = _loc or capture_loc(2)
    d = _register(dst, "dst", "nisa.register_load", loc)
    _move(d.access, _one_element(src, "src", "nisa.register_load", loc), loc)
    d.is_set = True


def register_store(dst, src) -> None:
    loc = capture_loc(2)
    s = _register(src, "src", "nisa.register_store", loc)
    _need_set(s, "nisa.register_store", loc)
    _move(_one_element(dst, "dst", "nisa.register_store", loc), s.access, loc)


def _bound(x, what: str, loc):
    if isinstance(x, VirtualRegister):
        _need_set(x, "nl.dynamic_range", loc)
        return x.access
    return _const(x, what, "nl.dynamic_range", loc)


def dynamic_range(start, stop=None, step=1):
    loc = capture_loc(2)
    if stop is None:
        start, stop = 0, start
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step <= 0:
        raise errors.make("dynamic_bounds", f"nl.dynamic_range: step must be a positive compile-time int, got "
                          f"{step!r}", loc=loc, hint="the hardware loop encodes the step as an immediate")
    bounds = (_bound(start, "start", loc), _bound(stop, "stop", loc))
    return _dynamic_loop(bounds, int(step), loc)


def _dynamic_loop(bounds: tuple, step: int, loc):
    tr = current()
    value = VirtualRegister(tr, loc, "vreg_i")
    value.is_set = True                  # the loop writes it before each iteration
    var = tr.open_loop(1, "dynamic", 0, step, loc, bounds + (value.access,))
    finished = False
    try:
        yield value
        finished = True
    finally:
        if finished:
            tr.close_loop(var)
        else:
            tr.broken_loop = loc


def fori_loop(lower, upper, body_fun, step=1) -> None:
    loc = capture_loc(2)
    if not callable(body_fun):
        raise errors.make("argument", f"nl.fori_loop: body_fun must be callable, got {type(body_fun).__name__}",
                          loc=loc)
    for i in dynamic_range(lower, upper, step):
        body_fun(i)


def while_loop(init, body_fun) -> None:
    loc = capture_loc(2)
    cond = _register(init, "init", "nl.while_loop", loc)
    _need_set(cond, "nl.while_loop", loc)
    tr = current()
    var = tr.open_loop(1, "dynamic", 0, 1, loc, ("while", cond.access, None))
    nxt = body_fun(cond)
    nxt = _register(nxt, "the value body_fun returns", "nl.while_loop", loc)
    _need_set(nxt, "nl.while_loop", loc)
    if nxt is not cond:
        _move(cond.access, nxt.access, loc)
    tr.close_loop(var)


def _while_test(r: VirtualRegister, loc) -> bool:
    """`while reg:` — open the loop on the first test of the line, close it on the second."""
    import linecache
    where = (loc.file, loc.line)
    if r._while == where:
        r._while = None
        tr = current()
        tr.close_loop(tr.stack[-1].loop["var"])
        return False
    text = linecache.getline(loc.file, loc.line).strip()
    if not text.startswith("while"):
        raise errors.make("control_flow_on_tile", f"Python control flow (`{text}`) on {r!r}: its value is known on "
                          "the device only", loc=loc, hint="use `while reg:`, nl.while_loop or nl.dynamic_range")
    _need_set(r, "`while`", loc)
    r._while = where
    current().open_loop(1, "dynamic", 0, 1, loc, ("while", r.access, None))
    return True
