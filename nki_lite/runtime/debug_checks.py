"""Run-time debug checks of the interpreter: NaN creation, uninitialised reads, cross-iteration races.

Contract: `machine_class(kernel)` returns the interpreter's `Machine` when no check is on, else
`CheckingMachine`, a subclass hooked in at the interpreter's `read`, `write`, `step`, `loop` and
`programs` methods (results are unchanged; the checks only observe, the shuffle only reorders
iterations that are proven not to accumulate). The knobs (nki_lite/config.py, read at call time):

- NKI_LITE_DEBUG_NANS=1: after every write, an element that is NaN although no input element it
  depends on was NaN raises NL-E903 at the instruction's line (op, tile, element). NaN inputs
  propagating are not errors, and neither is reading NaN-filled uninitialised memory (that is the
  uninitialised-read check's business).
- NKI_LITE_DEBUG_UNINIT=1 (off by default: BAD_INPUTS row 17 makes it a debug check, like NKI's
  simulator the default interpreter NaN-fills new memory and lets it show in results; and it costs
  1.3-2.3x interpreter time on the AWS tutorial kernels): a shadow state per element of every buffer — never written, written, or written with a value
  computed from never-written memory ("tainted"), like valgrind's memcheck. Tainted values may
  flow through tiles freely (a masked load followed by unmasked compute and a masked store is
  valid NKI); only when a tainted value is still in a kernel output at the end does NL-E902 name
  the instruction that read the never-written element (tile, element, allocation line) and the
  store that carried it out. Masked-off elements are not read; `alloc` makes a tile unwritten
  again (a tile allocated inside a loop is fresh in every iteration); PSUM `+=` reads its target.
- NKI_LITE_SHUFFLE=<seed>: `affine_range` iterations and SPMD programs run in a seeded random
  order (loops that accumulate into a buffer from outside them keep their order, so results stay
  bit-identical for every seed), and every element records which iteration of each enclosing
  affine loop (or which program) last wrote and read it: another iteration's write followed by a
  read (RAW), a write (WAW) or a write after another iteration's read (WAR) raises NL-E601
  (loops) or NL-E602 (programs) naming both lines. Iteration-private buffers (allocated inside the
  loop; private HBM scratch declared in it) and the accumulation idioms verify_deps exempts (PSUM `+=`, `acc[...] += x`) are not races.

Which input elements an output element depends on (`depends`): element-wise with broadcasting
for operands of the output's shape, the transpose for `transpose`, rows x columns for `nc_matmul`,
prefixes for `tensor_tensor_scan`, the whole partition row otherwise (reductions, statistics,
top-8), and the whole operand when partitions differ.
"""
from __future__ import annotations

import numpy as np

from .. import config, errors
from ..core import dtypes as D
from ..core import ir
from ..core.ops import accumulates
from ..lower.analysis.dependence import hbm_shared_across as _hbm_shared_across
from .machine import Machine

NEVER, WRITTEN, TAINTED = 0, 1, 2


class RoundingOverflowWarning(UserWarning):
    """Under NKI_LITE_DEBUG_NANS=1: finite values became inf/NaN when rounded to a narrow float dtype."""


# ------------------------------------------------------------------------------ which checks are on

def uninit_enabled() -> bool:
    return bool(config.get("NKI_LITE_DEBUG_UNINIT"))


def shuffle_seed() -> int | None:
    v = config.get("NKI_LITE_SHUFFLE")
    return None if v == "" else int(v)


def jit_needs_interpreter() -> bool:
    """A JIT call runs in the interpreter when a check the JIT does not implement is requested."""
    return bool(config.get("NKI_LITE_DEBUG_NANS")) or uninit_enabled() or shuffle_seed() is not None


def machine_class(kernel: ir.Kernel):
    if config.get("NKI_LITE_DEBUG_NANS") or uninit_enabled() or shuffle_seed() is not None:
        return CheckingMachine
    return Machine


# ------------------------------------------------------------------------------ dependency projection

def depends(op: str, reads: list, shape: tuple[int, ...]) -> np.ndarray:
    """For each element of an output of `shape`: does any input element it depends on have the
    property given by the boolean maps `reads` (one per operand read, in the rule's read order;
    None: no element has it)?"""
    out = np.zeros(shape, dtype=bool)
    if all(r is None for r in reads):
        return out
    if op == "nc_matmul" and len(reads) >= 2 and len(shape) == 2:
        s, mv = reads[0], reads[1]
        if s is not None:
            out |= np.broadcast_to(s.reshape(s.shape[0], -1).any(axis=0)[:, None], shape)
        if mv is not None:
            out |= np.broadcast_to(mv.reshape(mv.shape[0], -1).any(axis=0)[None, :], shape)
        for r in reads[2:]:
            if r is not None:
                out |= _project(r, shape)
        return out
    if op == "transpose" and len(shape) == 2 and reads[0] is not None and reads[0].ndim == 2:
        return _project(reads[0].T, shape)
    for r in reads:
        if r is not None:
            out |= _project(r, shape)
    if op == "tensor_tensor_scan" and out.ndim >= 2:
        flat = out.reshape(out.shape[0], -1)
        out = np.logical_or.accumulate(flat, axis=1).reshape(shape)
    return out


def _project(r: np.ndarray, shape) -> np.ndarray:
    if not r.any():
        return np.zeros(shape, dtype=bool)
    if r.ndim == len(shape) and all(a in (1, b) for a, b in zip(r.shape, shape)):
        return np.broadcast_to(r, shape)
    if r.ndim and len(shape) and r.shape[0] == shape[0]:
        rows = r.reshape(r.shape[0], -1).any(axis=1)
        return np.broadcast_to(rows.reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    return np.broadcast_to(np.bool_(r.any()), shape)


def _first(m: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(m)[0]), m.shape))


def _op_name(instr: ir.Instr) -> str:
    fn = [str(instr.attr(a)) for a in ("func", "op", "op0", "op1") if instr.attr(a)]
    return instr.op + (f"({', '.join(fn)})" if fn else "")


def _where(loc) -> str:
    return str(loc) if loc is not None else "<unknown>"


# ------------------------------------------------------------------------------ the checking machine

class _Read:
    __slots__ = ("undef", "nan", "origin", "nonfinite")

    def __init__(self, undef, nan, origin, nonfinite=None):
        self.undef, self.nan, self.origin, self.nonfinite = undef, nan, origin, nonfinite


class CheckingMachine(Machine):
    """The interpreter plus the checks selected by the knobs (module contract)."""

    def __init__(self, kernel: ir.Kernel, inputs):
        self.check_nans = bool(config.get("NKI_LITE_DEBUG_NANS"))
        self.check_uninit = uninit_enabled()
        seed = shuffle_seed()
        self.rng = None if seed is None else np.random.default_rng(seed)
        self.state: dict[str, np.ndarray] = {}        # root buffer -> NEVER/WRITTEN/TAINTED per element
        self.taint_origin: dict[str, tuple] = {}       # root buffer -> (read loc, tile, element, alloc loc)
        self.output_taints: dict[str, list] = {}       # output root -> [(flat element, origin, store loc)]
        self.reads: list[_Read] = []
        self.trackers: list[_Tracker] = []
        self.loop_info: dict[int, tuple[set, bool]] = {}
        self.overflows: dict[tuple, int] = {}          # (loc, dtype) -> elements that overflowed on rounding
        super().__init__(kernel, inputs)
        for b in kernel.buffers:
            if b.base is None and b.name not in self.state:
                self.state[b.name] = np.full(b.shape, WRITTEN, dtype=np.uint8)   # inputs and constants
        self.outputs = {self.root(n) for n in kernel.outputs}

    def root(self, name: str) -> str:
        return self.buffers[name].base or name

    def new_array(self, b: ir.Buffer) -> np.ndarray:
        self.state[b.name] = np.zeros(b.shape, dtype=np.uint8)
        return super().new_array(b)

    def _state_of(self, name: str) -> np.ndarray:
        return self.state[self.root(name)].reshape(self.buffers[name].shape)

    # ---- order and trackers
    def programs(self):
        pids = list(super().programs())
        if self.rng is None or len(pids) < 2:
            yield from pids
            return
        private = {b.name for b in self.kernel.buffers
                   if b.space != ir.Space.HBM or (b.kind == "local" and b.hbm_kind != "shared_hbm")}
        tracker = _Tracker(None, private)
        self.trackers.append(tracker)
        try:
            for k in self.rng.permutation(len(pids)):
                tracker.current = int(k)
                tracker.labels[int(k)] = "program " + ", ".join(map(str, pids[k]))
                yield pids[k]
        finally:
            self.trackers.remove(tracker)

    def loop(self, n: ir.Loop, env: dict) -> None:
        if self.rng is None or n.kind != "affine" or n.trip < 2:
            return super().loop(n, env)
        private, accumulates = self._loop_info(n)
        order = range(n.trip) if accumulates else self.rng.permutation(n.trip)
        tracker = _Tracker(n, private)
        self.trackers.append(tracker)
        try:
            for v in order:
                env[n.var] = int(v)
                tracker.current = int(v)
                tracker.labels[int(v)] = f"iteration {n.var}={n.start + n.step * int(v)}"
                self.exec(n.body, env)
        finally:
            self.trackers.pop()
            env.pop(n.var, None)

    def _loop_info(self, n: ir.Loop) -> tuple[set, bool]:
        """(buffers allocated inside the loop, does the loop accumulate into a buffer from outside it)."""
        got = self.loop_info.get(id(n))
        if got is None:
            instrs = [i for i, _ in ir.walk(n.body)]
            private = {self.root(i.out.buffer) for i in instrs if i.op == "alloc"}
            # private HBM scratch declared in the loop is per iteration, as verify_deps decides it
            private |= {b.name for b in self.kernel.buffers if b.space == ir.Space.HBM and b.base is None
                        and not _hbm_shared_across(b, n)}
            acc = any(_exempt(self, i, o) and self.root(o.buffer) not in private for i in instrs for o in i.outs)
            got = self.loop_info[id(n)] = (private, acc)
        return got

    # ---- per instruction
    def step(self, instr: ir.Instr, env: dict) -> None:
        self.reads = []
        if instr.op == "alloc" and self.check_uninit:
            self.state[self.root(instr.out.buffer)][...] = NEVER
        super().step(instr, env)

    def _slices(self, acc, env, mask, for_write):
        return None        # the checks track every element's index arrays: always the general path

    def _indices(self, acc, env, mask, instr):
        idx = super()._indices(acc, env, mask, instr)
        self._last_idx = idx
        return idx

    def read(self, acc: ir.Access, env, instr: ir.Instr, mask=None) -> np.ndarray:
        v = super().read(acc, env, instr, mask)
        idx = self._last_idx
        live = None if mask is None else np.broadcast_to(mask, acc.shape)
        undef = nan = None
        origin = None
        if self.check_uninit:
            st = self._state_of(acc.buffer)[idx]
            if live is not None:
                st = np.where(live, st, WRITTEN)
            undef = st != WRITTEN
            if not undef.any():
                undef = None                    # the common case: nothing to propagate
            else:
                never = st == NEVER
                if never.any():
                    k = _first(never)
                    elem = tuple(int(i[k]) for i in idx)
                    origin = (instr.loc, acc.buffer, elem, self.buffers[acc.buffer].loc)
                else:
                    origin = self.taint_origin.get(self.root(acc.buffer))
        nonfinite = None
        if self.check_nans and D.INFO[self.dtype_of(acc)].kind == "f":
            f = np.asarray(v).astype(np.float32)
            nan = np.isnan(f)
            nonfinite = ~np.isfinite(f)
            if live is not None:
                nan &= live
                nonfinite &= live
        self.reads.append(_Read(undef, nan, origin, nonfinite))
        for t in self.trackers:
            t.access(self, instr, acc, idx, live, write=False)
        return v

    def write(self, acc: ir.Access, env, values: np.ndarray, instr: ir.Instr, mask=None) -> None:
        super().write(acc, env, values, instr, mask)
        idx = self._last_idx
        live = None if mask is None else np.broadcast_to(mask, acc.shape)
        if self.check_nans and D.INFO[self.dtype_of(acc)].kind == "f":
            self._check_nan(acc, values, instr, live)
            if D.itemsize(self.dtype_of(acc)) < 4:
                self._count_overflow(acc, values, instr, live)
        if self.check_uninit:
            self._mark(acc, idx, instr, live)
        for t in self.trackers:
            t.access(self, instr, acc, idx, live, write=True)

    # ---- NaN creation
    def _check_nan(self, acc, values, instr, live) -> None:
        isnan = np.isnan(np.broadcast_to(np.asarray(values), acc.shape).astype(np.float32))
        if live is not None:
            isnan &= live
        if not isnan.any():
            return
        created = isnan & ~depends(instr.op, [r.nan for r in self.reads], acc.shape)
        if created.any():
            k = _first(created)
            raise errors.make("nan_created", f"{_op_name(instr)} created a NaN in '{acc.buffer}' at tile element "
                              f"{list(k)} from inputs that hold no NaN there", loc=instr.loc)

    def _count_overflow(self, acc, values, instr, live) -> None:
        """BAD_INPUTS row 24: finite inputs whose result rounded to a narrow float (fp8, bf16, fp16) is
        ±inf or NaN (ml_dtypes' out-of-range behaviour, kept as the numerics) are counted per line and
        reported as one warning per line when the run ends."""
        bad = ~np.isfinite(np.broadcast_to(np.asarray(values), acc.shape).astype(np.float32))
        if live is not None:
            bad &= live
        if not bad.any():
            return
        fresh = bad & ~depends(instr.op, [r.nonfinite for r in self.reads], acc.shape)
        n = int(fresh.sum())
        if n:
            key = (instr.loc, self.dtype_of(acc), _op_name(instr))
            self.overflows[key] = self.overflows.get(key, 0) + n

    def _warn_overflows(self) -> None:
        import warnings
        for (loc, dt, op), n in self.overflows.items():
            warnings.warn_explicit(RoundingOverflowWarning(
                f"{n} finite value(s) overflowed to inf/NaN when {op} rounded them to {dt} (ml_dtypes' "
                f"behaviour); clamp first, or scale with nki_lite.stdlib.quantize_fp8"), RoundingOverflowWarning,
                loc.file if loc else "<kernel>", loc.line if loc else 0)

    # ---- uninitialised reads (taint)
    def _mark(self, acc, idx, instr, live) -> None:
        reads = [r.undef for r in self.reads]
        st = self._state_of(acc.buffer)
        if all(r is None for r in reads):
            if live is None:
                st[idx] = WRITTEN
            else:
                st[tuple(i[live] for i in idx)] = WRITTEN
            return
        taint = depends(instr.op, reads, acc.shape)
        new = np.where(taint, TAINTED, WRITTEN).astype(np.uint8)
        if live is None:
            st[idx] = new
        else:
            st[tuple(i[live] for i in idx)] = new[live]
            taint = taint & live
        if not taint.any():
            return
        root = self.root(acc.buffer)
        origin = next((r.origin for r in self.reads if r.origin is not None), None)
        if origin is not None:
            self.taint_origin.setdefault(root, origin)
        if root in self.outputs:
            k = _first(taint)
            flat = int(np.ravel_multi_index(tuple(int(i[k]) for i in idx), self.buffers[acc.buffer].shape))
            records = self.output_taints.setdefault(root, [])
            if len(records) < 64:
                records.append((flat, origin, instr.loc))

    def run(self) -> None:
        super().run()
        self._warn_overflows()
        if self.check_uninit:
            self._report_tainted_outputs()

    def _report_tainted_outputs(self) -> None:
        for name in self.kernel.outputs:
            root = self.root(name)
            st = self.state[root]
            if not (st == TAINTED).any():
                continue
            flat_st = st.reshape(-1)
            rec = next((r for r in self.output_taints.get(root, ()) if flat_st[r[0]] == TAINTED), None)
            origin = rec[1] if rec else self.taint_origin.get(root)
            elem = list(np.unravel_index(rec[0] if rec else int(np.flatnonzero(flat_st == TAINTED)[0]), st.shape))
            notes = []
            if rec is not None:
                notes.append(f"note: the value reaches output '{root}' element {[int(e) for e in elem]} through "
                             f"the store at {_where(rec[2])}")
            if origin is None:
                raise errors.make("uninitialized_read", f"output '{root}' element {[int(e) for e in elem]} holds a "
                                  "value computed from never-written memory", notes=tuple(notes))
            loc, tile, telem, alloc = origin
            if alloc is not None:
                notes.append(f"note: '{tile}' is allocated at {_where(alloc)}")
            raise errors.make("uninitialized_read", f"reads element {list(telem)} of '{tile}', which was never "
                              f"written, and the value reaches kernel output '{root}'", loc=loc, notes=tuple(notes))


def _exempt(m: Machine, instr: ir.Instr, acc: ir.Access) -> bool:
    """The accumulation idioms lower/verify_deps.py allows across affine_range iterations."""
    if accumulates(instr):
        return acc.buffer == instr.out.buffer
    if instr.op != "tensor_tensor" or acc.buffer != instr.out.buffer:
        return False
    if (instr.attr("op") == "add" and m.buffers[acc.buffer].space == ir.Space.PSUM
            and any(isinstance(a, ir.Access) and a.buffer == acc.buffer for a in instr.ins)):
        return True
    return instr.attr("op") in ("add", "multiply", "maximum", "minimum") and instr.out in instr.ins


class _Tracker:
    """Last writer and reader (iteration, instruction) of every element touched inside one running
    affine loop (or the SPMD programs), per root buffer, flat over its storage."""

    def __init__(self, loop: ir.Loop | None, private: set):
        self.loop, self.private = loop, private
        self.current = -1
        self.labels: dict[int, str] = {}
        self.table: dict[str, list] = {}          # root -> [writer it, writer site, reader it, reader site]
        self.sites: list[ir.Instr] = []
        self.site_ids: dict[int, int] = {}

    def _site(self, instr) -> int:
        k = self.site_ids.get(id(instr))
        if k is None:
            k = self.site_ids[id(instr)] = len(self.sites)
            self.sites.append(instr)
        return k

    def access(self, m: CheckingMachine, instr, acc, idx, live, write: bool) -> None:
        root = m.root(acc.buffer)
        if root in self.private or _exempt(m, instr, acc):
            return
        b = m.buffers[root]
        if b.kind == "const" or (b.kind == "input" and not b.mutable and not write):
            return                                          # immutable data cannot race
        lin = np.ravel_multi_index(idx, m.buffers[acc.buffer].shape)
        if live is not None:
            lin = lin[live]
        lin = np.asarray(lin).reshape(-1)
        if lin.size == 0:
            return
        t = self.table.get(root)
        if t is None:
            n = m.buffers[root].size
            t = self.table[root] = [np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                                    np.full(n, -1, np.int64), np.full(n, -1, np.int64)]
        w_it, w_site, r_it, r_site = t
        cur = self.current
        other = w_it[lin]
        bad = (other >= 0) & (other != cur)
        if bad.any():
            self._raise(m, instr, acc, lin, bad, other, w_site, "writes" if write else "reads", "wrote")
        if write:
            other = r_it[lin]
            bad = (other >= 0) & (other != cur)
            if bad.any():
                self._raise(m, instr, acc, lin, bad, other, r_site, "writes", "read")
            w_it[lin] = cur
            w_site[lin] = self._site(instr)
        else:
            r_it[lin] = cur
            r_site[lin] = self._site(instr)

    def _raise(self, m, instr, acc, lin, bad, other, sites, verb, past) -> None:
        k = int(np.flatnonzero(bad)[0])
        e = int(lin[k])
        root = m.root(acc.buffer)
        elem = [int(x) for x in np.unravel_index(e, m.buffers[root].shape)]
        prev = self.sites[int(sites[e])]
        them, us = self.labels.get(int(other[k]), "?"), self.labels.get(self.current, "?")
        where = "programs" if self.loop is None else f"iterations of the affine_range loop over {self.loop.var}"
        kind = {("reads", "wrote"): "read-after-write", ("writes", "wrote"): "write-after-write",
                ("writes", "read"): "write-after-read"}[(verb, past)]
        msg = (f"{kind} race between {where}: {us} {verb} '{root}' element {elem}, which {them} {past} at "
               f"{_where(prev.loc)}")
        code = "program_dependency" if self.loop is None else "loop_dependency"
        raise errors.make(code, msg, loc=instr.loc,
                          notes=(f"note: the other access is {prev.op} at {_where(prev.loc)} ({them})",
                                 "note: found by NKI_LITE_SHUFFLE (iterations run in a seeded random order)"))
