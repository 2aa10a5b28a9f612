"""Shared machinery of the trace-time verifier (lower/verify.py and the verify_* rule families).

Contract:
- `Ctx` is one verification run: the kernel, its `Target`, every instruction as a `Site` (program
  position + enclosing loops), the extents of loop variables and program ids, and helpers to name
  variables the way the user wrote them.
- The integer range solver (`solve_range`, `enumerate_points`) is lower/analysis/ranges.py; the
  program structure (sites, loops, root buffers) is lower/analysis/program.py, computed once per
  kernel and shared with the other analyses.
- `access_space(ctx, site, role, k, acc)` maps an instruction's mask onto one of its accesses (the
  mask is over the instruction's iteration space; an access axis of extent 1 where the space has more
  is a reduction/broadcast: that mask variable becomes existential). `certain=False` when the mask
  cannot be related to the access: callers then raise nothing about it.
- Nothing here raises NkiLiteErrors; nothing uses `assert` (validation must survive `python -O`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence


from ..core import dtypes as D
from ..core.affine import Affine, Cmp, axis_of, is_axis_var
from ..core.targets import TARGETS, Target
from ..core.ir import Access, Buffer, Instr, Kernel, Loop, Space
from ..core.ops import input_space, mask_applies
from . import analysis
from .analysis.accesses import root_of
from .analysis.program import Site

# is_compute, is_dma, engine_of, mask_applies: op traits (core/ops.py)


# ------------------------------------------------------------------------------ program structure

@dataclass
class Ctx:
    kernel: Kernel
    target: Target
    bufs: dict[str, Buffer]
    sites: list[Site]
    loop_span: dict[int, tuple[int, int]]       # id(loop) -> (first pos, last pos) in program order
    loop_name: dict[str, tuple[str, int, int, Loop]] = field(default_factory=dict)  # var -> (user name, start, step, loop)
    unwritten: list | None = None               # verify(unwritten=): collect NL-E702 per output, not raise

    @staticmethod
    def build(kernel: Kernel) -> "Ctx":
        target = TARGETS.get(kernel.target) or TARGETS["trn2"]
        prog = analysis.of(kernel).program
        return Ctx(kernel, target, kernel.buffer_map, prog.sites, prog.loop_span, prog.loop_name)

    # ---- buffers
    def buf(self, name: str) -> Buffer:
        return self.bufs[name]

    def root(self, name: str) -> Buffer:
        return root_of(self.bufs, name)

    # ---- variables
    def extents(self, loops: Sequence[Loop]) -> dict[str, int]:
        ext = {f"pid{k}": g for k, g in enumerate(self.kernel.grid)}
        for l in loops:
            ext[l.var] = l.trip
        return ext

    def var_label(self, var: str) -> str:
        if var in self.loop_name:
            return self.loop_name[var][0]
        if var.startswith("pid"):
            return f"nl.program_id({var[3:]})"
        return var

    def user_value(self, var: str, value: int) -> int:
        if var in self.loop_name:
            _, start, step, _ = self.loop_name[var]
            return start + step * value
        return value


def itemsize(dtype: str) -> int:
    try:
        return D.itemsize(dtype)
    except KeyError:
        return 4


def short(loc) -> str:
    if loc is None or getattr(loc, "line", 0) <= 0:
        return "<unknown>"
    return f"{os.path.basename(loc.file)}:{loc.line}"


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def buf_desc(b: Buffer) -> str:
    return f"{b.space.value}{fmt_shape(b.shape)} {b.dtype}"


# ------------------------------------------------------------------------------ partition axis

MULTI = -2


def partition_axis(buf: Buffer, acc: Access) -> int | None:
    """Tile axis of `acc` that carries the buffer's partition dimension: None when no axis does
    (a broadcast or fixed partition), MULTI when several do."""
    if buf.space == Space.HBM or buf.par_axis >= len(acc.index):
        return None
    axes = sorted({axis_of(v) for v in acc.index[buf.par_axis].vars() if is_axis_var(v)})
    if not axes:
        return None
    if len(axes) > 1:
        return MULTI
    return axes[0]


# ------------------------------------------------------------------------------ masks

def iteration_space(instr: Instr) -> tuple[int, ...] | None:
    if input_space(instr) or not instr.outs:
        for a in instr.ins:
            if isinstance(a, Access):
                return a.shape
        return instr.outs[0].shape if instr.outs else None
    return instr.outs[0].shape


@dataclass
class AccessSpace:
    """Everything needed to ask questions about the points an access touches."""
    extents: dict[str, int]
    cons: tuple[Cmp, ...]
    certain: bool          # False: the mask could not be mapped onto this access (never raise)


def access_space(ctx: Ctx, site: Site, role: str, k: int, acc: Access) -> AccessSpace:
    ext = ctx.extents(site.loops)
    for a, n in enumerate(acc.shape):
        ext[f"@{a}"] = n
    instr = site.instr
    if instr.mask is None or not mask_applies(instr, role, k):
        return AccessSpace(ext, (), True)
    S = iteration_space(instr)
    if S is None or len(S) != len(acc.shape):
        return AccessSpace(ext, (), False)
    mapping: dict[str, Affine] = {}
    for a, (n_acc, n_sp) in enumerate(zip(acc.shape, S)):
        if n_acc == n_sp:
            continue
        if n_acc == 1:
            ev = f"?{a}"
            mapping[f"@{a}"] = Affine.var(ev)
            ext[ev] = n_sp
        else:
            return AccessSpace(ext, (), False)
    cons = instr.mask.subst(mapping).terms if mapping else instr.mask.terms
    # a mask axis the space does not have would be a frontend bug; be conservative
    for c in cons:
        for v in c.expr.vars():
            if v not in ext:
                return AccessSpace(ext, (), False)
    return AccessSpace(ext, tuple(cons), True)


# ------------------------------------------------------------------------------ rendering

def axis_name(k: int, rank: int) -> str:
    if k == 0:
        return "ip"
    return "i_f" if rank == 2 else f"i_f{k}"


def arange_text(k: int, rank: int, n: int) -> str:
    lift = ", ".join(":" if a == k else "None" for a in range(rank))
    return f"nl.arange({n})[{lift}]" if rank > 1 else f"nl.arange({n})"


def render(ctx: Ctx, e: Affine, shape: tuple[int, ...]) -> tuple[str, list[str]]:
    """`e` in the user's terms (loop variables by their source names, axes as ip / i_f) + a legend."""
    rank = len(shape)
    const = e.const
    loops, pids, axes, other = [], [], [], []
    legend: list[str] = []
    for v, c in e.terms:
        if v in ctx.loop_name:
            name, start, step, _ = ctx.loop_name[v]
            if step and c % step == 0:
                k = c // step
                const -= k * start
                loops.append((v, name, k))
            else:
                loops.append((v, v, c))
                legend.append(f"{v} counts the iterations of the loop over `{name}` from 0")
        elif v.startswith("pid"):
            pids.append((v, f"nl.program_id({v[3:]})", c))
        elif is_axis_var(v):
            a = axis_of(v)
            nm = axis_name(a, rank)
            axes.append((v, nm, c))
            n = shape[a] if a < rank else 1
            legend.append(f"{nm} = {arange_text(a, rank, n)}")
        else:
            other.append((v, v, c))
    loops.sort(key=lambda t: int(t[0][1:]) if t[0][1:].isdigit() else 0)
    parts = []
    for _, name, c in loops + pids + axes + other:
        parts.append(name if c == 1 else f"-{name}" if c == -1 else f"{name} * {c}")
    if const or not parts:
        parts.append(str(const))
    text = " + ".join(parts).replace("+ -", "- ")
    return text, legend


def render_point(ctx: Ctx, point: Mapping[str, int], shape: tuple[int, ...], only: set[str] | None = None) -> str:
    items = []
    rank = len(shape)
    keys = sorted(point, key=lambda v: (0 if v in ctx.loop_name else 1 if v.startswith("pid") else 2, v))
    for v in keys:
        if only is not None and v not in only:
            continue
        if v in ctx.loop_name:
            items.append(f"{ctx.var_label(v)}={ctx.user_value(v, point[v])}")
        elif v.startswith("pid"):
            items.append(f"{ctx.var_label(v)}={point[v]}")
        elif is_axis_var(v):
            items.append(f"{axis_name(axis_of(v), rank)}={point[v]}")
    return ", ".join(items)
