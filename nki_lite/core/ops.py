"""The op registry: one entry per IR op, one slot per backend.

Contract: `OPS[name]` describes an IR op (its default engine and a one-line meaning). Backends
register a rule per op with `@rule(backend, name)`; `BACKENDS` lists the backends that exist, and a
test asserts every op has a rule in every one of them, so a new op cannot reach one backend and
not the others. Backends: "interpret" (numpy oracle, runtime/interpret_*.py), "llvm" (the JIT,
lower/llvm/rules_*.py) and "cost" (the engine model, lower/cost/rules.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

BACKENDS: tuple[str, ...] = ("interpret", "llvm", "cost")


@dataclass
class OpDef:
    name: str
    engine: str          # default engine: tensor | vector | scalar | gpsimd | dma | none
    meaning: str
    rules: dict[str, Callable] = field(default_factory=dict)


OPS: dict[str, OpDef] = {}


def _op(name: str, engine: str, meaning: str) -> None:
    OPS[name] = OpDef(name, engine, meaning)


_op("alloc", "none", "a new on-chip tile comes to life (uninitialised; debug fill with NaN/sentinel)")
_op("dma_copy", "dma", "copy between memories (HBM<->SBUF, any<->any), casting to the destination dtype")
_op("tensor_copy", "vector", "on-chip copy with cast to the destination dtype")
_op("memset", "vector", "fill the destination with a constant")
_op("iota", "gpsimd", "fill the destination with an affine expression of its indices")
_op("transpose", "tensor", "2-D partition/free transpose, exact data movement")
_op("activation", "scalar", "out = func(in * scale + bias), optional free-axis reduction")
_op("tensor_tensor", "vector", "out = in0 <op> in1 elementwise")
_op("tensor_scalar", "vector", "out = (in <op0> s0) <op1> s1 with scalar or per-partition operands")
_op("tensor_reduce", "vector", "reduce along free axes")
_op("select", "vector", "out = cond ? a : b elementwise")
_op("nc_matmul", "tensor", "psum[M,N] (+)= stationary[K,M]^T @ moving[K,N], k in order, fp32 accumulate")
_op("scalar_tensor_tensor", "vector", "out = (in op0 s0) op1 tile1, s0 a scalar or per-partition operand")
_op("tensor_tensor_scan", "vector", "out[:, j] = (d0[:, j] op0 out[:, j-1]) op1 d1[:, j] along the free axis")
_op("affine_select", "gpsimd", "out = affine predicate(index) ? in : scalar")
_op("copy_predicated", "vector", "dst = predicate ? src : dst (elementwise)")
_op("bn_stats", "vector", "per partition: (count, mean, var*count) of even and of odd free elements")
_op("bn_aggr", "vector", "combine (count, mean, var*count) triples into (mean, var) per partition")
_op("max8", "vector", "the 8 largest values per partition, descending")
_op("find_index8", "vector", "index of the first occurrence of each of 8 values per partition")
_op("device_print", "none", "print a tile's values (interpreter: to stdout)")


def rule(backend: str, name: str):
    """Decorator registering `fn` as `backend`'s rule for op `name`."""
    def deco(fn: Callable) -> Callable:
        if name not in OPS:
            raise KeyError(f"unknown op {name!r}")
        OPS[name].rules[backend] = fn
        return fn
    return deco


_RULE_MODULES = ("nki_lite.runtime.interpret_data", "nki_lite.runtime.interpret_compute",
                 "nki_lite.runtime.interpret_reduce",
                 "nki_lite.lower.llvm.rules_common", "nki_lite.lower.llvm.rules_compute",
                 "nki_lite.lower.llvm.rules_data", "nki_lite.lower.llvm.rules_reduce",
                 "nki_lite.lower.cost.rules")


def missing_rules() -> list[tuple[str, str]]:
    """(op, backend) pairs without a rule, after loading every backend's rule modules (some load
    lazily at run time, e.g. the JIT's on the first compile)."""
    import importlib
    for mod in _RULE_MODULES:
        importlib.import_module(mod)
    return [(name, b) for name, op in OPS.items() for b in BACKENDS if b not in op.rules]
