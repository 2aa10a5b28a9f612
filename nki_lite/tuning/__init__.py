"""Autotuning: choose a kernel's keyword parameters (tile and block sizes) without hardware.

    @nki_lite.autotune(configs=[{"TILE_N": 128}, {"TILE_N": 512}], key=["a", "b"], target="trn2")
    @nki.jit
    def matmul(a, b, TILE_N=512): ...

Contract:
- `autotune(configs, key=None, target=None, by="model"|"cpu", workers=None, reps=3)` wraps an
  `@nki.jit` kernel (or a plain function, jitted) and returns an `Autotuned` kernel. Every config is a
  dict of keyword parameters of the kernel; `key` names the parameters whose shapes and dtypes (values,
  for non-arrays) select a choice (default: every array argument). Unknown names are NL-E910.
- On a call, the choice for (key values, target, grid, method, configs, kernel source) is looked up
  in memory, then on disk (tuning/store.py, next to the JIT cache); on a miss every config is swept:
  by="model" estimates each on the engine model of `target` (`nki_lite.estimate`, nothing runs) and
  picks the lowest device time, ties to the earlier config, so the choice is deterministic; by="cpu"
  runs each on the JIT (one warm-up call, then the median of `reps` timed calls). A config that fails
  verification (SBUF/PSUM over capacity — a CapacityWarning counts — PSUM banks, bounds, ...) or
  raises is skipped with its reason; if all fail, NL-E911 lists every reason. Model sweeps of at
  least 4 configs run in `workers` processes (NKI_LITE_AUTOTUNE_WORKERS; default one per core); CPU
  sweeps run in this process so timings do not compete for cores.
- The kernel then runs with the chosen config. Passing a tuned parameter explicitly is NL-E910.
- `autotune_report()` returns the Report of the last call's key (every config's estimate or time and
  skip reasons, where the choice came from); `autotune_reports()` every key seen; `stats` counts
  sweeps, estimates, timings and disk hits (a process that reuses a stored choice makes 0 estimates).
"""
from __future__ import annotations

import hashlib
import inspect
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import config, errors
from ..lower.verify_memory import CapacityWarning
from ..runtime.kernel import Kernel, jit
from ..runtime.profile import Estimate, estimate
from ..typing import TensorSpec
from ..version import __version__
from . import store
from .report import Report, Row
from .sweep import run_all, workers_for

METHODS = ("model", "cpu")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


@dataclass
class _Shared:
    """What grid-bound copies of one autotuned kernel share: choices per key, the last report, counters."""
    choices: dict[str, Report] = field(default_factory=dict)
    last: Report | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"sweeps": 0, "estimates": 0, "timings": 0,
                                                           "disk_hits": 0})


def _value_key(v) -> Any:
    if isinstance(v, TensorSpec):
        dt: Any = v.dtype
        return {"shape": list(v.shape or ()), "dtype": str(np.dtype(dt)) if dt is not None else None}
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return {"shape": [int(s) for s in v.shape], "dtype": str(v.dtype)}
    return repr(v)


def _source_digest(fn) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        code = fn.__code__
        text = repr((code.co_code, code.co_consts, code.co_names))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Autotuned:
    """An @nki.jit kernel whose keyword parameters are chosen per key by a sweep (see module doc)."""

    def __init__(self, kernel: Kernel, configs: Sequence[dict], key: Sequence[str] | None, target: str | None,
                 by: str, workers: int | None, reps: int, _shared: _Shared | None = None):
        self.kernel = kernel
        self.configs = [dict(c) for c in configs]
        self.key = list(key) if key is not None else None
        self.target = target
        self.by = by
        self.workers = workers
        self.reps = reps
        self.__name__ = getattr(kernel, "__name__", "kernel")
        self.__doc__ = getattr(kernel, "__doc__", None)
        self._shared = _shared if _shared is not None else _Shared()
        self._check()

    def _check(self) -> None:
        params = self.kernel.signature.parameters
        loc = self._loc()
        if self.by not in METHODS:
            raise errors.make("autotune_config", f"autotune by={self.by!r}: use one of {METHODS}", loc=loc)
        if not self.configs:
            raise errors.make("autotune_config", "autotune needs at least one config", loc=loc)
        for i, c in enumerate(self.configs):
            bad = [n for n in c if n not in params or params[n].kind in
                   (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
            if bad:
                raise errors.make("autotune_config", f"config {i} {c} names {bad}, which kernel "
                                  f"'{self.__name__}' does not take as parameters {list(params)}", loc=loc)
        bad = [n for n in self.key or () if n not in params]
        if bad:
            raise errors.make("autotune_config", f"autotune key names {bad}, which are not parameters of "
                              f"'{self.__name__}' {list(params)}", loc=loc)

    def _loc(self):
        from ..lang.trace import fn_loc
        return fn_loc(self.kernel.fn)

    @property
    def stats(self) -> dict[str, int]:
        return self._shared.stats

    def __getitem__(self, grid) -> "Autotuned":
        return Autotuned(self.kernel[grid], self.configs, self.key, self.target, self.by, self.workers,
                         self.reps, self._shared)

    # ---- the choice
    def _key_doc(self, args, kwargs) -> tuple[dict, dict]:
        try:
            bound = self.kernel.signature.bind_partial(*args, **kwargs)
        except TypeError as e:
            raise errors.make("argument", f"{e}; the kernel's signature is {self.__name__}"
                              f"{self.kernel.signature}", loc=self._loc()) from None
        tuned = sorted({n for c in self.configs for n in c} & set(bound.arguments))
        if tuned:
            raise errors.make("autotune_config", f"{tuned} of '{self.__name__}' are chosen by autotune; do not "
                              "pass them in the call", loc=self._loc())
        names = self.key if self.key is not None else [
            n for n, v in bound.arguments.items() if isinstance(v, TensorSpec) or hasattr(v, "shape")]
        values = {n: _value_key(bound.arguments.get(n)) for n in names}
        fn = self.kernel.fn
        doc = {"kernel": [getattr(fn.__code__, "co_filename", "?"), fn.__qualname__, _source_digest(fn)],
               "configs": self.configs, "key": values, "target": self.resolved_target(), "by": self.by,
               "grid": list(self.kernel.grid), "reps": self.reps if self.by == "cpu" else None,
               "nki_lite": __version__}
        return doc, values

    def resolved_target(self) -> str:
        return self.kernel.resolve_target(self.target)

    def choose(self, *args, **kwargs) -> dict:
        """The chosen config for these arguments (sweeping if this key was never tuned)."""
        return self._report_for(args, kwargs).best

    def _report_for(self, args, kwargs) -> Report:
        doc, values = self._key_doc(args, kwargs)
        k = store.record_key(doc)
        choices = self._shared.choices
        rep = choices.get(k)
        if rep is None:
            rec = store.load(k)
            if rec is not None and len(rec.get("rows", ())) == len(self.configs):
                rep = Report.from_json(rec, "disk")
                self.stats["disk_hits"] += 1
            else:
                rep = self._sweep(args, kwargs, values)
                store.save(k, rep.to_json())
            choices[k] = rep
        elif rep.source == "tuned":
            rep.source = "memory"
        self._shared.last = rep
        return rep

    def _sweep(self, args, kwargs, values) -> Report:
        self.stats["sweeps"] += 1
        target = self.resolved_target()
        if self.by == "model":
            def evaluate(i: int):
                return self._estimate_one(args, kwargs, self.configs[i], target)
            n_workers = workers_for(self.workers)
            results = run_all(evaluate, len(self.configs), n_workers, f"autotune {self.__name__}")
            self.stats["estimates"] += len(self.configs)
        else:
            results = [self._time_one(args, kwargs, c) for c in self.configs]
            self.stats["timings"] += len(self.configs)
        rows = [Row(i, c, t, why) for i, (c, (t, why)) in enumerate(zip(self.configs, results))]
        ok = [r for r in rows if r.ok]
        if not ok:
            notes = tuple(f"  config {r.index} {r.config}: {r.reason}" for r in rows)
            raise errors.make("autotune_no_config", f"autotune of '{self.__name__}' (by={self.by}, target={target}): "
                              f"every one of the {len(rows)} configs failed", loc=self._loc(), notes=notes)
        best = min(ok, key=lambda r: (r.time_ns, r.index))
        return Report(values, self.by, target, rows, best.index, "tuned")

    def _estimate_one(self, args, kwargs, cfg: dict, target: str) -> tuple[float | None, str]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", CapacityWarning)     # over capacity: not a candidate
                est = estimate(self.kernel, *args, target=target, record_events=False, **kwargs, **cfg)
            return float(est.total_time_ns), ""
        except (errors.NkiLiteError, CapacityWarning) as e:
            return None, _first_line(e)
        except Exception as e:   # a config the kernel's own Python rejects: skipped, with why
            return None, _first_line(e)

    def _time_one(self, args, kwargs, cfg: dict) -> tuple[float | None, str]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", CapacityWarning)
                self.kernel(*args, mode="jit", **kwargs, **cfg)      # warm-up: trace and compile
            times = []
            for _ in range(max(1, self.reps)):
                t0 = time.perf_counter_ns()
                self.kernel(*args, mode="jit", **kwargs, **cfg)
                times.append(time.perf_counter_ns() - t0)
            times.sort()
            return float(times[len(times) // 2]), ""
        except (errors.NkiLiteError, CapacityWarning) as e:
            return None, _first_line(e)
        except Exception as e:
            return None, _first_line(e)

    # ---- calling
    def __call__(self, *args, **kwargs):
        params = self.kernel.signature.parameters       # call options, unless the kernel takes such a parameter
        call_kw = {k: kwargs.pop(k) for k in ("mode", "target", "out") if k in kwargs and k not in params}
        cfg = self._report_for(args, kwargs).best
        return self.kernel(*args, **kwargs, **cfg, **call_kw)

    def estimate(self, *args, target: str | None = None, **kwargs) -> Estimate:
        """The engine model's estimate of a call with the chosen config."""
        cfg = self._report_for(args, kwargs).best
        return estimate(self.kernel, *args, target=target or self.resolved_target(), **kwargs, **cfg)

    def autotune_report(self) -> Report:
        rep = self._shared.last
        if rep is None:
            raise errors.make("argument", f"'{self.__name__}' has not been called yet: no autotune report",
                              loc=self._loc(), hint="call the kernel (or .choose(...)) first")
        return rep

    def autotune_reports(self) -> list[Report]:
        return list(self._shared.choices.values())

    def trace(self, *args, **kwargs):
        return self.kernel.trace(*args, **kwargs, **self._report_for(args, kwargs).best)


def autotune(configs: Sequence[dict], key: Sequence[str] | None = None, target: str | None = None,
             by: str = "model", workers: int | None = None, reps: int = 3) -> Callable[[Any], Autotuned]:
    """Decorator: `@autotune(configs=[...], key=[...], target="trn2", by="model")` over `@nki.jit`."""
    def wrap(k) -> Autotuned:
        kern = k if isinstance(k, Kernel) else jit(k)
        return Autotuned(kern, configs, key, target, by, workers, reps)
    return wrap
