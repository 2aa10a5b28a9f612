"""The tile IR: what a traced kernel is, for the interpreter, the JIT and the engine model alike.

Contract:
- Everything is a frozen dataclass; a `Kernel` is a pure value (hashable parts, stable printing).
- Memory: `Buffer`s live in HBM, SBUF or PSUM. HBM views (reshape) are buffers with `base` set and
  share the base's linear storage. On-chip buffers have a partition axis (`par_axis`, 0 unless
  nl.par_dim put it elsewhere).
- Data: an `Access` addresses a buffer with one affine index per buffer dimension, over loop
  variables, program ids and axis variables `@k` that range over the access's `shape`. Strided,
  broadcast (axis unused), transposed and offset patterns are all just affine indices, which leaves
  room for the new NKI dialect's access patterns; dynamic (data-dependent) offsets would add a
  term kind to `Affine`.
- Control: `Loop(var, trip, kind, body)` with var in [0, trip). Loops stay loops: the IR size does
  not depend on trip counts. SPMD grids are the kernel's `grid`; program ids are vars `pid0..`.
- Instructions: `Instr(op, outs, ins, attrs, mask, loc)`; `op` names a registered op
  (lower/ops.py), attrs carry everything numeric (ALU function, output rounding, accumulate, engine).
  Every instruction has the user's `Loc`.
- `format(kernel)` prints stable text with `# file:line` suffixes (golden tests, cache keys).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, Union

from ..loc import Loc
from .affine import Affine, Mask, axis_var


class Space(str, Enum):
    HBM = "hbm"
    SBUF = "sbuf"
    PSUM = "psum"


@dataclass(frozen=True)
class Buffer:
    name: str
    space: Space
    shape: tuple[int, ...]
    dtype: str
    kind: str = "local"        # input | output | local | const
    par_axis: int = 0
    base: str | None = None    # HBM view of another buffer (same linear storage)
    mutable: bool = False      # input annotated nt.mutable_tensor
    hbm_kind: str = ""         # shared_hbm | private_hbm for HBM locals/outputs
    loc: Loc | None = None

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Access:
    buffer: str
    index: tuple[Affine, ...]      # one per buffer dimension
    shape: tuple[int, ...]         # the tile shape; axis k is variable "@k"

    @staticmethod
    def full(buf: Buffer) -> "Access":
        return Access(buf.name, tuple(Affine.var(axis_var(k)) for k in range(len(buf.shape))), buf.shape)

    def vars(self) -> set[str]:
        out: set[str] = set()
        for e in self.index:
            out |= e.vars()
        return out

    def __str__(self) -> str:
        return f"{self.buffer}[{', '.join(str(e) for e in self.index)}]<{'x'.join(map(str, self.shape))}>"


@dataclass(frozen=True)
class Imm:
    value: Union[int, float]
    dtype: str = "float32"

    def __str__(self) -> str:
        return f"{self.value!r}:{self.dtype}"


Operand = Union[Access, Imm]


@dataclass(frozen=True)
class Instr:
    op: str
    outs: tuple[Access, ...]
    ins: tuple[Operand, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    mask: Mask | None = None
    loc: Loc | None = None

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def out(self) -> Access:
        return self.outs[0]


@dataclass(frozen=True)
class Loop:
    var: str
    trip: int
    kind: str                      # affine | sequential | dynamic
    body: tuple["Node", ...]
    start: int = 0                 # user-visible value = start + step * var (kept for printing)
    step: int = 1
    loc: Loc | None = None
    # kind == "dynamic" (nl.dynamic_range, lang/registers.py): the trip count is known at run time only.
    # bounds = (start, stop, value): start and stop are ints or one-element register Accesses read once
    # on entry, value the register Access the loop writes start + step*k to before iteration k (or None).
    # `trip` is then 1: the body is traced once, and static analyses see one symbolic iteration (the
    # loop variable itself appears in no affine index; a dynamic loop is never parallel nor chained).
    bounds: tuple = ()

    @property
    def dynamic(self) -> bool:
        return self.kind == "dynamic"


Node = Union[Instr, Loop]


@dataclass(frozen=True, eq=False)
class ConstData:
    """Host data of an nl.shared_constant buffer; compared and hashed by content."""
    array: Any

    def digest(self) -> str:
        import hashlib
        return hashlib.sha1(self.array.tobytes() + str(self.array.dtype).encode()).hexdigest()[:12]

    def __eq__(self, other) -> bool:
        return isinstance(other, ConstData) and self.digest() == other.digest()

    def __hash__(self) -> int:
        return hash(self.digest())


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[str, ...]        # input buffer names, in call order
    outputs: tuple[str, ...]       # returned buffer names, in return order
    buffers: tuple[Buffer, ...]
    body: tuple[Node, ...]
    grid: tuple[int, ...] = ()
    target: str = "trn2"
    return_kind: str = "tuple"     # none | single | tuple
    loc: Loc | None = None
    consts: tuple[tuple[str, ConstData], ...] = ()   # data of const (nl.shared_constant) buffers
    # parameters the kernel writes without returning them (the current dialect's in-place updates):
    # the last entries of `outputs`, written back into the caller's arrays but not returned
    written_back: tuple[str, ...] = ()
    # returned whole HBM views (`return out.reshape(shape)`): (index in outputs, shape, dtype) -- the
    # output is the view's root buffer, handed back to the caller reshaped / viewed as returned (no copy)
    output_views: tuple[tuple[int, tuple[int, ...], str], ...] = ()
    # directly allocated on-chip tensors (nki.compiler alloc / mod_alloc): (buffer name, the physical tile
    # of every logical block in row-major block order, core/placement.py PhysTile); read by the overlap rule
    placements: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def buffer(self, name: str) -> Buffer:
        return self.buffer_map[name]

    @functools.cached_property
    def buffer_map(self) -> dict[str, Buffer]:
        """name -> Buffer, built once per kernel (callers read it; never mutate it): looking buffers up
        per instruction must not cost a pass over every buffer (kernels of 10^5 unrolled ops)."""
        return {b.name: b for b in self.buffers}


def walk(nodes: tuple[Node, ...], loops: tuple[Loop, ...] = ()) -> Iterator[tuple[Instr, tuple[Loop, ...]]]:
    """Every instruction with the loops enclosing it (outermost first)."""
    for n in nodes:
        if isinstance(n, Loop):
            yield from walk(n.body, loops + (n,))
        else:
            yield n, loops


def count_instrs(kernel: Kernel) -> int:
    return sum(1 for _ in walk(kernel.body))


# ---------------------------------------------------------------- printing

def _fmt_attr(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt_attr(x) for x in v) + ")"
    if isinstance(v, Enum):
        return str(v.value)
    return str(v)


def _suffix(loc: Loc | None) -> str:
    return f"  # {os.path.basename(loc.file)}:{loc.line}" if loc else ""


def format_instr(ins: Instr) -> str:
    outs = ", ".join(map(str, ins.outs))
    args = ", ".join(map(str, ins.ins))
    attrs = " ".join(f"{k}={_fmt_attr(v)}" for k, v in ins.attrs)
    s = f"{outs} = {ins.op}({args})"
    if attrs:
        s += " {" + attrs + "}"
    if ins.mask is not None:
        s += f" mask {ins.mask}"
    return s + _suffix(ins.loc)


def format(kernel: Kernel) -> str:  # noqa: A001 - the IR's printer, as DESIGN.md names it
    lines = []
    grid = f" grid=[{','.join(map(str, kernel.grid))}]" if kernel.grid else ""
    lines.append(f"kernel {kernel.name}({', '.join(kernel.params)}) -> ({', '.join(kernel.outputs)})"
                 f"{grid} target={kernel.target}")
    for b in kernel.buffers:
        extra = []
        if b.par_axis:
            extra.append(f"par_axis={b.par_axis}")
        if b.base:
            extra.append(f"view_of={b.base}")
        if b.mutable:
            extra.append("mutable")
        if b.hbm_kind:
            extra.append(b.hbm_kind)
        ex = (" " + " ".join(extra)) if extra else ""
        if b.kind == "const":
            extra.append("data=" + dict(kernel.consts)[b.name].digest())
            ex = " " + " ".join(extra)
        lines.append(f"  buffer {b.name}: {b.space.value}[{','.join(map(str, b.shape))}] {b.dtype} {b.kind}{ex}"
                     f"{_suffix(b.loc)}")

    def emit(nodes, depth):
        pad = "  " * depth
        for n in nodes:
            if isinstance(n, Loop):
                rng = f"{n.trip}" if (n.start, n.step) == (0, 1) else f"{n.trip}; value={n.start}+{n.step}*{n.var}"
                if n.dynamic:
                    lo, hi, val = (str(b) for b in n.bounds)
                    rng = f"{lo}, {hi}, {n.step}; value->{val}"
                lines.append(f"{pad}for {n.var} in {n.kind}_range({rng}):{_suffix(n.loc)}")
                emit(n.body, depth + 1)
            else:
                lines.append(pad + format_instr(n))
    emit(kernel.body, 1)
    return "\n".join(lines) + "\n"
