"""Verifier rule 13 (allocation_overlap, NL-E505): live directly allocated tiles at the same addresses.

Contract: `check_overlap(ctx)` raises NL-E505 when two logical tiles placed by the kernel itself
(nki.compiler sbuf/psum `.alloc` / `.mod_alloc`; their physical tiles are `Kernel.placements`,
core/placement.py) occupy overlapping memory while both hold a value that is still needed: SBUF
tiles whose partition ranges and byte ranges intersect, PSUM tiles in the same bank (one tile per
bank at a time, NKI's direct allocation guide "Known Limitations"). Both kinds of the guide's
"Lifetime conflicts" are caught: two tensors at overlapping addresses, and one tensor with fewer
physical tiles than it has logical blocks alive at once. It returns None otherwise.

The model is the kernel's program order (the order NKI's semantics define; the hardware compiler
synchronises engines on every reuse of a physical tile). Every executed access of a direct tensor
is an instance (instruction, loop iteration, SPMD program, logical block, allocation instance: a
tensor declared inside a loop is a new tensor every iteration) at a serial time stamp (how many
instructions run before it). A block's value is live from an access to the next access of the
same block; the gap before an access that overwrites the whole block without reading it (unmasked,
not accumulating) is dead. So the documented legal reuses pass: modulo rotation where each block
lives within its own iteration, a tile rewritten every iteration next to another one, tensors with
disjoint lifetimes at one address, and an instruction that reads one block and writes another at
the same place (as an in-place instruction does). Different SPMD programs are separate launches. A PSUM accumulator that only `+=`s matmuls starts its value
at the group's first matmul (which overwrites on hardware), not at the zeroing nki_lite inserts for it.
A mask's terms over loop variables and program ids select the iterations an instruction runs in; its
terms over the tile's elements are ignored (a write of the whole block under such a mask is taken to
end the old value: where that is uncertain the rule stays silent, never reports). A direct tensor reached through a view, or by a
run-time (indirect) index, and kernels whose direct accesses exceed the enumeration budget are not
checked (no error). Pure function of the IR.
"""
from __future__ import annotations

import heapq

import numpy as np

from .. import errors
from ..core.affine import Affine, axis_var
from ..core.ir import Loop, Space
from ..core.ops import accumulates, dynamic_access
from .analysis.accesses import accesses
from .analysis.ranges import enumerate_points
from .verify_common import Ctx, buf_desc, short

_BUDGET = 1 << 22          # access instances enumerated per kernel


def _timeline(kernel) -> tuple[dict[int, int], dict[int, int]]:
    """(base time stamp of each instruction (id) with its loops at iteration 0, instructions one
    iteration of each loop (id) runs): time(site, k) = base + sum(k_j * size(loop_j))."""
    base: dict[int, int] = {}
    size: dict[int, int] = {}
    clock = 0

    def walk(nodes):
        nonlocal clock
        for n in nodes:
            if isinstance(n, Loop):
                c0 = clock
                walk(n.body)
                size[id(n)] = clock - c0
                clock = c0 + max(n.trip, 0) * size[id(n)]
            else:
                base[id(n)] = clock
                clock += 1
    walk(kernel.body)
    return base, size


def _kills(instr, acc, b, reads: set) -> bool:
    """The access writes its whole block without reading the tensor: the old value is dead (a mask on
    the elements may keep part of it: taken as dead too, so the rule stays silent rather than guess)."""
    if accumulates(instr) or b.name in reads or dynamic_access(instr) is not None:
        return False
    p = b.par_axis
    for d in range(p, len(b.shape)):
        e = acc.index[d]
        k = next((int(v[1:]) for v, c in e.terms if v.startswith("@")), None)
        if k is None or e != Affine.var(axis_var(k)) or acc.shape[k] != b.shape[d]:
            return False
    return True


class _Events:
    """Access instances of the direct tensors: (key, time, kill, site) columns; key identifies one
    logical block of one allocation instance in one program."""

    def __init__(self):
        self.keys, self.times, self.kills, self.sites = [], [], [], []
        self.n = 0
        self.names: list[tuple] = []          # key -> (buffer, allocation instance, block, program)
        self._key: dict[tuple, int] = {}

    def add(self, ident: np.ndarray, buffer: str, times, kill: bool, site_no: int) -> bool:
        """ident: int64 rows (allocation instance, block, program) of `buffer`'s accesses at `times`;
        False once the enumeration is over budget."""
        uniq, inv = np.unique(ident, axis=0, return_inverse=True)
        ids = []
        for u in uniq:
            name = (buffer,) + tuple(int(x) for x in u)
            if name not in self._key:
                self._key[name] = len(self.names)
                self.names.append(name)
            ids.append(self._key[name])
        self.keys.append(np.asarray(ids, dtype=np.int64)[inv.reshape(-1)])
        self.times.append(times)
        self.kills.append(np.full(times.shape, kill))
        self.sites.append(np.full(times.shape, site_no, dtype=np.int64))
        self.n += times.size
        return self.n <= _BUDGET


def _collect(ctx: Ctx, placed: dict) -> _Events | None:
    base, size = _timeline(ctx.kernel)
    ev = _Events()
    alloc_loops: dict[str, tuple] = {}
    for s in ctx.sites:
        if s.instr.op == "alloc" and s.instr.outs[0].buffer in placed:
            alloc_loops.setdefault(s.instr.outs[0].buffer, s.loops)
    grid = tuple(ctx.kernel.grid)
    for no, s in enumerate(ctx.sites):
        if s.instr.op == "alloc" or s.instr.attr("group_start") or not s.executes:
            continue         # group_start: the zeroing that stands for a matmul group's overwrite (passes/accumulation_start.py)
        read_names = {a.buffer for role, _, a in accesses(s.instr) if role == "in"}
        # mask terms over loop variables / program ids only say which iterations run the instruction at all
        iteration_mask = tuple(c for c in (s.instr.mask.terms if s.instr.mask is not None else ())
                               if not any(v.startswith("@") for v in c.expr.vars()))
        for role, _, acc in accesses(s.instr):
            if acc.buffer not in placed:
                continue
            b = ctx.buf(acc.buffer)
            p = b.par_axis
            A = alloc_loops.get(acc.buffer, ())
            ext = ctx.extents(s.loops)
            for k, n in enumerate(acc.shape):
                ext[axis_var(k)] = n
            loop_vars = [l.var for l in s.loops]
            pids = [f"pid{k}" for k in range(len(grid))]
            exprs = list(acc.index[:p]) + [Affine.var(v) for v in loop_vars + pids]
            pts = enumerate_points(exprs, ext, iteration_mask, _BUDGET)
            if pts is None:
                return None
            npt = pts[p].size if len(pts) > p else (pts[0].size if pts else 1)
            blk = np.zeros(npt, dtype=np.int64)
            for d, n in enumerate(b.shape[:p]):
                if pts[d].size and (pts[d].min() < 0 or pts[d].max() >= n):
                    return None     # out of bounds: the bounds rule / the interpreter reports it
                blk = blk * n + pts[d]
            it = dict(zip(loop_vars, pts[p:p + len(loop_vars)]))
            t = np.full(npt, base[id(s.instr)], dtype=np.int64)
            for l in s.loops:
                t = t + it[l.var] * size[id(l)]
            inst = np.zeros(npt, dtype=np.int64)
            for l in A:                # the allocation instance: the iteration of the loops around the declaration
                inst = inst * max(l.trip, 1) + (it[l.var] if l.var in it else max(l.trip - 1, 0))
            prog = np.zeros(npt, dtype=np.int64)
            for k, g in enumerate(grid):
                prog = prog * g + pts[p + len(loop_vars) + k]
            kill = role == "out" and _kills(s.instr, acc, b, read_names)
            if not ev.add(np.stack([inst, blk, prog], axis=1), acc.buffer, t, kill, no):
                return None
    return ev


def _intervals(ev: _Events):
    """Live intervals (key, start, end, first site, last site): consecutive accesses of one key, split
    before each killing access."""
    if not ev.n:
        return []
    key = np.concatenate(ev.keys)
    t = np.concatenate(ev.times)
    kill = np.concatenate(ev.kills)
    site = np.concatenate(ev.sites)
    order = np.lexsort((kill, t, key))        # at one time stamp, other accesses before a kill
    key, t, kill, site = key[order], t[order], kill[order], site[order]
    new = np.ones(key.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]) | (kill[1:] & (t[1:] > t[:-1]))
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], key.size) - 1
    return [(int(key[a]), int(t[a]), int(t[e]), int(site[a]), int(site[e])) for a, e in zip(starts, ends)]


def live_blocks(ctx: Ctx, names) -> dict[str, int]:
    """The most logical blocks of each named on-chip tensor that hold a value at the same time, over the
    serial order of this module's event model (an access to the next access of the block, dead before a
    whole-block overwrite; SPMD programs apart). Used by the capacity rule for automatically allocated
    block tensors (lower/footprints.py `refine_blocks`); {} when the enumeration is over budget."""
    ev = _collect(ctx, dict.fromkeys(names))
    if ev is None:
        return {}
    by: dict[tuple, list] = {}
    for key, start, end, _, _ in _intervals(ev):
        name, _, _, prog = ev.names[key]
        by.setdefault((name, prog), []).extend(((start, 0), (end, 1)))
    out: dict[str, int] = {}
    for (name, _), marks in by.items():
        run = peak = 0
        for _, kind in sorted(marks):      # at one time stamp a start counts before an end: both live
            run += 1 if kind == 0 else -1
            peak = max(peak, run)
        out[name] = max(out.get(name, 0), peak)
    return out


def _overlap(x, y, psum: bool) -> bool:
    parts = x.partition < y.partition + y.pdim and y.partition < x.partition + x.pdim
    if psum:
        return x.bank == y.bank and parts
    return parts and x.addr < y.end and y.addr < x.end


def check_overlap(ctx: Ctx) -> None:
    placed = {n: tiles for n, tiles in getattr(ctx.kernel, "placements", ()) if n in ctx.kernel.buffer_map}
    if not placed:
        return
    bufs = ctx.kernel.buffer_map
    if any(b.base in placed for b in bufs.values() if b.base is not None):
        placed = {n: t for n, t in placed.items() if not any(b.base == n for b in bufs.values())}
    ev = _collect(ctx, placed)
    if ev is None:
        return
    by_prog: dict[tuple, list] = {}
    for iv in _intervals(ev):
        name, inst, blk, prog = ev.names[iv[0]]
        space = bufs[name].space
        by_prog.setdefault((prog, space), []).append(iv)
    for (prog, space), ivs in by_prog.items():
        ivs.sort(key=lambda iv: (iv[1], iv[2]))
        active: list = []                       # heap of (end, n, interval)
        for n, iv in enumerate(ivs):
            while active and active[0][0] <= iv[1]:
                heapq.heappop(active)
            me = ev.names[iv[0]]
            tile = placed[me[0]][me[2]]
            for _, _, other in active:
                o = ev.names[other[0]]
                if o != me and _overlap(placed[o[0]][o[2]], tile, space == Space.PSUM):
                    _raise(ctx, me, iv, o, other, placed)
            heapq.heappush(active, (iv[2], n, iv))


def _block(b, blk: int) -> str:
    dims = b.shape[:b.par_axis]
    if not dims:
        return ""
    idx = []
    for n in reversed(dims):
        idx.append(blk % n)
        blk //= n
    return f" block {tuple(reversed(idx))}"


def _where(t) -> str:
    if t.bank >= 0:
        return f"PSUM bank {t.bank}, partitions {t.partition}..{t.partition + t.pdim - 1}"
    return f"SBUF partitions {t.partition}..{t.partition + t.pdim - 1}, bytes {t.addr}..{t.end - 1}"


def _raise(ctx: Ctx, me, iv, o, other, placed) -> None:
    """NL-E505 at the access that starts `me`'s value while `o`'s value (an earlier write, read later) is live."""
    site = ctx.sites[iv[3]]
    a, b = ctx.buf(me[0]), ctx.buf(o[0])
    old, new = f"'{b.name}'{_block(b, o[2])}", f"'{a.name}'{_block(a, me[2])}"
    same = me[0] == o[0] and me[1] == o[1]
    what = (f"logical{_block(b, o[2])} and{_block(a, me[2])} of '{a.name}' {buf_desc(a)} share a physical tile" if same
            else f"{old} {buf_desc(b)} and {new} {buf_desc(a)} are placed at overlapping addresses")
    notes = (f"  {old} at {_where(placed[o[0]][o[2]])} (declared at {short(b.loc)}) holds a value from "
             f"{short(ctx.sites[other[3]].loc)} that is read again at {short(ctx.sites[other[4]].loc)}",
             f"  {new} at {_where(placed[me[0]][me[2]])} (declared at {short(a.loc)}) is written here, in between")
    hint = ("give the tensor as many physical tiles as it has blocks alive at once (num_free_tiles= / "
            "num_par_tiles= / num_bank_tiles=), or declare it inside the loop that uses it" if same else
            "move one tensor's base_addr / base_partition / base_bank past the other's tiles, or end the first "
            "tensor's use before the second is written")
    raise errors.make("allocation_overlap",
                      f"directly allocated tiles overlap while both are live: {what}; {new} is written while {old} "
                      "still holds a value that is read later (on hardware the write destroys it)",
                      loc=site.loc, notes=notes, hint=hint)
