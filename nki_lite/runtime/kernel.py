"""Kernel objects: `@nki.jit` / `@nki_lite.kernel`, SPMD launch, signatures and the trace cache.

Contract:
- Calling a kernel binds the arguments like Python would (`inspect.Signature.bind`), converts
  tensor arguments to numpy, builds the signature key (grid, target, shapes, dtypes, constants),
  traces once per key (LRU cache), runs the chosen backend and returns numpy arrays in the shape
  of the kernel's return (None, one array, or a tuple).
- The backend is an argument (`mode=` on the decorator or the call, else NKI_LITE_MODE): never
  module patching. "interpret" is the numpy interpreter; "jit" is not built yet and says so.
- `kernel[g0, g1, ...]` binds an SPMD grid. `inspect_ir(*args)` returns `ir.format()` text.
"""
from __future__ import annotations

import difflib
import functools
import inspect
import struct
import os
import logging
import threading
from collections import OrderedDict

import numpy as np

from .. import config, errors, gcpause, hostmem, interop
from ..core import dtypes as D
from ..lang.trace import arg_spec, fn_loc, trace
from ..lang.tracer import active as _tracer_active
from ..core import ir
from ..lower.passes import pipeline as passes
from ..lower.verify import verify
from ..lang.tensor_spec import TensorSpec
from .interpreter import fill_uninit

log = logging.getLogger("nki_lite")

_LEGACY_MODES = {"auto": "auto", "simulation": "interpret", "baremetal": "auto", "benchmark": "auto",
                 "interpret": "interpret", "jit": "jit", None: None,
                 "trace": "auto"}    # legacy helpers traced into the calling kernel (see __call__)
TARGETS = ("trn1", "trn2", "trn3")

# Decorator options NKI's @nki.jit / nki.baremetal / benchmark / profile accept (both dialects) that
# only steer the Neuron compiler, runtime or framework glue: accepted, recorded in `Kernel.options`,
# otherwise ignored (docs/status.md). Anything else is a misspelling until shown otherwise.
IGNORED_JIT_OPTIONS = frozenset({
    "additional_compile_opt", "show_compiler_tb", "debug_kernel", "experimental_flags", "kernel_return",
    "compile_config", "specialization_config", "save_neff_name", "save_trace_name", "artifacts_dir",
    "enable_out_of_bound_check", "working_directory", "warmup", "iters", "profile_nth", "benchmark_name",
    "overwrite", "num_cores", "enable_cache",
})
# nki_lite's own decorator options (honoured): strict=True turns the one-time copy warning for a
# non-contiguous, unaligned or byte-swapped argument into an error (BAD_INPUTS row 8).
NKI_LITE_JIT_OPTIONS = frozenset({"strict"})
_TARGET_ALIASES = {"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


def _const_key(v):
    """Cache key of a trace-time constant: two constants share a key only if every trace could not
    tell them apart. `==`/hash is not enough: 0.0 == -0.0, True == 1 == 1.0, NaN != NaN (payloads
    differ too), np.float32(1) == 1.0, and numpy dtypes ignore metadata (tfloat32)."""
    if isinstance(v, np.dtype):
        try:
            return ("dtype", D.name_of(v))
        except D.UnknownDType:
            return ("dtype", v.str, repr(v))
    if isinstance(v, float):                       # bits: signed zeros and NaN payloads stay apart
        return (type(v), struct.pack("<d", v))
    if isinstance(v, complex):
        return (type(v), struct.pack("<dd", v.real, v.imag))
    if isinstance(v, np.generic):                  # numpy scalars: their type and their bytes
        return (type(v), v.tobytes())
    if isinstance(v, (tuple, list, frozenset)):
        items = sorted(map(_const_key, v), key=repr) if isinstance(v, frozenset) else map(_const_key, v)
        return (type(v), tuple(items))
    if isinstance(v, dict):
        return (type(v), tuple((_const_key(k), _const_key(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):                  # an array inside a constant: by value, exactly
        return (np.ndarray, v.shape, v.dtype.str, v.tobytes())
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return (type(v), repr(v))


def _to_array(name: str, value, loc):
    if isinstance(value, (type, np.generic)):  # dtype classes and numpy scalars are trace-time constants
        return value
    if isinstance(value, (np.ndarray, TensorSpec)):
        arr = value
    elif _on_accelerator(value):
        raise errors.make("argument", f"argument '{name}' is on a GPU/accelerator device; move it to the CPU "
                          "first", loc=loc, hint="e.g. tensor.cpu() or jax.device_get(array)")
    elif hasattr(value, "__array__") and not isinstance(value, (list, tuple, int, float, bool, str)):
        arr = np.asarray(value)
    elif hasattr(value, "__dlpack__"):            # CPU tensors that only speak DLPack: no copy
        try:
            arr = np.from_dlpack(value)
        except (TypeError, ValueError, BufferError, RuntimeError) as e:
            raise errors.make("argument", f"argument '{name}' could not be read through DLPack: {e}", loc=loc,
                              hint="pass a numpy array") from None
    else:
        return value
    if isinstance(arr, np.ndarray) and arr.ndim == 0:
        return arr[()]                     # a 0-d array is its scalar: a trace-time constant
    if isinstance(arr, np.ndarray):
        try:
            D.name_of(arr.dtype)
        except D.UnknownDType:
            hint = ("cast with .astype(np.float32)" if arr.dtype.kind == "f" else
                    "cast with .astype(np.int32)" if arr.dtype.kind in "iu" else None)
            raise errors.make("argument", f"argument '{name}' has dtype {arr.dtype}, which NKI devices do not "
                              "support", loc=loc, hint=hint) from None
    return arr


_DLPACK_CPU = 1                                   # DLDeviceType kDLCPU


def _on_accelerator(value) -> bool:
    """True for DLPack tensors on a device other than the CPU (also torch's `.device` spelling)."""
    dev = getattr(value, "__dlpack_device__", None)
    if callable(dev):
        try:
            return int(dev()[0]) != _DLPACK_CPU
        except Exception:                          # a malformed device query: let the array paths decide
            return False
    return hasattr(value, "__dlpack__") and "cuda" in str(getattr(value, "device", ""))


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
        self.target = _TARGET_ALIASES.get(target, target)
        if self.target is not None and self.target not in TARGETS:
            raise errors.make("argument", f"unknown target {target!r}; use one of {TARGETS}", loc=fn_loc(fn))
        self.grid = grid
        _check_options(options, fn)
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
            _warn_once("jit-unsupported", "the LLVM JIT does not support this platform; running kernels in the "
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
            bound.arguments[name] = a = _to_array(name, bound.arguments[name], loc)
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
                                  f"; the kernel declares {name}: {_spec_text(spec)}", loc=fn_loc(self.fn),
                                  hint="pass an array of the declared shape and dtype, or change the annotation")

    def key(self, bound, target: str) -> tuple:
        parts = []
        for name, v in bound.arguments.items():
            spec = arg_spec(v)
            parts.append((name, ("tensor",) + spec) if spec is not None else (name, _const_key(v)))
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
                               outputs_in_params=getattr(self, "outputs_in_params", False))
            except (AttributeError, TypeError) as e:
                if not isinstance(e, errors.NkiLiteError):
                    _blame_sequence_argument(bound, e, fn_loc(self.fn))
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
                       outputs_in_params=getattr(self, "outputs_in_params", False))
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
            outs = _as_tuple(kwargs["out"]) if only_out else None
            try:
                fast = self._fast.get((self.grid, _env_stamp(), tuple(map(_fast_key, args)), _outs_key(outs)))
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
                                    _as_tuple(out) if out is not None else None)
        else:
            from .interpreter import run
            inputs = {name: bound.arguments[name] for name in kernel.params}
            results = run(kernel, inputs)
            for name, arr in provided.items():
                np.copyto(arr, results[name])
                results[name] = arr
        for name in kernel.outputs:
            b = kernel.buffer(name)
            if b.kind == "input" and b.mutable and results[name] is not bound.arguments[name]:
                np.copyto(bound.arguments[name], results[name])
        outs = tuple(results[n] for n in kernel.outputs)
        if kernel.return_kind == "none":
            return None
        if kernel.return_kind == "single":
            return outs[0]
        return outs


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
        stamp = _env_stamp()
        seen = self.stats.setdefault("_knobs", stamp)            # stats is shared with grid-bound copies
        if seen == stamp:
            return
        for name, old, new in zip(_STAMP_KNOBS, seen, stamp):
            if old != new:
                _warn_once(f"knob-{id(self.stats)}-{name}", f"{name} changed from {_knob_text(old)} to "
                           f"{_knob_text(new)} after kernel '{self.fn.__name__}' was first called; the new value "
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
            problem = _out_problem(a, b)
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
        if provided:
            for name, a in provided.items():
                if ck.prefill.get(name, True):
                    fill_uninit(a, kernel.buffer(name).dtype)
            return ck.launch({**self._jit_inputs(kernel, bound), **provided})
        return ck.launch(self._jit_inputs(kernel, bound))

    def _jit_inputs(self, kernel: ir.Kernel, bound) -> dict:
        arrays = {}
        for name in kernel.params:
            b = kernel.buffer(name)
            a = bound.arguments[name]
            want = D.storage(b.dtype)
            if not a.flags.c_contiguous or a.dtype != want or not a.flags.aligned:
                _warn_once(f"copy-{name}", f"argument '{name}' is not a C-contiguous aligned {b.dtype} array; "
                           "nki_lite copies it for every call (pass np.ascontiguousarray(...) to avoid the copy)",
                           category=NkiLitePerformanceWarning)
                a = np.ascontiguousarray(a, dtype=want)
            if b.mutable and any(np.may_share_memory(a, bound.arguments[o]) for o in kernel.params if o != name):
                a = a.copy()                      # aliasing another argument: run on a private copy
            arrays[name] = a
        return arrays

    def _remember_fast_path(self, kernel: ir.Kernel, ck, bound, args: tuple, outs: tuple | None) -> None:
        """Cache a launcher for this exact argument signature (and `out=` arrays' signature, which the
        general path has validated once): a repeated call skips binding, tracing lookups and the
        IR-keyed compile cache (a few microseconds of Python). Per call the launcher still checks
        what the key does not cover: out= arrays writable, aligned and not overlapping an argument."""
        names = list(self.signature.parameters)
        if len(args) != len(bound.arguments) or names[:len(args)] != list(bound.arguments):
            return
        pos = {n: i for i, n in enumerate(names)}
        order = [n for n in kernel.outputs if kernel.buffer(n).kind == "output"]    # out= order
        plan = []
        for name in ck.gen.arg_buffers:
            b = kernel.buffer(name)
            if b.kind == "input":
                if b.mutable or b.dtype == "tfloat32":
                    return                      # writes back / needs value checks: general path
                a = args[pos[name]]
                if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.aligned
                        and a.dtype == D.storage(b.dtype)):
                    return
                plan.append(("arg", pos[name]))
            elif b.kind == "const":
                plan.append(("const", ck.consts[name]))
            else:
                plan.append(("out", (b.shape, D.storage(b.dtype), b.dtype, ck.prefill.get(name, True),
                                     order.index(name))))
        out_index = [ck.gen.arg_buffers.index(n) for n in kernel.outputs]
        if outs is not None and len(outs) != len(order):
            return
        kind = kernel.return_kind
        call = ck.call
        slow = self

        def launcher(call_args, out_arrays=None):
            if out_arrays is not None and not all(
                    o.flags.writeable and o.flags.aligned and not any(
                        isinstance(a, np.ndarray) and np.may_share_memory(o, a) for a in call_args)
                    for o in out_arrays):
                return slow(*call_args, out=out_arrays if len(out_arrays) > 1 else out_arrays[0],
                            mode="jit")                # the general path raises the right error
            bufs = []
            for how, what in plan:
                if how == "arg":
                    bufs.append(call_args[what])
                elif how == "const":
                    bufs.append(what)
                else:
                    shape, storage, dtype, fill, k = what
                    if out_arrays is None:
                        try:
                            o = np.empty(shape, storage)
                        except (MemoryError, ValueError):      # NL-E403 naming the output's line
                            o = hostmem.empty(shape, storage, f"an output of shape {shape} ({dtype})", kernel.loc)
                    else:
                        o = out_arrays[k]
                    if fill:                          # not proven fully written: unwritten = NaN
                        fill_uninit(o, dtype)
                    bufs.append(o)
            call(bufs)
            if kind == "single":
                return bufs[out_index[0]]
            if kind == "none":
                return None
            return tuple(bufs[i] for i in out_index)

        try:
            key = (self.grid, _env_stamp(), tuple(map(_fast_key, args)), _outs_key(outs))
        except TypeError:
            return                                      # unhashable constants: no fast path
        with self._lock:
            if len(self._fast) >= config.get("NKI_LITE_TRACE_CACHE_SIZE"):
                self._fast.clear()
            self._fast[key] = launcher

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


_STAMP_KNOBS = ("NKI_LITE_MODE", "NKI_LITE_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_LITE_DEBUG",
                "NKI_LITE_JIT_OPT", "NKI_LITE_DEBUG_NANS", "NKI_LITE_DEBUG_UNINIT", "NKI_LITE_SHUFFLE",
                "NKI_LITE_STRICT_CAPACITY")


_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
_STAMP_KEYS = tuple(os.fsencode(k) for k in _STAMP_KNOBS)


def _env_stamp() -> tuple:
    """The knobs a cached launcher depends on, read now (knobs are read at call time). On POSIX this
    reads os.environ's backing dict directly (what os.environ.get does, minus ~3 us of encoding)."""
    if _ENV_DATA is not None:
        return tuple(map(_ENV_DATA.get, _STAMP_KEYS))
    env = os.environ
    return tuple(env.get(k) for k in _STAMP_KNOBS)


def _knob_text(v) -> str:
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    return "unset" if v is None else repr(v)


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _outs_key(outs: tuple | None):
    """Fast-path key part of `out=` arrays (None: no out=); raises TypeError for a non-array."""
    if outs is None:
        return None
    if not all(isinstance(o, np.ndarray) for o in outs):
        raise TypeError("out= holds a non-array")
    return tuple((o.shape, o.dtype, o.strides) for o in outs)


def _fast_key(a):
    """Fast-path key of one argument: arrays by layout (the launcher re-checks nothing else, so
    alignment is part of the key), constants exactly as the trace cache keys them."""
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            raise TypeError("a 0-d array is a constant: keyed by value on the general path")
        return (a.shape, a.dtype, a.strides, a.flags.aligned)
    if isinstance(a, (list, dict)):
        raise TypeError("mutable constant")        # the general path keys it by value each call
    return _const_key(a)


class KnobChangedWarning(UserWarning):
    """An NKI_LITE_* knob changed between two calls of one kernel (BAD_INPUTS row 30)."""


class NkiLitePerformanceWarning(UserWarning):
    """A call works but is slower than it needs to be (e.g. a copied non-contiguous argument)."""


_WARNED: set = set()


def _warn_once(key: str, message: str, category=UserWarning) -> None:
    import warnings
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, category, stacklevel=4)


def _out_problem(a, b: ir.Buffer) -> str | None:
    """What is wrong with an `out=` array for buffer b, in words (None: nothing)."""
    if not isinstance(a, np.ndarray):
        return f"is a {type(a).__name__}, not a numpy array"
    want = D.storage(b.dtype)
    if a.dtype != want:
        return f"has dtype {a.dtype} (the output is {b.dtype}, stored as {want})"
    if a.shape != tuple(b.shape):
        return f"has shape {a.shape} (the output's shape is {tuple(b.shape)})"
    if not a.flags.writeable:
        return "is read-only"
    if not a.flags.c_contiguous:
        return f"is not C-contiguous (strides {a.strides})"
    if not a.flags.aligned:
        return "is not aligned to its element size"
    return None


def _numbers(v) -> bool:
    return isinstance(v, (int, float, np.number)) or (isinstance(v, (list, tuple)) and len(v) > 0
                                                       and all(map(_numbers, v)))


def _blame_sequence_argument(bound, exc: Exception, loc) -> None:
    """A Python list/tuple of numbers passed where the kernel uses a tensor fails inside the user's
    code with `'list' object has no attribute 'shape'`: say which argument and how to fix it."""
    for name, v in bound.arguments.items():
        if isinstance(v, (list, tuple)) and _numbers(v) and type(v).__name__ in str(exc):
            raise errors.make("argument", f"argument '{name}' is a Python {type(v).__name__}, and the kernel uses "
                              f"it as a tensor ({exc})", loc=loc,
                              hint=f"pass np.asarray({name}, dtype=np.float32) (lists and tuples are trace-time "
                                   "constants)") from exc


def _spec_text(spec: TensorSpec) -> str:
    kind = "nt.mutable_tensor" if spec.mutable else "nt.tensor"
    parts = [str(list(spec.shape))] if spec.shape is not None else []
    if spec.dtype is not None:
        try:
            parts.append(D.name_of(spec.dtype))
        except D.UnknownDType:
            parts.append(repr(spec.dtype))
    return f"{kind}[{', '.join(parts)}]"


def _check_options(options: dict, fn) -> None:
    """Unknown decorator options are errors with a did-you-mean hint: `@nki.jit(stirct=True)` must
    not silently do nothing."""
    for name in options:
        if name not in IGNORED_JIT_OPTIONS | NKI_LITE_JIT_OPTIONS:
            known = sorted(IGNORED_JIT_OPTIONS | NKI_LITE_JIT_OPTIONS | {"mode", "target", "platform_target"})
            close = difflib.get_close_matches(name, known, n=1)
            raise errors.make("argument", f"unknown @nki.jit option {name}=", loc=fn_loc(fn),
                              hint=(f"did you mean {close[0]}=? " if close else "") +
                              "options: " + ", ".join(known))


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
            _check_options(options, fn.fn)
            return fn
        return Kernel(fn, **options)
    if kernel is not None and callable(kernel):
        return wrap(kernel)
    return wrap
