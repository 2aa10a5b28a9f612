"""nki.simulator: the simulator entry point serving stacks call (vllm-neuron's CPU mode).

Contract: `simulate_kernel(func, args=(), kwargs=None, lnc=1)` runs `func` (a plain function or an
@nki.jit kernel) as `nki.jit(func)[lnc](*args, **kwargs)` on nki_lite's default backend and returns
what the kernel returns (numpy arrays).
"""
from __future__ import annotations

from .launch import as_kernel


def simulate_kernel(func, args=(), kwargs=None, lnc=1):
    return as_kernel(func)[int(lnc)](*tuple(args), **dict(kwargs or {}))
