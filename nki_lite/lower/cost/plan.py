"""Static preparation of the schedule (schedule.py): everything about a kernel the simulation needs, once.

Contract: `Plan(kernel, target)` holds, per instruction, its cost (rules.py; for masked DMAs the
cost per value of the mask's loop variables, `Plan.cost`), the regions it reads and writes as
per-dimension boxes (`AccInfo`: constant bounds over the tile axes plus loop-variable coefficients;
HBM buffers with reshaped views as flat element ranges, lower/analysis/accesses.py), the physical
copies each allocated tile rotates over (`AllocPlan`), and which PSUM memsets fold into the
accumulating matmul that follows them. The SPMD grid is wrapped as outer affine loops over the
program ids. Pure: nothing here simulates time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ...core import dtypes as D
from ...core.affine import axis_of, is_axis_var
from ...core.ir import Access, Instr, Kernel, Loop, Space, walk
from ...core.targets import Target
from ..analysis.accesses import flat_index, root_name, roots_with_views
from ...core.ops import accumulates, dynamic_access, is_dma, reads as op_reads
from .bcast import add_broadcasts
from .engines import balance as balance_engines
from .hoist import hoist as hoist_loads
from .rules import Cost, CostCtx, cost_of
from .spill import add_spills



@dataclass
class AccInfo:
    root: str
    buf: str
    on_chip: bool
    base_lo: tuple
    base_hi: tuple
    coef: dict            # loop var -> tuple of per-dimension coefficients
    nblock: int = 0       # leading block dimensions (before the partition dimension)

    def __post_init__(self):
        # (var, ((dim, coefficient), ...)) for the non-zero coefficients: box() is on the hot path
        self._terms = tuple((v, tuple((d, c) for d, c in enumerate(cs) if c)) for v, cs in self.coef.items()
                            if any(cs))

    def box(self, env) -> tuple[tuple, tuple]:
        if not self._terms:
            return self.base_lo, self.base_hi
        lo, hi = list(self.base_lo), list(self.base_hi)
        for v, dcs in self._terms:
            x = env[v]
            if x:
                for d, c in dcs:
                    lo[d] += c * x
                    hi[d] += c * x
        return tuple(lo), tuple(hi)


@dataclass
class InstrInfo:
    instr: Instr
    cost: Cost | None
    reads: list
    writes: list
    folded: bool = False
    mask_vars: tuple = ()
    loc: str = ""
    shape: str = ""
    label: str = ""
    hoist: object = None      # hoist.Hoist: executions served by a hoisted copy (loop-invariant load)


@dataclass
class AllocPlan:
    slots: dict                 # buffer -> physical copies
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    loop_local: set


def _affine_box(exprs, shape):
    """Per-dimension box pieces of an access (one piece for a flat index): constant lo/hi over the
    axis vars and loop-variable coefficients."""
    lo, hi, coef = [], [], {}
    for d, e in enumerate(exprs):
        l = h = e.const
        for v, c in e.terms:
            if is_axis_var(v):
                span = c * (shape[axis_of(v)] - 1)
                l += min(0, span)
                h += max(0, span)
            else:
                coef.setdefault(v, [0] * len(exprs))[d] = c
        lo.append(l)
        hi.append(h)
    return tuple(lo), tuple(hi), {v: tuple(c) for v, c in coef.items()}


class Plan:
    """Everything about a kernel the schedule needs, computed once."""

    def __init__(self, kernel: Kernel, target: Target, hoist: bool = True, spill: bool = True,
                 bcast: bool = True):
        # partition broadcasts through TensorE and a PSUM copy, as the compiler lowers them (bcast.py)
        kernel, self.scratch = add_broadcasts(kernel, target) if bcast else (kernel, frozenset())
        # the compiler's spill saves and reloads where live SBUF exceeds capacity (spill.py)
        kernel, self.spill_fraction = add_spills(kernel, target) if spill else (kernel, {})
        self.kernel = kernel
        self.target = target
        self.bufs = kernel.buffer_map
        self.root = {name: root_name(self.bufs, name) for name in self.bufs}
        viewed = roots_with_views(kernel)
        self.linear = {n for n in self.bufs if self.root[n] in viewed}
        self.body = self._grid_wrap(kernel)
        self.written = set()
        for ins, _ in walk(self.body):
            for o in ins.outs:
                self.written.add(self.root[o.buffer])
        self.alloc = self._alloc_plan()
        self.info: dict[int, InstrInfo] = {}
        self.hoist_breaks: dict = {}        # loop var -> values where hoisting changes the body (hoist.py)
        instrs = list(walk(self.body))
        for ins, loops in instrs:
            self.info[id(ins)] = self._info(ins)
        self._fold_masked_matmuls(self.body)
        self._fold_memsets(self.body)
        balance_engines(self)
        if hoist:                           # (False: every load as written, for traffic analyses)
            hoist_loads(self)

    # ---- structure
    @staticmethod
    def _grid_wrap(kernel: Kernel):
        body = kernel.body
        for k in reversed(range(len(kernel.grid))):
            body = (Loop(f"pid{k}", kernel.grid[k], "affine", body, loc=kernel.loc),)
        return body

    def _alloc_plan(self) -> AllocPlan:
        t = self.target
        loop_local, top = set(), set()
        for ins, loops in walk(self.body):
            if ins.op == "alloc":
                (loop_local if loops else top).add(ins.out.buffer)
        slots = {n: 1 for n in self.bufs}

        def bpp(b):
            per = b.size // max(1, b.shape[b.par_axis]) if b.shape else 1
            return per * D.INFO[b.dtype].itemsize

        # the broadcast tiles (bcast.py) live from their fill to their one reader, adjacent
        # instructions: double-buffered like loop tiles, but outside this live-range-free footprint
        # (which the hoisting room and the PSUM bank rotation of the kernel's own tiles come from)
        for n in self.scratch:
            slots[n] = max(1, t.sbuf_loop_tile_buffers)
        sb = [n for n, b in self.bufs.items() if b.space == Space.SBUF and n not in self.scratch]
        for n in sb:
            if n in loop_local:
                slots[n] = max(1, t.sbuf_loop_tile_buffers)
        while sum(bpp(self.bufs[n]) * slots[n] for n in sb) > t.sbuf_partition_bytes:
            cand = [n for n in sb if slots[n] > 1]
            if not cand:
                break
            big = max(cand, key=lambda n: (bpp(self.bufs[n]) * slots[n], n))
            slots[big] = 1
        ps = [n for n, b in self.bufs.items() if b.space == Space.PSUM and n not in self.scratch]

        def banks(b):
            return max(1, math.ceil(bpp(b) / t.psum_bank_bytes))
        fixed = sum(banks(self.bufs[n]) for n in ps if n not in loop_local)
        local = [n for n in ps if n in loop_local]
        need = sum(banks(self.bufs[n]) for n in local)
        if need:
            k = max(1, (t.psum_banks - fixed) // need)
            for n in local:
                slots[n] = k
        sbuf_hw = sum(bpp(self.bufs[n]) * slots[n] for n in sb)
        psum_hw = sum(bpp(self.bufs[n]) * slots[n] for n in ps)
        return AllocPlan(slots, sbuf_hw, psum_hw, loop_local)

    def _acc(self, a: Access, dyn_dim: int | None = None) -> AccInfo:
        b = self.bufs[a.buffer]
        on_chip = b.space != Space.HBM
        if a.buffer in self.linear:            # views alias their root: compare flat element ranges
            lo, hi, coef = _affine_box([flat_index(b.shape, a.index)], a.shape)
            sizes = (b.size,)
            if dyn_dim is not None:
                dyn_dim = 0                    # the flat offset: any element of the view
        else:
            lo, hi, coef = _affine_box(a.index, a.shape)
            sizes = b.shape
        if dyn_dim is not None:                # run-time indices (dma_indirect): the whole dimension
            lo = tuple(0 if d == dyn_dim else x for d, x in enumerate(lo))
            hi = tuple(sizes[d] - 1 if d == dyn_dim else x for d, x in enumerate(hi))
            coef = {v: tuple(0 if d == dyn_dim else c for d, c in enumerate(cs)) for v, cs in coef.items()}
        nblock = b.par_axis if on_chip and a.buffer not in self.linear else 0
        return AccInfo(self.root[a.buffer], a.buffer, on_chip, lo, hi, coef, nblock)

    def _info(self, ins: Instr) -> InstrInfo:
        reads, writes = [], []
        if ins.op != "alloc":
            dyn = dynamic_access(ins)
            for a in op_reads(ins):
                if self.root[a.buffer] in self.written:
                    reads.append(self._acc(a, dyn[2] if dyn and dyn[0] == "in" and a is ins.ins[0] else None))
            for a in ins.outs:
                writes.append(self._acc(a, dyn[2] if dyn and dyn[0] == "out" else None))
        mask_vars = ()
        if ins.mask is not None:
            mask_vars = tuple(sorted(v for v in ins.mask.vars() if not is_axis_var(v)))
        cost = None
        if ins.mask is None or not is_dma(ins):
            cost = self._spill_scaled(ins, cost_of(ins, CostCtx(self.target, self.bufs)))
        elif not mask_vars:
            cost = self._spill_scaled(ins, cost_of(ins, CostCtx(self.target, self.bufs, active=self._active(ins, {}))))
        loc = f"{ins.loc.file.rsplit('/', 1)[-1]}:{ins.loc.line}" if ins.loc else ""
        shape = "x".join(map(str, ins.outs[0].shape)) if ins.outs else ""
        label = cost.opcode if cost is not None else ins.op
        return InstrInfo(ins, cost, reads, writes, False, mask_vars, loc, shape, label)

    def _active(self, ins: Instr, env) -> int:
        shape = ins.outs[0].shape
        return int(np.count_nonzero(ins.mask.evaluate(env, shape)))

    def cost(self, inf: InstrInfo, env) -> Cost:
        if inf.cost is not None:
            return inf.cost
        key = tuple(env[v] for v in inf.mask_vars)
        cache = getattr(inf, "_cache", None)
        if cache is None:
            cache = inf._cache = {}
        c = cache.get(key)
        if c is None:
            c = cache[key] = self._spill_scaled(inf.instr, cost_of(inf.instr, CostCtx(
                self.target, self.bufs, active=self._active(inf.instr, env))))
        return c

    def _spill_scaled(self, ins: Instr, c: Cost) -> Cost:
        """A spill DMA moves only its buffer's spilled share of the tile (spill.py): bytes and queue
        time scale with it; descriptors do not (each tile's transfer is still one set of descriptors)."""
        f = self.spill_fraction.get(id(ins))
        if f is None:
            return c
        return replace(c, ns=c.ns * f, dma_bytes=round(c.dma_bytes * f), hbm_read_bytes=round(c.hbm_read_bytes * f),
                       hbm_write_bytes=round(c.hbm_write_bytes * f))

    def _fold_masked_matmuls(self, nodes):
        """A masked `nc_matmul` is traced as a matmul into a fresh PSUM tile followed by a masked
        vector add (accumulate) or copy into the destination PSUM tile (lang/tile.py). On hardware
        it is one matmul accumulating in PSUM near-memory (§3.2): the add/copy is folded into it
        (scheduled on TensorE's stream at no cost) when the temporary has no other reader."""
        flat = [n for n, _ in walk(nodes)]
        nreads: dict = {}
        for ins in flat:
            for a in op_reads(ins):
                nreads[a.buffer] = nreads.get(a.buffer, 0) + 1
        for prev, ins in zip(flat, flat[1:]):
            if prev.op != "nc_matmul" or ins.mask is None or ins.op not in ("tensor_tensor", "tensor_copy"):
                continue
            tmp = prev.out.buffer
            srcs = [a.buffer for a in ins.ins if isinstance(a, Access)]
            if (tmp not in srcs or nreads.get(tmp) != 1 or self.bufs[tmp].space != Space.PSUM
                    or self.bufs[ins.out.buffer].space != Space.PSUM):
                continue
            if ins.op == "tensor_tensor" and (dict(ins.attrs).get("op") != "add" or srcs != [ins.out.buffer, tmp]):
                continue
            self.info[id(ins)].folded = True

    def _fold_memsets(self, nodes):
        """PSUM memset(0) followed (as the next access to that buffer) by a matmul into it: an
        accumulating one, or one the accumulation-start pass made overwrite (§3.2: the first
        matmul of an accumulation group overwrites the bank, so the zeroing is never needed)."""
        flat = [n for n, _ in walk(nodes)]
        for k, ins in enumerate(flat):
            if ins.op != "memset" or self.bufs[ins.out.buffer].space != Space.PSUM:
                continue
            v = ins.ins[0]
            if getattr(v, "value", None) != 0:
                continue
            buf = ins.out.buffer
            for nxt in flat[k + 1:]:
                touched = {o.buffer for o in nxt.outs} | {o.buffer for o in nxt.ins if isinstance(o, Access)}
                if buf not in touched:
                    continue
                # (a folded masked-matmul add is the accumulating matmul itself; a matmul that
                # overwrites is the first of its group after lower/passes' accumulation-start pass)
                acc = accumulates(nxt) or (nxt.op == "tensor_tensor" and self.info[id(nxt)].folded) \
                    or nxt.op == "nc_matmul"
                if acc and nxt.out.buffer == buf:
                    self.info[id(ins)].folded = True
                break
