"""LNC=2 runs: one program per logical NeuronCore, sharing HBM, paired at core_barrier / sendrecv.

Contract:
- `run(kernel, n, args, kwargs)` runs an nki_lite Kernel on n logical cores. A kernel whose trace does
  not depend on the core id runs as the SPMD grid of n programs (kernel[n], JIT or interpreter). A kernel
  that branches on nl.program_id in Python (NL-E802 in a grid trace) or uses core_barrier / sendrecv
  (lang/isa_lnc.py PerCoreTraceNeeded) is traced once per core with the core id a constant of the trace.
- The per-core programs run in the interpreter (a JIT-mode call warns once, NkiLitePerformanceWarning: JIT code
  for per-core programs is not built), each core with its own SBUF/PSUM, on the same HBM
  arrays (inputs, outputs matched by position, shared_hbm tensors by name). The cores take turns: core 0
  runs until it reaches a synchronisation point (or its end), then core 1, and so on; when every live
  core waits, the hub pairs them: all at core_barrier -> released; all at sendrecv with one pipe_id and
  ranks that pair -> each receives its peer's src. Unpairable waits are NL-E917 (deadlock) and a wait
  whose peer finished is NL-E918, both at the waiting instruction's line: never a hang.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

from .. import errors
from ..core import ir
from ..lang.isa_lnc import PerCoreTraceNeeded, tracing_core
from . import interpret_lnc  # noqa: F401  (registers the core_barrier / sendrecv interpreter rules)


class _Abort(Exception):
    """Another core failed: this core's thread stops."""


class Hub:
    """Turn-taking and pairing of the cores' synchronisation points."""

    def __init__(self, n: int):
        self.n = n
        self.cond = threading.Condition()
        self.turn = 0
        self.waiting: dict[int, tuple] = {}
        self.done: set[int] = set()
        self.results: dict[int, object] = {}
        self.error: BaseException | None = None

    def _runnable(self):
        return [c for c in range(self.n) if c not in self.done and c not in self.waiting]

    def _advance(self, after: int) -> None:
        live = self._runnable()
        if live:
            later = [c for c in live if c > after]
            self.turn = later[0] if later else live[0]
        elif self.waiting:
            self._pair()
        else:
            self.turn = None
        self.cond.notify_all()

    def _fail(self, name: str, msg: str, instr, hint=None) -> None:
        self.error = self.error or errors.make(name, msg, loc=instr.loc, hint=hint)

    def _pair(self) -> None:
        core, (instr, _) = min(self.waiting.items())
        if self.done:
            gone = min(self.done)
            self._fail("lnc_unmatched", f"core {core} waits at nisa.{instr.op} here, but core {gone} finished "
                       "its program without reaching a matching one", instr)
            return
        ops = {i.op for i, _ in self.waiting.values()}
        if len(ops) > 1:
            where = "; ".join(f"core {c} at nisa.{i.op} (line {i.loc.line if i.loc else '?'})"
                              for c, (i, _) in sorted(self.waiting.items()))
            self._fail("lnc_deadlock", f"the cores can never meet: {where}", instr)
            return
        if ops == {"sendrecv"}:
            pipes = {i.attr("pipe_id") for i, _ in self.waiting.values()}
            if len(pipes) > 1:
                self._fail("lnc_deadlock", f"the cores wait at sendrecv with different pipe_id {sorted(pipes)}",
                           instr)
                return
            for c, (i, _) in self.waiting.items():
                r = i.attr("recv_from")
                peer, payload = self.waiting[r]
                if peer.attr("send_to") != c:
                    self._fail("lnc_deadlock", f"core {c} receives from core {r}, but core {r} sends to core "
                               f"{peer.attr('send_to')}", i)
                    return
                if tuple(payload.shape) != tuple(i.out.shape):
                    self._fail("lnc_unmatched", f"core {r} sends a {tuple(payload.shape)} tile into core {c}'s "
                               f"{tuple(i.out.shape)} dst", i)
                    return
            self.results = {c: self.waiting[i.attr("recv_from")][1] for c, (i, _) in self.waiting.items()}
        self.waiting.clear()
        self.turn = 0

    def arrive(self, core: int, instr, payload):
        with self.cond:
            self.waiting[core] = (instr, payload)
            self._advance(core)
            self.cond.wait_for(lambda: self.error is not None or (core not in self.waiting and self.turn == core))
            if self.error is not None:
                raise _Abort()
            return self.results.pop(core, None)

    def run_core(self, core: int, machine) -> None:
        try:
            with self.cond:
                self.cond.wait_for(lambda: self.error is not None or self.turn == core)
                if self.error is not None:
                    return
            machine.run()
            with self.cond:
                self.done.add(core)
                self._advance(core)
        except _Abort:
            pass
        except BaseException as e:          # noqa: BLE001 - handed to the caller's thread
            with self.cond:
                self.error = self.error or e
                self.cond.notify_all()


def per_core_kernels(kernel, n: int, args, kwargs, target=None) -> list[ir.Kernel]:
    """The verified IR of each core's program (core id a constant of each trace)."""
    from .kernel import passes, trace, verify
    bound = kernel.bind(args, kwargs)
    t = kernel.resolve_target(target)
    out, unwritten = [], []
    for c in range(n):
        with tracing_core(c, n):
            traced = trace(kernel.fn, bound, (), t, outputs_in_params=getattr(kernel, "outputs_in_params", False),
                           write_back_params=getattr(kernel, "write_back_params", False))
        k = passes.run_shared(traced)
        with warnings.catch_warnings():
            # each core writes its shard of a shared output: one core's partial coverage is expected
            warnings.filterwarnings("ignore", message=r".*is only partly written")
            mine: list = []
            verify(k, unwritten=mine)
        out.append(k)
        unwritten.append({k.outputs.index(name): e for name, e in mine if name in k.outputs})
    # an output one core leaves to another (the library's `if shard_id == 0:` final store) is written; one
    # that no core writes is NL-E702 (outputs are matched between cores by position)
    for pos in sorted(set.intersection(*(set(u) for u in unwritten))):
        raise unwritten[0][pos]
    return out


def _share_hbm(m, m0) -> None:
    """Point core m's HBM tensors at core 0's arrays: inputs and shared_hbm by name, outputs by position."""
    for b in m.kernel.buffers:
        if b.space == ir.Space.HBM and b.base is None and b.name in m0.mem and \
                (b.kind in ("input", "const") or b.hbm_kind == "shared_hbm"):
            m.mem[b.name] = m0.mem[b.name]
    for mine, theirs in zip(m.kernel.outputs, m0.kernel.outputs):
        m.mem[mine] = m0.mem[theirs]
    for b in m.kernel.buffers:
        if b.base is not None:
            from ..core import dtypes as D
            m.mem[b.name] = m.mem[b.base].reshape(b.shape).view(D.storage(b.dtype))


def run(kernel, n: int, args, kwargs):
    """kernel[n](*args, **kwargs) under LNC=n: the grid when the trace allows it, else per-core programs."""
    try:
        return kernel[n](*args, **kwargs)
    except PerCoreTraceNeeded:
        pass
    except errors.NkiLiteError as e:
        if getattr(e, "code", None) != "NL-E802":
            raise
    return run_per_core(kernel, n, args, kwargs)


def run_per_core(kernel, n: int, args, kwargs):
    from .binding import call_result
    from .interpreter import machine_class, prepared
    kwargs = dict(kwargs)
    target = kwargs.pop("target", None)
    if kernel.resolve_mode(kwargs.pop("mode", None)) == "jit":
        # JIT code for per-core programs (their shared HBM, core_barrier / sendrecv) is not built: say so once
        from .notices import NkiLitePerformanceWarning, warn_once
        warn_once(f"lnc-interpret:{getattr(kernel.fn, '__qualname__', '')}",
                  f"{getattr(kernel.fn, '__name__', 'kernel')}[{n}] runs its {n} per-core programs in the "
                  "interpreter: it branches on nl.program_id in Python or synchronises the cores, and JIT code for "
                  "per-core programs is not built", NkiLitePerformanceWarning)
    bound = kernel.bind(args, kwargs)
    ks = [prepared(k, "interpret") for k in per_core_kernels(kernel, n, args, kwargs, target)]
    inputs = {name: bound.arguments[name] for name in ks[0].params}
    ms = [machine_class(k)(k, {p: bound.arguments[p] for p in k.params}) for k in ks]
    for m in ms[1:]:
        _share_hbm(m, ms[0])
    hub = Hub(n)
    threads = []
    for c, m in enumerate(ms):
        m.lnc_hub, m.lnc_core = hub, c
        threads.append(threading.Thread(target=hub.run_core, args=(c, m), name=f"nki_lite-lnc-core{c}", daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if hub.error is not None:
        raise hub.error
    k0, m0 = ks[0], ms[0]
    return call_result(k0, {name: m0.mem[name] for name in k0.outputs}, inputs)


class LncEstimate:
    """Per-core engine-model estimates of an LNC launch; the device time is the slowest core's."""

    def __init__(self, per_core: list):
        self.per_core = per_core

    @property
    def total_time(self) -> float:
        return max(e.total_time for e in self.per_core)


def estimate(kernel, n: int, *args, target: str | None = None, **kwargs) -> LncEstimate:
    """One Estimate per core's program (each on its own NeuronCore of the target) and their max."""
    from .profile import estimate_ir
    t = kernel.resolve_target(target)
    return LncEstimate([estimate_ir(k, t) for k in per_core_kernels(kernel, n, args, kwargs, target)])
