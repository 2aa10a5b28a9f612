"""The interpreter's machine: memory (buffer contents by name, on-chip tiles created on first touch)
and execution state of one kernel run, with the hooks runtime/debug_checks.py overrides.

Contract: `Machine(kernel, inputs).run()` executes the kernel (rules from the op registry's
"interpret" backend, loaded by runtime/interpreter.py); `fill_uninit(arr, dtype)` fills an array
the way uninitialised memory reads (NaN; integers: a sentinel; bool: True) — the JIT's
prefilled outputs use it too.
"""
from __future__ import annotations

import itertools
from typing import Mapping

import numpy as np

from .. import errors, hostmem
from ..core import dtypes as D
from ..core import ir
from ..core.affine import Mask, axis_of, is_axis_var
from ..core.bits import UNINIT_SENTINEL
from ..core.ops import OPS
from ..lower import analysis


def fill_uninit(arr: np.ndarray, dtype: str) -> None:
    info = D.INFO[dtype]
    if info.kind == "f":
        arr[...] = np.float32("nan")
    elif info.kind == "b":
        arr[...] = True
    else:
        arr[...] = UNINIT_SENTINEL[dtype]


class _Memory(dict):
    """Buffer contents by name; an on-chip tile is created (uninitialised) on first touch, so dead
    tiles can be dropped (lower/analysis/liveness.py) and an unrolled kernel of 10^5 temporaries holds only
    its live tiles."""

    def __init__(self, machine: "Machine"):
        super().__init__()
        self.machine = machine

    def __missing__(self, name: str) -> np.ndarray:
        arr = self[name] = self.machine.new_array(self.machine.buffers[name])
        return arr


class Machine:
    """Memory and execution state for one kernel run."""

    def __init__(self, kernel: ir.Kernel, inputs: Mapping[str, np.ndarray]):
        self.kernel = kernel
        self.buffers = kernel.buffer_map
        self.mem: dict[str, np.ndarray] = _Memory(self)
        self.dead_after = analysis.of(kernel).liveness.free_after     # id(node) -> tiles dead once it ran
        self._plans: dict[int, tuple] = {}          # id(access) -> (access, its `_plan`)
        viewed = {b.base for b in kernel.buffers if b.base is not None}
        self._reusable = {b.name for b in kernel.buffers           # tiles whose arrays `release` keeps
                          if b.space != ir.Space.HBM and b.base is None and b.name not in viewed}
        self._spare: dict[tuple, list[np.ndarray]] = {}            # (shape, dtype) -> released arrays
        self._spare_bytes = 0
        for b in kernel.buffers:
            if b.space == ir.Space.HBM and b.base is None:
                if b.kind == "input":
                    self.mem[b.name] = np.array(inputs[b.name], dtype=D.storage(b.dtype), order="C", copy=True)
                elif b.kind == "const":
                    self.mem[b.name] = np.array(dict(kernel.consts)[b.name].array, copy=True)
                else:
                    self.mem[b.name] = self.new_array(b)
        self.bind_views()

    def bind_views(self, bases=None) -> None:
        """Point each HBM view buffer (a reshape or a dtype view, tensor.view / .ap(dtype=)) at its base's
        current array: the same bytes in the view's shape and dtype. bases: only views of these."""
        for b in self.kernel.buffers:
            if b.base is not None and (bases is None or b.base in bases):
                self.mem[b.name] = self.mem[b.base].reshape(-1).view(D.storage(b.dtype)).reshape(b.shape)

    def new_array(self, b: ir.Buffer) -> np.ndarray:
        # keyed by the dtype object: custom dtypes (ml_dtypes' float8 kinds) share a `.str`
        spare = self._spare.get((tuple(b.shape), np.dtype(D.storage(b.dtype))))
        if spare:
            arr = spare.pop()
            self._spare_bytes -= arr.nbytes
        else:
            arr = hostmem.empty(b.shape, D.storage(b.dtype), f"'{b.name}' {b.shape} ({b.dtype})", b.loc)
        fill_uninit(arr, b.dtype)
        return arr

    def release(self, name: str) -> None:
        """Drop a dead on-chip tile. Its array is kept (up to SPARE_BYTES in all) for the next tile
        of the same shape and dtype: `new_array` fills it afresh, and reusing memory spares the
        allocation and the page faults of a new one (a tile allocated in a loop body is dropped and
        made again every iteration). Only tiles nothing else can reference are kept: no view is
        made of them, and every read returns a copy."""
        arr = self.mem.pop(name, None)
        if (arr is not None and name in self._reusable and arr.base is None
                and self._spare_bytes + arr.nbytes <= self.SPARE_BYTES):
            self._spare.setdefault((arr.shape, arr.dtype), []).append(arr)
            self._spare_bytes += arr.nbytes

    SPARE_BYTES = 1 << 28

    # ---- execution
    def run(self) -> None:
        for pid in self.programs():
            env = {f"pid{k}": v for k, v in enumerate(pid)}
            fresh = set()
            for b in self.kernel.buffers:        # private on-chip / private HBM per program
                if b.space != ir.Space.HBM:
                    self.release(b.name)             # made fresh on first touch
                elif b.kind == "local" and b.hbm_kind != "shared_hbm" and b.base is None:
                    self.mem[b.name] = self.new_array(b)
                    fresh.add(b.name)
            self.bind_views(fresh)               # views of a fresh private tensor see the new array
            self.exec(self.kernel.body, env)

    def exec(self, nodes, env: dict) -> None:
        for n in nodes:
            if isinstance(n, ir.Loop):
                self.loop(n, env)
            else:
                self.step(n, env)
            for name in self.dead_after.get(id(n), ()):
                self.release(name)

    # Hooks overridden by runtime/debug_checks.py (program and iteration order, per-instruction checks).
    def programs(self):
        """The SPMD program ids, in execution order (row-major)."""
        return itertools.product(*[range(g) for g in self.kernel.grid or ()])

    def loop(self, n: ir.Loop, env: dict) -> None:
        if n.dynamic:
            self.dynamic_loop(n, env)
            return
        for v in range(n.trip):
            env[n.var] = v
            self.exec(n.body, env)
        env.pop(n.var, None)

    def dynamic_loop(self, n: ir.Loop, env: dict) -> None:
        """A run-time trip count (interpret_registers.py); the loop variable is 0 in every iteration (no
        affine index uses it), the value goes to the loop's value register."""
        from .interpret_registers import dynamic_trips
        value = n.bounds[2]
        for v in dynamic_trips(self, n, env):
            if value is not None:
                self.mem[value.buffer][...] = v
            env[n.var] = 0
            self.exec(n.body, env)
        env.pop(n.var, None)

    def step(self, instr: ir.Instr, env: dict) -> None:
        OPS[instr.op].rules["interpret"](self, instr, env)

    # ---- memory access
    def _indices(self, acc: ir.Access, env, mask: np.ndarray | None, instr: ir.Instr):
        resolved = getattr(acc, "resolved", None)    # an indirect access, indices already computed
        if resolved is not None:                     # (and checked) by interpret_indirect.py
            return resolved
        buf = self.buffers[acc.buffer]
        shape = acc.shape
        idx = []
        for d, e in enumerate(acc.index):
            v = np.broadcast_to(np.asarray(e.evaluate(env, shape), dtype=np.int64), shape)
            lim = buf.shape[d]
            live = v if mask is None else v[mask]
            if live.size and (live.min() < 0 or live.max() >= lim):
                lo, hi = int(live.min()), int(live.max())
                where = ", ".join(f"{k}={val}" for k, val in sorted(env.items()))
                raise errors.make("out_of_bounds",
                                  f"access to '{buf.name}' (shape {buf.shape}) on dimension {d}: index range "
                                  f"[{lo}, {hi}] exceeds [0, {lim - 1}]" + (f" when {where}" if where else ""),
                                  loc=instr.loc)
            if mask is not None:
                v = np.where(mask, v, 0)
            idx.append(v)
        return tuple(idx)

    def eval_mask(self, instr: ir.Instr, env, shape) -> np.ndarray | None:
        """The instruction's mask at these loop values, or None when it selects every element: a
        true-everywhere mask means what no mask means in every rule (the bounds checks see the same
        elements), and None lets the accesses take the strided-view path (`_slices`), e.g. the
        full tiles of a loop whose last tile is ragged."""
        m: Mask | None = instr.mask
        if m is None:
            return None
        v = m.evaluate(env, shape)
        return None if v.all() else v

    def _slices(self, acc: ir.Access, env, mask, for_write: bool):
        """The access as basic indexing (a strided view, no index arrays) when that is the same
        elements in the same order: no mask, no indirect indices, each dimension's index uses at
        most one tile axis, each tile axis at most one dimension, in ascending order, every index in
        bounds (else None: the general path checks and reports). Returns (index tuple, view shape
        before broadcasting to acc.shape). What does not depend on the loop values is worked out
        once per access (`_plan`); here only the starts and the bounds are computed."""
        if mask is not None or getattr(acc, "resolved", None) is not None:
            return None
        plan = self._plan(acc)
        if plan is None or (for_write and plan[2] is None):
            return None            # (for a write: an axis no dimension uses, many values to one element)
        idx = []
        for start, terms, step, n, lim in plan[0]:
            for k, v in terms:
                start += v * env[k]
            if step is None:
                if not 0 <= start < lim:
                    return None
                idx.append(start)
                continue
            end = start + step * (n - 1)
            if not (0 <= start < lim and 0 <= end < lim):
                return None
            stop = end + (1 if step > 0 else -1)
            idx.append(slice(start, stop if stop >= 0 else None, step))
        return tuple(idx), plan[1]

    def _plan(self, acc: ir.Access):
        """`_slices`' loop-independent part, cached by access (the object is kept with its plan, so
        a new access that reuses a dead one's id is planned afresh): per dimension (constant,
        loop-variable terms, step or None for no tile axis, axis length, dimension size), the
        view shape, and the written view's shape (None when the access cannot be written so)."""
        hit = self._plans.get(id(acc))
        if hit is not None and hit[0] is acc:
            return hit[1]
        plan = self._make_plan(acc)
        self._plans[id(acc)] = (acc, plan)
        return plan

    def _make_plan(self, acc: ir.Access):
        shape = acc.shape
        lims = self.buffers[acc.buffer].shape
        if len(acc.index) != len(lims):
            return None
        dims, vshape, last = [], [1] * len(shape), -1
        for e, lim in zip(acc.index, lims):
            axis, step, terms = None, None, []
            for k, v in e.terms:
                if is_axis_var(k):
                    if axis is not None:
                        return None
                    axis, step = axis_of(k), v
                else:
                    terms.append((k, v))
            if axis is not None:
                if axis <= last or shape[axis] == 0:
                    return None
                last = axis
                vshape[axis] = shape[axis]
            dims.append((e.const, tuple(terms), step, 1 if axis is None else shape[axis], lim))
        vshape = tuple(vshape)
        wshape = tuple(d[3] for d in dims if d[2] is not None) if vshape == tuple(shape) else None
        return tuple(dims), vshape, wshape

    def read(self, acc: ir.Access, env, instr: ir.Instr, mask=None) -> np.ndarray:
        fast = self._slices(acc, env, mask, False)
        if fast is not None:       # a copy, as fancy indexing returns: rules may modify what they read
            view = self.mem[acc.buffer][fast[0]].reshape(fast[1])
            return np.array(view if fast[1] == acc.shape else np.broadcast_to(view, acc.shape))
        return self.mem[acc.buffer][self._indices(acc, env, mask, instr)]

    def write(self, acc: ir.Access, env, values: np.ndarray, instr: ir.Instr, mask=None) -> None:
        arr = self.mem[acc.buffer]
        fast = self._slices(acc, env, mask, True)
        if fast is not None:
            if getattr(values, "shape", None) != acc.shape:
                values = np.broadcast_to(values, acc.shape)
            arr[fast[0]] = values.reshape(self._plan(acc)[2])
            return
        idx = self._indices(acc, env, mask, instr)
        values = np.broadcast_to(values, acc.shape)
        if mask is None:
            arr[idx] = values
        else:
            arr[tuple(i[mask] for i in idx)] = values[mask]

    def dtype_of(self, acc: ir.Access) -> str:
        return self.buffers[acc.buffer].dtype
