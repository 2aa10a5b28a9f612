"""The numpy interpreter of the tile IR: the oracle that defines what every kernel computes.

Contract:
- `run(kernel, inputs, ...)` executes an `ir.Kernel` on numpy arrays and returns the output arrays
  by buffer name. Inputs are copied (a kernel cannot touch the caller's arrays) except
  nt.mutable_tensor parameters, whose final contents the caller writes back.
- SPMD programs run one after another in row-major grid order; each has private SBUF/PSUM.
- Every new on-chip allocation (`alloc`) and every new HBM tensor is filled with NaN (integers:
  a sentinel, bool: True), so reading uninitialised memory shows up in results.
- Every access is bounds-checked per dimension (only where the instruction's mask is true);
  a violation raises IndexOutOfBoundsError naming the kernel line, the index range and the loop
  variable values.
- Op semantics live in runtime/interpret_{data,compute,reduce,indirect}.py, registered in the op registry;
  the machine (memory, hooks) is runtime/machine.py.
- `programs`, `loop`, `step`, `read` and `write` are the hooks runtime/debug_checks.py overrides
  (opt-in checks selected by knobs; `run` picks that subclass when one is on).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..core import ir
from ..lower.passes.pipeline import prepared
from . import interpret_compute, interpret_data, interpret_gather, interpret_reduce  # noqa: F401 - register the rules
from . import interpret_partition, interpret_rng, interpret_select  # noqa: F401 - issue #13 batch 1
from . import interpret_indirect  # noqa: F401 - indirect DMA, dynamic copies
from . import interpret_mx  # noqa: F401 - MX formats (quantize_mx, nc_matmul_mx)
from . import interpret_registers  # noqa: F401 - register_move (virtual registers, dynamic loops)
from .debug_checks import machine_class


def run(kernel: ir.Kernel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Execute `kernel` on `inputs` (by parameter name); returns the outputs by buffer name."""
    kernel = prepared(kernel, "interpret")       # the interpreter's passes (block tensors compacted)
    m = machine_class(kernel)(kernel, inputs)
    m.run()
    return {name: m.mem[name] for name in kernel.outputs}
