"""The trace context: the one mutable object while a kernel body runs with proxy tiles.

Contract: `current()` returns the active `Tracer` or raises `outside_kernel`. The tracer owns the
buffer table, the stack of open bodies (kernel body, loop bodies), variable numbering and the
pending-matmul slot; `emit()` appends an instruction (flushing a pending matmul first, so program
order is always the statement order). `freeze()` returns the immutable `ir.Kernel`.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from .. import errors
from ..loc import Loc, capture_loc
from ..core import ir
from ..core.affine import Affine
from ..core.targets import TARGETS, Target
from .flat_storage import flatten_buffers
from .source import loop_target

_CURRENT: contextvars.ContextVar["Tracer | None"] = contextvars.ContextVar("nki_lite_tracer", default=None)


def current() -> "Tracer":
    t = _CURRENT.get()
    if t is None:
        raise errors.make("outside_kernel", "NKI API called outside of a kernel", loc=capture_loc(2))
    return t


def active() -> "Tracer | None":
    return _CURRENT.get()


@dataclass
class _Body:
    nodes: list = field(default_factory=list)
    loop: dict | None = None        # var, trip, kind, start, step, loc


class Tracer:
    def __init__(self, name: str, grid: tuple[int, ...], target: str):
        self.name = name
        self.grid = grid
        self.target = target
        self.buffers: dict[str, ir.Buffer] = {}
        self.stack: list[_Body] = [_Body()]
        self._names: dict[str, int] = {}
        self.n_loops = 0
        self.pending = None          # a lang.tile.PendingMatmul awaiting its consumer
        self.compiler_placed: set[str] = set()   # PSUM results the compiler may re-place (lang/ops_math.py sbuf_operand)
        self.params: list[str] = []
        self.consts: dict[str, ir.ConstData] = {}
        self.placements: dict[str, tuple] = {}     # direct allocations: buffer -> PhysTile per block (lang/creation.py)
        self.broken_loop = None
        self.var_extents: dict[str, int] = {f"pid{k}": g for k, g in enumerate(grid)}
        self.var_names: dict[str, tuple] = {}        # IR loop variable -> (user's name, start, step)
        self._oversize: dict[str, Exception] = {}    # buffer -> its deferred partition_limit error
        self.fn = None                                # the kernel function being traced
        self.unroll_locs: set = set()                 # (file, line) of loops traced unrolled (UnrollRequest)
        self.python_loops: set[str] = set()           # loop variables of current-dialect loops (Python semantics)
        self.flat_buffers: set[str] = set()           # on-chip buffers stored [P, free size] (lang/flat_storage.py)
        self.bitcast_views: dict = {}                 # snapshot buffer -> (its access, root access, loc) (views_bitcast)
        self.refresh_views = None                     # set with the first of them: views_bitcast.refresh
        self.object_truth = False                     # bool(HBM tensor) is True (the current dialect, Tile.__bool__)
        self._token = None

    @property
    def hw(self) -> Target:
        """The target's hardware facts (core/targets.py); trn2's (the default target) for an unknown name."""
        return TARGETS.get(self.target) or TARGETS["trn2"]

    # ---- lifetime
    def __enter__(self) -> "Tracer":
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)

    # ---- names and buffers
    def fresh(self, base: str) -> str:
        base = base or "t"
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        name = base if n == 0 and base not in self.buffers else f"{base}.{n}"
        while name in self.buffers:
            n += 1
            name = f"{base}.{n}"
        self._names[base] = n + 1
        return name

    def add_buffer(self, buf: ir.Buffer) -> ir.Buffer:
        self.buffers[buf.name] = buf
        return buf

    @property
    def depth(self) -> int:
        return len(self.stack) - 1

    def loop_vars(self) -> list[str]:
        return [b.loop["var"] for b in self.stack[1:]]

    # ---- instructions
    def emit(self, instr: ir.Instr) -> ir.Instr:
        if self.pending is not None:
            self.pending.materialize()
        if self._oversize and instr.op != "alloc":
            self._raise_oversize(instr)
        if self.bitcast_views:
            self.refresh_views(self, instr)         # lang/views_bitcast.py `refresh`
        self.stack[-1].nodes.append(instr)
        return instr

    def defer_partition_error(self, buffer: str, err: Exception) -> None:
        self._oversize[buffer] = err

    def _raise_oversize(self, instr: ir.Instr | None) -> None:
        """An on-chip tile taller than the partition count was created: raise at the instruction that
        writes it, blaming a transpose's operand when that is where the height comes from."""
        if instr is not None and instr.op == "transpose" and instr.outs and instr.outs[0].buffer in self._oversize:
            src = next((a for a in instr.ins if isinstance(a, ir.Access)), None)
            if src is not None:
                shape = list(src.shape)
                self._oversize.clear()
                p = self.hw.partitions
                raise errors.make(
                    "free_size_limit",
                    f"transpose of a tile of shape {shape}: its free size {shape[-1]} would become the partition "
                    f"dimension of the result, and a transpose handles at most {p}x{p} (the result has "
                    f"{shape[-1]} > {p} partitions)", loc=instr.loc,
                    hint=f"transpose {p}-column blocks: t[:, j*{p}:(j+1)*{p}] for each j")
        err = next(iter(self._oversize.values()))
        self._oversize.clear()
        raise err

    def emit_raw(self, instr: ir.Instr) -> ir.Instr:
        """Append without flushing the pending matmul (used by the flush itself)."""
        self.stack[-1].nodes.append(instr)
        return instr

    # ---- loops
    def open_loop(self, trip: int, kind: str, start: int, step: int, loc: Loc, bounds: tuple = ()) -> str:
        if self.pending is not None:
            self.pending.materialize()
        var = f"i{self.n_loops}"
        self.n_loops += 1
        name = loop_target(loc)
        open_names = {self.var_names.get(b.loop["var"], (None,))[0] for b in self.stack[1:]}
        if name and name not in open_names:
            self.var_names[var] = (name, start, step)
        self.var_extents[var] = trip
        self.stack.append(_Body(loop=dict(var=var, trip=trip, kind=kind, start=start, step=step, loc=loc,
                                                bounds=bounds)))
        return var

    def open_loop_locs(self, variables) -> set:
        """(file, line) of the open symbolic loops whose variables are among `variables`."""
        out = set()
        for b in self.stack[1:]:
            if b.loop is not None and b.loop["var"] in variables:
                loc = b.loop["loc"]
                out.add((loc.file, loc.line))
        return out

    def close_loop(self, var: str) -> None:
        if self.pending is not None:
            self.pending.materialize()
        body = self.stack[-1]
        if body.loop is None or body.loop["var"] != var:
            raise errors.make("bad_loop", "loops closed out of order (break or an exception inside a loop?)",
                              loc=capture_loc(2))
        self.stack.pop()
        L = body.loop
        self.stack[-1].nodes.append(ir.Loop(L["var"], L["trip"], L["kind"], tuple(body.nodes),
                                            L["start"], L["step"], L["loc"], L["bounds"]))

    def freeze(self, outputs: tuple[str, ...], return_kind: str, loc: Loc | None,
               written_back: tuple[str, ...] = (), output_views: tuple = ()) -> ir.Kernel:
        if self.pending is not None:
            self.pending.materialize()
        if self._oversize:
            self._raise_oversize(None)
        if len(self.stack) != 1:
            raise errors.make("bad_loop", "kernel returned from inside a loop", loc=loc)
        buffers, body = flatten_buffers(self.buffers, tuple(self.stack[0].nodes), self.flat_buffers)
        return ir.Kernel(self.name, tuple(self.params), outputs, tuple(buffers.values()),
                         body, self.grid, self.target, return_kind, loc,
                         tuple(self.consts.items()), written_back, output_views,
                         tuple((n, t) for n, t in self.placements.items() if n in buffers))


class UnrollRequest(Exception):
    """Raised while tracing when Python control flow depends on the variables of symbolic loops only
    (`if (i + 1) * 128 - 1 >= j * 512:`, a tile-level early exit): the kernel is traced again with
    those loops unrolled, so each iteration's branch is taken at trace time — what NKI's simulator,
    which runs the loops in Python, does. Never escapes lang/trace.py."""

    def __init__(self, locs: set, error: Exception):
        super().__init__("unroll")
        self.locs, self.error = locs, error


def user_text(expr) -> str:
    """An affine expression as the user would write it: loop variables by the for-target names in the
    source (`i`, not the IR's `i0`), accounting for the loop's start and step."""
    tr = _CURRENT.get()
    if tr is None or not tr.var_names:
        return str(expr)
    const, terms = expr.const, {}
    for v, c in expr.terms:
        name, start, step = tr.var_names.get(v, (None, 0, 1))
        if name is None or c % step:
            terms[v] = terms.get(v, 0) + c
            continue
        k = c // step                               # c*v = k*(start + step*v) - k*start
        const -= k * start
        terms[name] = terms.get(name, 0) + k
    return str(Affine.make(const, terms))


def attrs(**kw: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in kw.items() if v is not None)
