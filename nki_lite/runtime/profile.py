"""Estimates from the engine model: `nki_lite.estimate`, and NKI's `benchmark` / `profile` spellings.

Contract:
- `estimate(kernel_or_grid, *args, target=None, **kwargs)` traces the kernel (arguments may be
  numpy arrays or `nt.tensor[[shape], dtype]` placeholders; nothing runs), schedules it on the
  target's engine model (lower/cost) and returns an `Estimate`.
- Target: `target=` if given, else the kernel's own (`@nki.jit(target=...)`), else
  NEURON_PLATFORM_TARGET_OVERRIDE / NKI_LITE_TARGET (config.default_target()), else trn2.
- `Estimate.summary()` uses neuron-profile's field names (shared/NKI_REFERENCE.md §6.4); `table()`
  is the same as text; `bottleneck` says what limits the kernel in words; `save_trace(path)` writes
  Chrome-trace / Perfetto JSON (one track per engine and DMA queue; every event carries opcode,
  shape and `nki_source_location` file:line); `plot(path)` writes a PNG timeline with utilisation
  bars (needs the optional `plot` extra, matplotlib).
- `benchmark(warmup=, iters=)(kernel)(...)` and `profile(working_directory=...)(kernel)(...)` are
  shims with NKI's spellings over the same estimate; latencies are model time, in microseconds.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .. import errors
from ..core import ir
from ..lower.cost import rules as _rules, rules_gather as _rules_gather  # noqa: F401  (registers the cost rules)
from ..lower.cost.plan import Plan
from ..lower.cost.records import ScheduleResult
from ..lower.cost.schedule import Simulator
from ..lower.cost.totals import Totals, totals
from ..core.targets import TARGETS, Target
from .pricing import call_cost

ENGINE_TRACKS = (("tensor", "Tensor"), ("vector", "Vector"), ("scalar", "Scalar"), ("gpsimd", "GpSimd"))


def _as_kernel(kernel_or_grid):
    from .kernel import Kernel
    if isinstance(kernel_or_grid, Kernel):
        return kernel_or_grid
    if callable(kernel_or_grid):
        return Kernel(kernel_or_grid)
    raise errors.make("argument", f"estimate() needs an @nki.jit kernel or a kernel function, got "
                      f"{type(kernel_or_grid).__name__}")


class Estimate:
    """The engine model's estimate of one kernel launch on one NeuronCore."""

    def __init__(self, kernel: ir.Kernel, target: Target, plan: Plan, result: ScheduleResult, tot: Totals):
        self.kernel = kernel
        self.target = target
        self.plan = plan
        self.result = result
        self.totals = tot

    # ---- headline numbers
    @property
    def total_time(self) -> float:
        """Seconds."""
        return self.result.total_ns * 1e-9

    @property
    def total_time_ns(self) -> float:
        return self.result.total_ns

    @property
    def latency_us(self) -> float:
        return self.result.total_ns * 1e-3

    @property
    def events(self):
        return self.result.events

    def engine_busy_ns(self, engine: str) -> float:
        return self.totals.busy_ns.get(engine, 0.0)

    def cost(self, price_per_hour: float, cores_used: int = 1, instance_cores: int = 1):
        """Dollars per call and per million calls (runtime/pricing.py: the call is charged
        cores_used / instance_cores of the instance's hourly price for its total_time)."""
        return call_cost(self.total_time, price_per_hour, cores_used, instance_cores)

    @property
    def uncertainty(self) -> str:
        """The model's validated spread (lower/cost/validation_nkibench.py)."""
        from ..lower.cost.validation_nkibench import uncertainty_text
        return uncertainty_text()

    def summary(self) -> dict:
        t, tot, T = self.target, self.totals, self.result.total_ns
        Tn = T if T > 0 else float("inf")
        peak = t.tensor_peak_flops_per_ns
        hbm = tot.hbm_read_bytes + tot.hbm_write_bytes
        s = {
            "target": t.name,
            "total_time": T * 1e-9,
            "neuroncore_cycle_count": int(round(T * t.base_ghz)),
        }
        for e, _ in ENGINE_TRACKS:
            s[f"{e}_engine_active_time_percent"] = 100.0 * self.result.engine_active_ns.get(e, tot.busy_ns[e]) / Tn
        for e, _ in ENGINE_TRACKS:
            s[f"total_time_{e}"] = tot.busy_ns[e] * 1e-9
        s.update({
            "dma_active_time": self.result.dma_active_ns * 1e-9,
            "dma_active_time_percent": 100.0 * self.result.dma_active_ns / Tn,
            "hardware_flops": tot.flops,
            "transpose_flops": tot.transpose_flops,
            "adjusted_hardware_flops": tot.adjusted_flops,
            "model_flops": tot.flops - tot.transpose_flops,
            "hfu_estimated_percent": 100.0 * tot.flops / (peak * Tn),
            "mfu_estimated_percent": 100.0 * (tot.flops - tot.transpose_flops) / (peak * Tn),
            "mbu_estimated_percent": 100.0 * hbm / Tn / t.hbm_stack_bytes_per_ns,
            "mm_arithmetic_intensity": (tot.matmul_flops / hbm) if hbm else 0.0,
            "peak_flops_bandwidth_ratio": peak / t.hbm_stack_bytes_per_ns,
            "hbm_read_bytes": tot.hbm_read_bytes,
            "hbm_write_bytes": tot.hbm_write_bytes,
            "dma_transfer_total_bytes": tot.dma_bytes,
            "dma_transfer_count": tot.dma_count,
            "dma_descriptor_count": tot.dma_descriptors,
            "average_dma_size": (tot.dma_bytes / tot.dma_count) if tot.dma_count else 0.0,
            "dma_transfer_average_bytes": (tot.dma_bytes / tot.dma_descriptors) if tot.dma_descriptors else 0.0,
            "sbuf_high_water_bytes": self.plan.alloc.sbuf_bytes_per_partition * t.partitions,
            "sbuf_high_water_bytes_per_partition": self.plan.alloc.sbuf_bytes_per_partition,
            "psum_high_water_bytes": self.plan.alloc.psum_bytes_per_partition * t.partitions,
            "psum_high_water_bytes_per_partition": self.plan.alloc.psum_bytes_per_partition,
            "instruction_count": sum(tot.instr_count.values()),
            "event_count": len(self.result.events),
            "model_simulated_instructions": self.result.simulated_instructions,
            "model_extrapolated": bool(self.result.extrapolations),
            "model_approximate": self.result.approximate,
        })
        return s

    # ---- words
    @property
    def bottleneck(self) -> str:
        s = self.summary()
        act = {name: s[f"{e}_engine_active_time_percent"] for e, name in ENGINE_TRACKS}
        top = max(act, key=act.get)
        dma = s["dma_active_time_percent"]
        T = self.result.total_ns
        bw = (self.totals.dma_bytes / T) if T else 0.0
        peak_bw = self.target.dma_peak_bytes_per_ns
        avg_desc = s["dma_transfer_average_bytes"]
        if act[top] >= 70.0 and act[top] >= dma:
            extra = ""
            if top == "Tensor":
                extra = f"; HFU {s['hfu_estimated_percent']:.1f}%"
            return f"compute-bound: the {top} Engine is busy {act[top]:.1f}% of the time{extra}"
        if dma >= 70.0:
            hint = ""
            if avg_desc and avg_desc < self.target.dma_efficient_partition_bytes:
                hint = (f"; descriptors average {avg_desc:.0f} B (< {self.target.dma_efficient_partition_bytes // 1024} KiB "
                        "per partition wastes DMA "
                        f"bandwidth, §4.8)")
            return (f"memory-bound: DMA is active {dma:.1f}% of the time, moving {bw:.1f} GB/s of a "
                    f"{peak_bw:.0f} GB/s peak{hint}")
        return (f"latency-bound: no engine is busy more than {max(act[top], dma):.1f}% of the time "
                f"({top} {act[top]:.1f}%, DMA {dma:.1f}%); the critical path is dependency waits "
                f"(cross-engine semaphores ~{self.target.semaphore_latency_ns:.0f} ns each)")

    def table(self) -> str:
        s = self.summary()
        T = self.result.total_ns
        lines = [f"nki_lite estimate: {self.kernel.name} on {self.target.name} (engine model)",
                 f"  total_time               {T / 1e3:14.3f} us   model uncertainty {self.uncertainty}",
                 f"  {'engine':<10} {'busy us':>12} {'active %':>9} {'instructions':>13}"]
        for e, name in ENGINE_TRACKS:
            lines.append(f"  {name:<10} {self.totals.busy_ns[e] / 1e3:12.3f} "
                         f"{s[f'{e}_engine_active_time_percent']:9.1f} {self.totals.instr_count[e]:13d}")
        lines.append(f"  {'DMA':<10} {s['dma_active_time'] * 1e6:12.3f} {s['dma_active_time_percent']:9.1f} "
                     f"{self.totals.instr_count['dma']:13d}")
        for k in ("hfu_estimated_percent", "mfu_estimated_percent", "mbu_estimated_percent",
                  "mm_arithmetic_intensity", "hardware_flops", "hbm_read_bytes", "hbm_write_bytes",
                  "average_dma_size", "sbuf_high_water_bytes", "psum_high_water_bytes"):
            v = s[k]
            lines.append(f"  {k:<28} {v:14.2f}" if isinstance(v, float) else f"  {k:<28} {v:14d}")
        if self.result.extrapolations:
            n = sum(x[1] for x in self.result.extrapolations)
            lines.append(f"  (steady state: {n} loop iterations extrapolated"
                         f"{', approximately' if self.result.approximate else ''})")
        lines.append(f"  bottleneck: {self.bottleneck}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Estimate {self.kernel.name} on {self.target.name}: {self.result.total_ns / 1e3:.3f} us>"

    # ---- trace
    def tracks(self) -> list[str]:
        return [name for _, name in ENGINE_TRACKS] + [f"DMA q{i}" for i in range(self.target.dma_queues)] + \
            ["steady state"]

    def trace(self) -> dict:
        names = {e: name for e, name in ENGINE_TRACKS}
        names.update({f"q{i}": f"DMA q{i}" for i in range(self.target.dma_queues)})
        names["steady state"] = "steady state"
        order = self.tracks()
        tid = {name: k for k, name in enumerate(order)}
        ev = [{"ph": "M", "name": "process_name", "pid": 0,
               "args": {"name": f"NeuronCore {self.target.name} (nki_lite engine model): {self.kernel.name}"}}]
        for name in order:
            ev.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": tid[name], "args": {"name": name}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": tid[name],
                       "args": {"sort_index": tid[name]}})
        for e in self.result.events:
            track = names.get(e.track, e.track)
            args = {"opcode": e.name, "shape": e.shape, "nki_source_location": e.loc}
            args.update(e.args)
            ev.append({"ph": "X", "name": e.name, "cat": "dma" if track.startswith("DMA") else track.lower(),
                       "pid": 0, "tid": tid.get(track, len(order)), "ts": e.start / 1e3,
                       "dur": e.dur / 1e3, "args": args})
        return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": {"summary": self.summary()}}

    def save_trace(self, path) -> str:
        path = os.fspath(path)
        with open(path, "w") as f:
            json.dump(self.trace(), f)
        return path

    def profile_json(self) -> dict:
        """neuron-profile's `view --output-format json` shape: a summary list and an instruction list."""
        instr = []
        for e in self.result.events:
            if e.track == "steady state":
                continue
            instr.append({"timestamp": e.start, "duration": e.dur, "label": e.track, "opcode": e.name,
                          "nki_source_location": e.loc, "shape": e.shape})
        return {"summary": [self.summary()], "instruction": instr}

    # ---- picture
    def plot(self, path, max_events: int = 20000) -> str:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise errors.make("unsupported", "Estimate.plot() needs matplotlib, which is not installed",
                              hint="pip install 'nki_lite[plot]' (or pip install matplotlib)") from None
        path = os.fspath(path)
        order = self.tracks()
        names = {e: name for e, name in ENGINE_TRACKS}
        names.update({f"q{i}": f"DMA q{i}" for i in range(self.target.dma_queues)})
        rows: dict[str, list] = {n: [] for n in order}
        evs = self.result.events
        step = max(1, len(evs) // max_events)
        for e in evs[::step]:
            rows.setdefault(names.get(e.track, e.track), []).append((e.start / 1e3, max(e.dur / 1e3, 1e-6)))
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [4, 1]})
        colors = {"Tensor": "tab:red", "Vector": "tab:blue", "Scalar": "tab:green", "GpSimd": "tab:purple",
                  "steady state": "lightgrey"}
        for k, name in enumerate(order):
            if rows.get(name):
                ax.broken_barh(rows[name], (k - 0.4, 0.8), color=colors.get(name, "tab:orange"))
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels(order, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        ax.set_title(f"{self.kernel.name} on {self.target.name}: {self.result.total_ns / 1e3:.2f} us (model)")
        s = self.summary()
        labels = ["Tensor", "Vector", "Scalar", "GpSimd", "DMA"]
        vals = [s["tensor_engine_active_time_percent"], s["vector_engine_active_time_percent"],
                s["scalar_engine_active_time_percent"], s["gpsimd_engine_active_time_percent"],
                s["dma_active_time_percent"]]
        ax2.barh(labels, vals, color=["tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange"])
        ax2.set_xlim(0, 100)
        ax2.invert_yaxis()
        ax2.set_xlabel("active %")
        ax2.set_title(f"HFU {s['hfu_estimated_percent']:.1f}%")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def _resolve(kernel_or_grid, args, kwargs, target):
    k = _as_kernel(kernel_or_grid)
    tname = k.resolve_target(target)
    traced = k.trace(*args, target=tname, **kwargs)
    return traced, TARGETS[tname]


def estimate(kernel_or_grid, *args, target: str | None = None, record_events: bool = True, **kwargs) -> Estimate:
    """Estimate one launch of `kernel_or_grid(*args, **kwargs)` on one NeuronCore of `target`."""
    traced, t = _resolve(kernel_or_grid, args, kwargs, target)
    return estimate_ir(traced, t, record_events=record_events)


def estimate_ir(kernel: ir.Kernel, target: Target | str, record_events: bool = True) -> Estimate:
    t = TARGETS[target] if isinstance(target, str) else target
    plan = Plan(kernel, t)
    result = Simulator(plan, record_events).run()
    return Estimate(kernel, t, plan, result, totals(plan))


# ------------------------------------------------------------------------------ NKI spellings

class _Latency:
    def __init__(self, us: float):
        self._us = us

    def get_latency_percentile(self, p) -> float:
        """Microseconds. The model is deterministic: every percentile is the same."""
        if not 0 <= float(p) <= 100:
            raise errors.make("argument", f"percentile must be within [0, 100], got {p!r}")
        return self._us


@dataclass
class BenchmarkResult:
    nc_latency: _Latency
    estimate: Estimate
    warmup: int
    iters: int


class _Benchmarked:
    def __init__(self, kernel, warmup, iters, target, grid=None, trace_path=None):
        self.kernel = _as_kernel(kernel)
        if grid:
            self.kernel = self.kernel[grid]
        self.warmup, self.iters, self.target, self.trace_path = warmup, iters, target, trace_path
        self.benchmark_result: BenchmarkResult | None = None

    def __getitem__(self, grid):
        return _Benchmarked(self.kernel, self.warmup, self.iters, self.target, grid, self.trace_path)

    def __call__(self, *args, **kwargs):
        est = estimate(self.kernel, *args, target=self.target, record_events=bool(self.trace_path), **kwargs)
        if self.trace_path:
            est.save_trace(self.trace_path)
        us = est.latency_us
        self.benchmark_result = BenchmarkResult(_Latency(us), est, self.warmup, self.iters)
        print("Latency results are:\nNCLatency:\n" +
              "\n".join(f"p{p} = {us:.0f}us" for p in (0, 1, 10, 25, 50, 90, 99, 100)))
        return None


def benchmark(kernel=None, *, warmup: int = 10, iters: int = 100, target: str | None = None,
              save_neff_name=None, save_trace_name=None, additional_compile_opt=None, **_ignored):
    """nki.benchmark(warmup=, iters=)(kernel)(...): `.benchmark_result.nc_latency
    .get_latency_percentile(p)` is the engine model's latency in microseconds (nothing runs).
    `save_trace_name` writes the Chrome trace there."""
    def wrap(k):
        return _Benchmarked(k, warmup, iters, target, trace_path=save_trace_name)
    if kernel is not None:
        return wrap(kernel)
    return wrap


class _Profiled:
    def __init__(self, kernel, working_directory, target, grid=None):
        self.kernel = _as_kernel(kernel)
        if grid:
            self.kernel = self.kernel[grid]
        self.working_directory, self.target = working_directory, target
        self.estimate: Estimate | None = None

    def __getitem__(self, grid):
        return _Profiled(self.kernel, self.working_directory, self.target, grid)

    def __call__(self, *args, **kwargs) -> Estimate:
        est = estimate(self.kernel, *args, target=self.target, **kwargs)
        d = os.fspath(self.working_directory)
        os.makedirs(d, exist_ok=True)
        est.save_trace(os.path.join(d, "trace.json"))
        with open(os.path.join(d, "profile.json"), "w") as f:
            json.dump(est.profile_json(), f)
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(est.summary(), f, indent=1)
        self.estimate = est
        return est


def profile(kernel=None, *, working_directory=".", target: str | None = None, save_neff_name=None,
            save_trace_name=None, overwrite=True, profile_nth=None, **_ignored):
    """nki.profile(working_directory=...)(kernel)(...): writes trace.json (Chrome trace), profile.json
    (neuron-profile JSON shape: summary + instruction list) and summary.json into the directory and
    returns the Estimate."""
    def wrap(k):
        return _Profiled(k, working_directory, target)
    if kernel is not None:
        return wrap(kernel)
    return wrap
