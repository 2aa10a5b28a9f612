"""Kernel objects: `@nki.jit` / `@nki_lite.kernel`, SPMD launch, signatures and the trace cache.

Contract:
- Calling a kernel binds the arguments like Python would (`inspect.Signature.bind`), converts
  tensor arguments to numpy, builds the signature key (grid, target, shapes, dtypes, constants),
  traces once per key (LRU cache), runs the chosen backend and returns numpy arrays in the shape
  of the kernel's return (None, one array, or a tuple).
- The backend is an argument (`mode=` on the decorator or the call, else NKI_LITE_MODE): never
  module patching. "interpret" is the numpy interpreter; "jit" the LLVM JIT: the compiled kernel
  (runtime/jit.py's cache) runs through its one launch path (runtime/launch.py), and a repeated
  call with the same argument layouts and knob snapshot reuses a cached launcher
  (runtime/fastpath.py, runtime/knobs.py) that skips binding and cache look-ups.
- Arguments are converted and keyed by runtime/binding.py; one-time warnings are runtime/notices.py.
- `kernel[g0, g1, ...]` binds an SPMD grid. `inspect_ir(*args)` returns `ir.format()` text.
"""
from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections import OrderedDict

import numpy as np

from .. import config, errors, gcpause, interop
from ..core import dtypes as D
from ..core import ir
from ..lang.trace import arg_spec, fn_loc, trace
from ..lang.tracer import active as _tracer_active
from ..lower.passes import pipeline as passes
from ..lower.verify import verify
from ..lang.tensor_spec import TensorSpec
from . import knobs
from .binding import (as_root, call_result, as_tuple, blame_sequence_argument, check_options, const_key,
                      fast_key, out_problem, outs_key, spec_text, to_array)
from .fastpath import cached_launcher
from .notices import KnobChangedWarning, NkiLitePerformanceWarning, knob_text, warn_once

log = logging.getLogger("nki_lite")

_LEGACY_MODES = {"auto": "auto", "simulation": "interpret", "baremetal": "auto", "benchmark": "auto",
                 "interpret": "interpret", "jit": "jit", None: None,
                 "trace": "auto"}    # legacy helpers traced into the calling kernel (see __call__)
TARGETS = ("trn1", "trn2", "trn3")

_TARGET_ALIASES = {"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


class Kernel:
    """A traced-and-run NKI kernel (what @nki.jit returns)."""

    def __init__(self, fn, *, mode: str | None = None, target: str | None = None, grid: tuple = (), **options):
        functools.update_wrapper(self, fn)
        self.fn = fn
        if mode not in _LEGACY_MODES:
            if mode in ("jax", "torchxla"):
                raise errors.make("unsupported", f"mode={mode!r}: framework integration is not built in nki_lite",
                                  loc=fn_loc(fn), hint="call the kernel with numpy arrays")
            raise errors.make("argument", f"unknown mode={mode!r}; use 'interpret' or 'jit'", loc=fn_loc(fn))
        self.mode = _LEGACY_MODES[mode]
        self.outputs_in_params = mode == "trace"    # legacy nki.trace kernels write tensors passed in
        self.write_back_params = False               # current-dialect kernels may update inputs (nki/launch.py)
        self.target = _TARGET_ALIASES.get(target, target)
        if self.target is not None and self.target not in TARGETS:
            raise errors.make("argument", f"unknown target {target!r}; use one of {TARGETS}", loc=fn_loc(fn))
        self.grid = grid
        check_options(options, fn)
        self.options = options
        self.strict = bool(options.get("strict", False))
        self.signature = inspect.signature(fn)
        self._cache: OrderedDict = OrderedDict()
        self._fast: dict = {}
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "misses": 0, "traces": 0, "compiles": 0, "disk_hits": 0}

    # ---- launch configuration
    def __getitem__(self, grid) -> "Kernel":
        grid = grid if isinstance(grid, tuple) else (grid,)
        dims = []
        for g in grid:
            n = getattr(g, "size", g)
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n <= 0:
                raise errors.make("argument", f"SPMD grid dimensions must be positive ints, got {g!r}",
                                  loc=fn_loc(self.fn))
            dims.append(int(n))
        k = Kernel.__new__(Kernel)
        k.__dict__.update(self.__dict__)
        k.grid = tuple(dims)
        return k

    def resolve_target(self, target: str | None = None) -> str:
        t = target or self.target or config.default_target()
        t = _TARGET_ALIASES.get(t, t)
        if t not in TARGETS:
            raise errors.make("argument", f"unknown target {t!r}; use one of {TARGETS}")
        return t

    def resolve_mode(self, mode: str | None = None) -> str:
        m = _LEGACY_MODES.get(mode, mode) or self.mode or config.get("NKI_LITE_MODE")
        if m not in ("auto", "interpret", "jit"):
            raise errors.make("argument", f"unknown mode {m!r}; use 'interpret' or 'jit'")
        if m in ("auto", "jit"):
            from ..lower.llvm.target import jit_supported
            if jit_supported():
                return "jit"
            warn_once("jit-unsupported", "the LLVM JIT does not support this platform; running kernels in the "
                       "numpy interpreter")
            return "interpret"
        return m

    # ---- tracing
    def bind(self, args, kwargs):
        loc = fn_loc(self.fn)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise errors.make("argument", f"{e}; the kernel's signature is {self.fn.__name__}{self.signature}",
                              loc=loc) from None
        bound.apply_defaults()
        for name in list(bound.arguments):
            bound.arguments[name] = a = to_array(name, bound.arguments[name], loc)
            if self.strict and isinstance(a, np.ndarray) and not (
                    a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative):
                raise errors.make("argument", f"argument '{name}' is not a C-contiguous, aligned, native-byte-order "
                                  f"array (strides {a.strides}); strict=True refuses to copy it", loc=loc,
                                  hint="pass np.ascontiguousarray(...), or drop strict=True to let nki_lite copy")
        self._check_declared(bound)
        return bound

    def _declared_specs(self) -> dict:
        """Parameter annotations that declare a shape or dtype (`x: nt.tensor[[128, 512], nl.bfloat16]`),
        resolved once. String annotations (`from __future__ import annotations`) are evaluated in the
        kernel's globals; one that cannot be evaluated declares nothing."""
        specs = self.__dict__.get("_specs")
        if specs is None:
            specs = {}
            for name, p in self.signature.parameters.items():
                ann = p.annotation
                if isinstance(ann, str):
                    try:
                        ann = eval(ann, dict(getattr(self.fn, "__globals__", {})))  # noqa: S307 - the user's own code
                    except Exception:                     # names bound later or only for type checkers
                        continue
                if isinstance(ann, TensorSpec) and (ann.shape is not None or ann.dtype is not None):
                    specs[name] = ann
            self._specs = specs
        return specs

    def _check_declared(self, bound) -> None:
        for name, spec in self._declared_specs().items():
            a = bound.arguments.get(name)
            if not isinstance(a, (np.ndarray, TensorSpec)):
                continue
            got_shape = tuple(a.shape) if a.shape is not None else None
            shape_bad = spec.shape is not None and got_shape != tuple(spec.shape)
            dtype_bad = False
            if spec.dtype is not None:
                try:
                    want = D.name_of(spec.dtype)
                    got = D.name_of(a.dtype if a.dtype is not None else np.float32)
                    dtype_bad = want != got
                except D.UnknownDType:
                    pass
            if shape_bad or dtype_bad:
                what = []
                if shape_bad:
                    what.append(f"shape {got_shape} (declared {tuple(spec.shape)})")
                if dtype_bad:
                    what.append(f"dtype {got} (declared {want})")
                raise errors.make("argument", f"argument '{name}' has " + " and ".join(what) +
                                  f"; the kernel declares {name}: {spec_text(spec)}", loc=fn_loc(self.fn),
                                  hint="pass an array of the declared shape and dtype, or change the annotation")

    def key(self, bound, target: str) -> tuple:
        parts = []
        for name, v in bound.arguments.items():
            spec = arg_spec(v)
            parts.append((name, ("tensor",) + spec) if spec is not None else (name, const_key(v)))
        # the strict-capacity knob changes what verification raises: a cached trace must not hide it
        return (self.grid, target, tuple(parts), config.get("NKI_LITE_STRICT_CAPACITY"))

    def trace(self, *args, target: str | None = None, **kwargs) -> ir.Kernel:
        bound = self.bind(args, kwargs)
        return self._traced(bound, self.resolve_target(target))

    def _traced(self, bound, target: str) -> ir.Kernel:
        key = self.key(bound, target)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.stats["hits"] += 1
                return hit
        self.stats["misses"] += 1
        with gcpause.paused():                   # large acyclic IR: no collector passes over it
            try:
                traced = trace(self.fn, bound, self.grid, target,
                               outputs_in_params=getattr(self, "outputs_in_params", False),
                               write_back_params=getattr(self, "write_back_params", False))
            except (AttributeError, TypeError) as e:
                if not isinstance(e, errors.NkiLiteError):
                    blame_sequence_argument(bound, e, fn_loc(self.fn))
                raise
            kernel = passes.run_shared(traced)
            verify(kernel)
        self.stats["traces"] += 1
        log.debug("traced %s grid=%s target=%s: %d instructions", self.fn.__name__, self.grid, target,
                  ir.count_instrs(kernel))
        with self._lock:
            self._cache[key] = kernel
            while len(self._cache) > config.get("NKI_LITE_TRACE_CACHE_SIZE"):
                self._cache.popitem(last=False)
        return kernel

    def inspect_ir(self, *args, after: str | None = None, target: str | None = None, **kwargs) -> str:
        """The traced IR (as every backend sees it); with `after="pass-name"`, the IR right after that
        pass of lower/passes/pipeline.py (a fresh trace, verified like a call)."""
        if after is not None:
            passes.find(after, fn_loc(self.fn))            # an unknown name fails before tracing
        kernel = self.trace(*args, target=target, **kwargs)
        if after is None:
            return ir.format(kernel)
        traced = trace(self.fn, self.bind(args, kwargs), self.grid, self.resolve_target(target),
                       outputs_in_params=getattr(self, "outputs_in_params", False),
                       write_back_params=getattr(self, "write_back_params", False))
        return ir.format(passes.run_through(traced, after))

    # ---- running
    def __call__(self, *args, mode: str | None = None, target: str | None = None, **kwargs):
        tr = _tracer_active()
        if tr is not None:
            # called inside a kernel being traced (a legacy @nki.jit(mode="trace") / @nki.trace helper,
            # or another kernel): NKI traces its body into the caller, so it runs inline on the
            # caller's tiles and tensors
            return self._inline(tr, args, kwargs)
        only_out = len(kwargs) == 1 and "out" in kwargs and "out" not in self.signature.parameters
        if (not kwargs or only_out) and mode is None and target is None:
            outs = as_tuple(kwargs["out"]) if only_out else None
            try:
                fast = self._fast.get((self.grid, knobs.stamp(), tuple(map(fast_key, args)), outs_key(outs)))
            except TypeError:                      # an unhashable constant: take the general path
                fast = None
            if fast is not None:
                self.stats["hits"] += 1
                return fast(args, outs)
        conv = interop.converter(args, kwargs)
        if conv is not None:           # torch / jax / DLPack tensors in (no copy): results as the caller's type
            return conv(self(*interop.numpy_args(args), mode=mode, target=target, **interop.numpy_kwargs(kwargs)))
        self._note_knobs()
        out = kwargs.pop("out", None) if "out" not in self.signature.parameters else None
        bound = self.bind(args, kwargs)
        for name, v in bound.arguments.items():
            if isinstance(v, TensorSpec):
                raise errors.make("argument", f"argument '{name}' is a placeholder (nt.tensor); running a kernel "
                                  "needs arrays", loc=fn_loc(self.fn),
                                  hint="use kernel.inspect_ir(...) to trace placeholders")
        kernel = self._traced(bound, self.resolve_target(target))
        self._check_mutables(kernel, bound)
        provided = self._provided_outputs(kernel, out, bound)
        from .debug_checks import jit_needs_interpreter
        if self.resolve_mode(mode) == "jit" and not jit_needs_interpreter():
            fast_ok = not kwargs and mode is None and target is None
            results = self._run_jit(kernel, bound, args if fast_ok else None, provided,
                                    as_tuple(out) if out is not None else None)
        else:
            from .interpreter import run
            inputs = {name: bound.arguments[name] for name in kernel.params}
            results = run(kernel, inputs)
            for name, arr in provided.items():
                np.copyto(arr, results[name])
                results[name] = arr
        return call_result(kernel, results, bound.arguments)


    def _inline(self, tr, args, kwargs):
        """Trace this kernel's body into the kernel being traced. A kernel already being traced (itself,
        or one of the kernels inlining it) is recursion, which a traced kernel cannot express."""
        from ..loc import capture_loc
        stack = tr.__dict__.setdefault("inlined_fns", [])
        if self.fn is getattr(tr, "fn", None) or self.fn in stack:
            raise errors.make("recursive_kernel", f"kernel '{self.fn.__name__}' calls itself: a kernel is traced "
                              "once into straight-line instructions and loops, so it cannot recurse",
                              loc=capture_loc())
        stack.append(self.fn)
        try:
            return self.fn(*args, **kwargs)
        finally:
            stack.pop()

    def _note_knobs(self) -> None:
        """BAD_INPUTS row 30: knobs are read at call time; when one changes between two calls of the same
        kernel, say so once per kernel and knob (the new value applies from this call)."""
        stamp = knobs.stamp()[:knobs.NUM_THREADS]          # the thread count changes no result: no warning
        seen = self.stats.setdefault("_knobs", stamp)            # stats is shared with grid-bound copies
        if seen == stamp:
            return
        for name, old, new in zip(knobs.STAMP_KNOBS, seen, stamp):
            if old != new:
                warn_once(f"knob-{id(self.stats)}-{name}", f"{name} changed from {knob_text(old)} to "
                           f"{knob_text(new)} after kernel '{self.fn.__name__}' was first called; the new value "
                           "applies from this call on (nki_lite reads knobs at every call)", KnobChangedWarning)
        self.stats["_knobs"] = stamp

    def _check_mutables(self, kernel: ir.Kernel, bound) -> None:
        """Mutable parameters must be writable; one that shares memory with another argument is run
        on a private copy (written back after the call), so every backend sees the inputs as they
        were when the call started — the interpreter's semantics."""
        for name in kernel.params:
            b = kernel.buffer(name)
            if not b.mutable:
                continue
            a = bound.arguments[name]
            if not a.flags.writeable:
                raise errors.make("argument", f"mutable parameter '{name}' is a read-only array",
                                  loc=fn_loc(self.fn), hint="pass a writable array (e.g. arr.copy())")

    # ---- the JIT
    def _compiled(self, kernel: ir.Kernel):
        from .jit import lookup
        ck, source = lookup(kernel, debug=config.get("NKI_LITE_DEBUG"))
        self.stats["compiles"] += source == "compile"          # LLVM compiles in this process
        self.stats["disk_hits"] += source == "disk"            # loaded from the JIT disk cache instead
        return ck

    def _provided_outputs(self, kernel: ir.Kernel, out, bound) -> dict:
        """`kernel(..., out=arr)` / `out=(a, b)`: results go into caller-provided arrays (C-contiguous,
        writable, the outputs' shapes and dtypes). Not available when the kernel has a parameter
        named `out` (then `out=` is that argument)."""
        if out is None:
            return {}
        arrays = out if isinstance(out, (tuple, list)) else (out,)
        names = [n for n in kernel.outputs if kernel.buffer(n).kind == "output"]
        if len(arrays) != len(names):
            raise errors.make("argument", f"out= has {len(arrays)} array(s); the kernel returns {len(names)} new "
                              "tensor(s)", loc=fn_loc(self.fn))
        res = {}
        for name, a in zip(names, arrays):
            b = kernel.buffer(name)
            a = as_root(kernel, kernel.outputs.index(name), a)
            problem = out_problem(a, b)
            if problem:
                raise errors.make("argument", f"out= array for '{name}' {problem}; it must be a writable "
                                  f"C-contiguous {b.dtype} array of shape {b.shape}", loc=fn_loc(self.fn))
            if any(isinstance(v, np.ndarray) and np.may_share_memory(a, v) for v in bound.arguments.values()):
                raise errors.make("argument", f"out= array for '{name}' overlaps an input argument",
                                  loc=fn_loc(self.fn), hint="pass a separate output array")
            res[name] = a
        return res

    def _run_jit(self, kernel: ir.Kernel, bound, args: tuple | None = None, provided: dict | None = None,
                 outs: tuple | None = None) -> dict:
        ck = self._compiled(kernel)
        if args is not None:
            self._remember_fast_path(kernel, ck, bound, args, outs)
        return ck.launch({**self._jit_inputs(kernel, bound), **(provided or {})})

    def _jit_inputs(self, kernel: ir.Kernel, bound) -> dict:
        arrays = {}
        for name in kernel.params:
            b = kernel.buffer(name)
            a = bound.arguments[name]
            want = D.storage(b.dtype)
            if not a.flags.c_contiguous or a.dtype != want or not a.flags.aligned:
                warn_once(f"copy-{name}", f"argument '{name}' is not a C-contiguous aligned {b.dtype} array; "
                           "nki_lite copies it for every call (pass np.ascontiguousarray(...) to avoid the copy)",
                           category=NkiLitePerformanceWarning)
                a = np.ascontiguousarray(a, dtype=want)
            if b.mutable and any(np.may_share_memory(a, bound.arguments[o]) for o in kernel.params if o != name):
                a = a.copy()                      # aliasing another argument: run on a private copy
            arrays[name] = a
        return arrays

    def _remember_fast_path(self, kernel: ir.Kernel, ck, bound, args: tuple, outs: tuple | None) -> None:
        """Cache a launcher for this exact argument signature and knob snapshot (runtime/fastpath.py)."""
        made = cached_launcher(self, kernel, ck, bound, args, outs)
        if made is None:
            return
        try:
            key = (self.grid, made.stamp, tuple(map(fast_key, args)), outs_key(outs))
        except TypeError:
            return                                      # unhashable constants: no fast path
        with self._lock:
            if len(self._fast) >= config.get("NKI_LITE_TRACE_CACHE_SIZE"):
                self._fast.clear()
            self._fast[key] = made

    def cache_info(self) -> dict:
        """Trace and compile statistics of this kernel: hits, misses, traces, compiles (LLVM compiles in
        this process) and disk_hits (kernels loaded from the JIT disk cache, docs/jit_cache.md)."""
        return {k: v for k, v in self.stats.items() if not k.startswith("_")}

    def inspect_llvm(self, *args, optimized: bool = True, **kwargs) -> str:
        kernel = self.trace(*args, **kwargs)
        if not optimized:
            from ..lower.llvm.codegen import generate
            return generate(kernel, config.get("NKI_LITE_DEBUG")).text
        return self._compiled(kernel).module.llvm_ir

    def inspect_threads(self, *args, **kwargs) -> str:
        """Which parts of the kernel the JIT runs on threads for these arguments, and why the others
        run serially (lower/parallel.py)."""
        from ..lower.parallel import explain
        return explain(self.trace(*args, **kwargs))

    def inspect_asm(self, *args, **kwargs) -> str:
        return self._compiled(self.trace(*args, **kwargs)).module.asm()


def jit(func=None, *, mode: str | None = None, target: str | None = None, platform_target: str | None = None,
        **options):
    """@nki.jit / @nki_lite.kernel, with or without arguments."""
    def wrap(fn):
        return Kernel(fn, mode=mode, target=target or platform_target, **options)
    if func is not None and callable(func):
        return wrap(func)
    return wrap


def trace_decorator(func=None, **options):
    """Legacy `nki.trace` (`from neuronxcc.nki import trace`): @nki.jit(mode="trace") — a function that
    runs as a kernel when called with arrays and is traced into the caller inside a kernel."""
    options.pop("mode", None)
    return jit(func, mode="trace", **options)


def simulate_kernel(kernel, *args, **kwargs):
    """nki.simulate_kernel(kernel, *args): run on the CPU interpreter."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    return k(*args, mode="interpret", **kwargs)


def baremetal(kernel=None, **options):
    """nki.baremetal: legacy "compile and run on the device" -> runs on the CPU interpreter here.
    save_neff_name / save_trace_name / additional_compile_opt / artifacts_dir are accepted and ignored."""
    def wrap(fn):
        if isinstance(fn, Kernel):
            check_options(options, fn.fn)
            return fn
        return Kernel(fn, **options)
    if kernel is not None and callable(kernel):
        return wrap(kernel)
    return wrap
