"""Kernels of the current `nki` dialect: nki.jit, launching with kernel[lnc] / kernel[grid], nki.simulate.

Contract:
- `nki.jit(fn)` / `nki.jit(mode=..., platform_target=..., **options)` wraps nki_lite's Kernel (same
  trace, cache, verification and backends). `mode=` and `platform_target=` (deprecated by NKI 0.3,
  nki/migration) are accepted as in nki_lite's legacy jit; without them the target comes from
  NEURON_PLATFORM_TARGET_OVERRIDE (then NKI_LITE_TARGET, then trn2) and the backend from NKI_LITE_MODE.
- `kernel[n]` with one int is a launch on n logical NeuronCores (nki/get-started/about/lnc.rst): the
  body sees nl.num_programs() == n and nl.program_id(0) in [0, n), which is nki_lite's grid of n
  programs. n must be 1 or 2, and 2 needs a target with LNC=2 (trn2, trn3): otherwise NL-E915 at the
  call. `kernel(...)` is `kernel[1](...)`. A tuple (or nl.nc / spmd_dim objects) is the legacy SPMD grid.
- `NKI_SIMULATOR=1` and `nki.simulate(kernel)(...)` run the kernel on nki_lite's default backend,
  which is what every call does anyway (nki_lite is a CPU simulator): simulate accepts a plain function
  (wrapped with nki.jit), a jitted kernel or a launched one (`nki.simulate(k[2])`).
- A kernel may write its tensor parameters (in-place updates): each written parameter is written back
  into the caller's array after the call, returned or not (lang/trace.py `write_back_params`); the
  legacy dialect keeps its inputs immutable unless annotated nt.mutable_tensor (NL-E701).
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..loc import capture_loc
from . import _bridge

# logical NeuronCores per target (nki/get-started/about/lnc.rst: LNC=2 on Trn2 and Trn3; Trn1 has
# no LNC=2 configuration)
MAX_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}


class Kernel:
    """An @nki.jit kernel of the current dialect (a launch configuration over nki_lite's Kernel)."""

    def __init__(self, inner: _bridge.Kernel, lnc: int | None = None, grid: tuple | None = None):
        self.inner = inner
        self.lnc = lnc
        self.grid = grid
        self.__wrapped__ = inner.fn
        self.__name__ = getattr(inner.fn, "__name__", "kernel")
        self.__doc__ = getattr(inner.fn, "__doc__", None)

    @property
    def fn(self):
        return self.inner.fn

    def __getitem__(self, key) -> "Kernel":
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            return Kernel(self.inner, lnc=int(key))
        return Kernel(self.inner, grid=key)

    def _launch(self, target: str | None = None) -> _bridge.Kernel:
        if self.grid is not None:
            return self.inner[self.grid]
        lnc = 1 if self.lnc is None else self.lnc
        t = self.inner.resolve_target(target)
        if not 1 <= lnc <= MAX_LNC[t]:
            raise errors.make("lnc", f"{self.__name__}[{lnc}]: {t} runs a kernel on 1"
                              f"{' or 2' if MAX_LNC[t] > 1 else ''} logical NeuronCore(s), not {lnc}",
                              loc=capture_loc())
        return self.inner[lnc]

    def __call__(self, *args, **kwargs):
        launched = self._launch(kwargs.get("target"))
        if self.grid is None and (self.lnc or 1) > 1:
            # LNC=2: per-core traces when the kernel branches on the core id or synchronises the cores
            from ..runtime import lnc
            return lnc.run(self.inner, self.lnc, args, kwargs)
        return launched(*args, **kwargs)

    def __getattr__(self, name):
        # estimate / inspect_ir / cache_info / stats ... of nki_lite's Kernel, on this launch
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._launch(), name)


def jit(fn=None, **options):
    """@nki.jit, with or without options."""
    def wrap(f):
        if isinstance(f, (Kernel, _bridge.Kernel)):
            if not options:
                return f if isinstance(f, Kernel) else Kernel(f)
            f = f.fn                   # re-jitting with options: the options apply to the function
        inner = _bridge.Kernel(f, mode=options.pop("mode", None),
                               target=options.pop("target", None) or options.pop("platform_target", None),
                               **options)
        # kernels may update their inputs in place (torch-neuronx declares such updates with
        # mutates_args); the written parameters are written back to the caller's arrays
        inner.write_back_params = True
        return Kernel(inner)
    if fn is not None and callable(fn):
        return wrap(fn)
    return wrap


def as_kernel(kernel) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, _bridge.Kernel):
        return Kernel(kernel)
    if callable(kernel):
        return jit(kernel)
    raise errors.make("argument", f"nki.simulate takes a kernel or a function, got {type(kernel).__name__}",
                      loc=capture_loc())


def simulate(kernel):
    """nki.simulate(kernel)(*args): run the kernel on the CPU (nki_lite's default backend)."""
    k = as_kernel(kernel)

    def run(*args, **kwargs):
        return k(*args, **kwargs)
    run.__name__ = f"simulate({k.__name__})"
    return run
