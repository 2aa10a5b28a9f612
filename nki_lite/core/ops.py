"""The op registry: one entry per IR op, with its traits and one rule slot per backend.

Contract: `OPS[name]` describes an IR op: a one-line meaning and its *traits*, the questions passes
and backends ask about an op (docs/architecture.md, "Op traits"). Every entry declares every trait
explicitly (`_op` has no defaults), so a new op cannot inherit an answer nobody chose. Backends
register a rule per op with `@rule(backend, name)`; `BACKENDS` lists the backends that exist, and a
test asserts every op has a rule in every one of them, so a new op cannot reach one backend and
not the others. Backends: "interpret" (numpy oracle, runtime/interpret_*.py), "llvm" (the JIT,
lower/llvm/rules_*.py) and "cost" (the engine model, lower/cost/rules.py).

Traits (who asks each):
- engine: the default engine (tensor | vector | scalar | gpsimd | dma | none); an instruction's
  `engine=` attribute overrides it (`engine_of`). Verification and the engine model.
- kind: "compute" (an engine instruction on tiles), "dma" (a copy between memories), "marker" (no
  work: alloc marks a tile's lifetime) or "debug" (device_print). Verification, `is_compute`.
- fusable: elementwise with one output, so the JIT may fuse a run of them (llvm/fusion.py).
- vector: the JIT's elementwise emitter may vectorise its innermost axis (llvm/rules_common.py).
- row_local: only combines elements of one partition, so a body of such ops may run partition by
  partition (llvm/rowmajor.py).
- plain_reads: its JIT rule reads every input access through the generic access path (any memory
  space), so load forwarding may point an input at the load's source (llvm/forward.py).
- input_space: its iteration space (and `mask=`) is the first input's shape, not the output's
  (reductions, statistics, device_print). Verification, llvm/rowmajor.py.
- unmasked_inputs: input positions read without the mask (`ALL`: every input), as the interpreter
  reads them. Verification.
- accumulates: with attr `accumulate` the op reads its output too (`accumulates(instr)`). Every
  read/write analysis (`reads`): dependences, parallel planning, fusion, forwarding, the schedule.
- host_effect: a visible effect outside the kernel's memory (printing): programs and iterations
  must run in order (lower/parallel.py, the JIT).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .ir import Access

BACKENDS: tuple[str, ...] = ("interpret", "llvm", "cost")

ALL = "all"                   # unmasked_inputs: every input is read without the mask
KINDS = ("compute", "dma", "marker", "debug")
TRAITS = ("engine", "kind", "fusable", "vector", "row_local", "plain_reads", "input_space", "unmasked_inputs",
          "accumulates", "host_effect")


@dataclass
class OpDef:
    name: str
    meaning: str
    engine: str
    kind: str
    fusable: bool
    vector: bool
    row_local: bool
    plain_reads: bool
    input_space: bool
    unmasked_inputs: tuple[int, ...] | str
    accumulates: bool
    host_effect: bool
    rules: dict[str, Callable] = field(default_factory=dict)


OPS: dict[str, OpDef] = {}


def _op(name: str, meaning: str, **traits) -> None:
    if set(traits) != set(TRAITS):
        raise TypeError(f"op {name!r} must declare exactly the traits {TRAITS}, "
                        f"got {sorted(traits)}")
    OPS[name] = OpDef(name, meaning, **traits)


# Column order: engine, kind, fusable, vector, row_local, plain_reads, input_space, unmasked_inputs,
# accumulates, host_effect.
_F, _T = False, True
_TABLE = [
    ("alloc", "a new on-chip tile comes to life (uninitialised; debug fill with NaN/sentinel)",
     "none", "marker", _F, _F, _F, _F, _F, (), _F, _F),
    ("dma_copy", "copy between memories (HBM<->SBUF, any<->any), casting to the destination dtype",
     "dma", "dma", _T, _T, _T, _T, _F, (), _F, _F),
    ("dma_compute", "DMA-engine compute: dst = srcs[0] + srcs[1] + ... in fp32, in source order, cast to dst's dtype",
     "dma", "dma", _F, _T, _T, _T, _F, (), _F, _F),
    ("tensor_copy", "on-chip copy with cast to the destination dtype",
     "vector", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("memset", "fill the destination with a constant",
     "vector", "compute", _F, _F, _T, _F, _F, (), _F, _F),
    ("bitcast", "byte-exact copy of an on-chip tile into a tile of another dtype (an `.ap(dtype=)` view's snapshot)",
     "vector", "compute", _F, _F, _F, _F, _F, ALL, _F, _F),
    ("iota", "fill the destination with an affine expression of its indices",
     "gpsimd", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("transpose", "2-D partition/free transpose, exact data movement",
     "tensor", "compute", _F, _F, _F, _F, _F, ALL, _F, _F),
    ("activation", "out = func(in * scale + bias), optional free-axis reduction",
     "scalar", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("tensor_tensor", "out = in0 <op> in1 elementwise",
     "vector", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("tensor_scalar", "out = (in <op0> s0) <op1> s1 with scalar or per-partition operands",
     "vector", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("tensor_reduce", "reduce along free axes",
     "vector", "compute", _F, _F, _T, _T, _T, (), _F, _F),
    ("select", "out = cond ? a : b elementwise",
     "vector", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("nc_matmul", "psum[M,N] (+)= stationary[K,M]^T @ moving[K,N], k in order, fp32 accumulate",
     "tensor", "compute", _F, _F, _F, _T, _F, ALL, _T, _F),
    # MX formats (numerics/mx.py): outs (data, one scale view per quadrant); ins (data, data, scale views...)
    ("quantize_mx", "fp16/bf16 [P,F] -> x4 fp8 [P,F/4] + one E8M0 scale per 8x4 group, quadrant scale layout",
     "vector", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("nc_matmul_mx", "psum[M,N] (+)= sum over k, q of dequantized stationary[k,m,q] * moving[k,n,q]",
     "tensor", "compute", _F, _F, _F, _F, _F, ALL, _T, _F),
    ("scalar_tensor_tensor", "out = (in op0 s0) op1 tile1, s0 a scalar or per-partition operand",
     "vector", "compute", _T, _T, _T, _T, _F, (), _F, _F),
    ("tensor_tensor_scan", "out[:, j] = (d0[:, j] op0 out[:, j-1]) op1 d1[:, j] along the free axis",
     "vector", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("affine_select", "out = affine predicate(index) ? in : scalar",
     "gpsimd", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("copy_predicated", "dst = predicate ? src : dst (elementwise)",
     "vector", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("bn_stats", "per partition: (count, mean, var*count) of even and of odd free elements",
     "vector", "compute", _F, _F, _T, _T, _T, (), _F, _F),
    ("bn_aggr", "combine (count, mean, var*count) triples into (mean, var) per partition",
     "vector", "compute", _F, _F, _T, _F, _T, (), _F, _F),
    ("max8", "the 8 largest values per partition, descending",
     "vector", "compute", _F, _F, _F, _F, _T, (), _F, _F),
    ("find_index8", "index of the first occurrence of each of 8 values per partition",
     "vector", "compute", _F, _F, _F, _F, _T, (), _F, _F),
    ("local_gather", "per 16-partition core: gather runs of src elements at uint16 offsets read from index",
     "gpsimd", "compute", _F, _F, _F, _F, _F, ALL, _F, _F),
    ("dma_indirect", "DMA with a run-time offset on one dimension of src or dst read from an index tile "
     "(attrs dyn, dim, oob); rmw=add accumulates into dst",
     "dma", "dma", _F, _F, _F, _F, _F, (), _T, _F),
    ("copy_dynamic", "on-chip copy from a run-time offset along a free dimension (tensor_copy_dynamic_src)",
     "vector", "compute", _F, _F, _F, _F, _F, (), _F, _F),
    ("device_print", "print a tile's values (interpreter: to stdout)",
     "none", "debug", _F, _F, _F, _F, _T, (), _F, _T),
    # random numbers (numerics/rng.py); the seed input (a tile element or immediate) ignores the mask
    ("rand", "uniform [0, 1) values from nki_lite's counter-based generator (seed, draw, stream, index)",
     "vector", "compute", _F, _F, _T, _F, _F, ALL, _F, _F),
    ("dropout", "out = u < prob ? 0 : data, u uniform from the generator",
     "vector", "compute", _F, _F, _T, _F, _F, (2,), _F, _F),
    ("range_select", "out = bound tests of (range_start + free index) ? on_true : on_false; optional max",
     "vector", "compute", _F, _F, _T, _F, _F, (), _F, _F),
    ("select_reduce", "out = predicate ? on_true : on_false; optional max into a second output",
     "vector", "compute", _F, _F, _T, _F, _F, (), _F, _F),
    ("match_replace8", "replace the first occurrence of each of 8 values per partition; their indices",
     "vector", "compute", _F, _F, _T, _F, _F, (1,), _F, _F),
    ("partition_reduce", "reduce across the partition axis into one partition",
     "gpsimd", "compute", _F, _F, _F, _F, _T, (), _F, _F),
    ("sequence_bounds", "[start, end) of each element's segment along the free axis (0 = padding)",
     "gpsimd", "compute", _F, _F, _F, _F, _T, (), _F, _F),
    # LNC=2 synchronisation (runtime/lnc.py runs both cores; both order everything around them)
    ("register_move", "a sequencer register op: dst's one element takes src's integer value (wrapping to its dtype)",
     "gpsimd", "dma", _F, _F, _F, _F, _F, (), _F, _F),
    ("core_barrier", "wait until every logical NeuronCore reaches this barrier on the shared HBM tensor",
     "gpsimd", "dma", _F, _F, _F, _F, _F, ALL, _F, _T),
    ("sendrecv", "send src (SBUF) to the peer core's dst while receiving the peer's src into this core's dst",
     "dma", "dma", _F, _F, _F, _F, _F, ALL, _F, _T),
    ("nonzero_with_count", "each row's nonzero positions (+ offset), padding, then the count",
     "gpsimd", "compute", _F, _F, _F, _F, _T, (), _F, _F),
]
for _name, _meaning, *_values in _TABLE:
    _op(_name, _meaning, **dict(zip(TRAITS, _values)))
del _name, _meaning, _values


# ---------------------------------------------------------------- questions about an instruction

def engine_of(instr) -> str:
    """The engine an instruction runs on: its `engine=` attribute, else the op's default engine."""
    e = instr.attr("engine")
    if e in (None, "", "unknown"):
        op = OPS.get(instr.op)
        e = op.engine if op is not None else "unknown"
    return str(getattr(e, "value", e))


def accumulates(instr) -> bool:
    """Does the instruction read its output (an accumulating matmul into PSUM)?"""
    op = OPS.get(instr.op)
    return op is not None and op.accumulates and bool(instr.attr("accumulate"))


def reads(instr) -> list:
    """The accesses the instruction reads: its access inputs, plus its output when it accumulates."""
    out = [o for o in instr.ins if isinstance(o, Access)]
    if accumulates(instr):
        out.append(instr.outs[0])
    return out


def dynamic_access(instr) -> tuple[str, int, int] | None:
    """(role, k, dim) of the access whose index on buffer dimension `dim` is completed at run time by
    an index tile (dma_indirect / copy_dynamic with attr `dyn`; lang/ops_indirect.py), else None.
    Analyses must not read that dimension's affine index as the elements touched: the access may
    reach any element of the dimension."""
    side = instr.attr("dyn")
    if not side:
        return None
    return ("out" if side == "out" else "in", 0, instr.attr("dim"))


def is_compute(instr) -> bool:
    """An engine instruction on tiles: not a marker/debug op and not a DMA (a dma-kind op, or any op
    whose engine is the DMA, e.g. a future dma_transpose)."""
    op = OPS.get(instr.op)
    return (op is None or op.kind == "compute") and engine_of(instr) != "dma"


def is_dma(instr) -> bool:
    op = OPS.get(instr.op)
    return ((op is not None and op.kind == "dma")
            or ((op is None or op.kind == "compute") and engine_of(instr) == "dma"))


def host_effect(instr) -> bool:
    """Has the instruction an effect outside the kernel's memory (so its order is observable)?"""
    op = OPS.get(instr.op)
    return op is not None and op.host_effect


def input_space(instr) -> bool:
    """Is the instruction's iteration space (and mask) its first input's shape?"""
    op = OPS.get(instr.op)
    return op is not None and op.input_space


def mask_applies(instr, role: str, k: int) -> bool:
    """Is the instruction's mask applied to its operand `role`[k] ("in"/"out")?"""
    op = OPS.get(instr.op)
    if role != "in" or op is None:
        return True
    return not (op.unmasked_inputs == ALL or k in op.unmasked_inputs)


def rule(backend: str, *names: str):
    """Decorator registering `fn` as `backend`'s rule for each op in `names` (ops that share one
    definition, e.g. the two copies, share one rule)."""
    def deco(fn: Callable) -> Callable:
        for name in names:
            if name not in OPS:
                raise KeyError(f"unknown op {name!r}")
            OPS[name].rules[backend] = fn
        return fn
    return deco


_RULE_MODULES = ("nki_lite.runtime.interpret_data", "nki_lite.runtime.interpret_compute",
                 "nki_lite.runtime.interpret_reduce", "nki_lite.runtime.interpret_indirect",
                 "nki_lite.lower.llvm.rules_common", "nki_lite.lower.llvm.rules_compute",
                 "nki_lite.lower.llvm.rules_data", "nki_lite.lower.llvm.rules_reduce",
                 "nki_lite.lower.cost.rules", "nki_lite.runtime.interpret_gather",
                 "nki_lite.lower.llvm.rules_gather", "nki_lite.lower.cost.rules_gather",
                 # issue #13 batch 1: random numbers, selects, partition ops (one module per topic)
                 "nki_lite.runtime.interpret_rng", "nki_lite.runtime.interpret_select",
                 "nki_lite.runtime.interpret_partition",
                 "nki_lite.lower.llvm.rules_rng", "nki_lite.lower.llvm.rules_select",
                 "nki_lite.lower.llvm.rules_partition",
                 "nki_lite.lower.cost.rules_rng_select", "nki_lite.lower.cost.rules_partition",
                 "nki_lite.lower.llvm.rules_indirect", "nki_lite.lower.cost.rules_indirect",
                 "nki_lite.lower.llvm.rules_matmul",
                 # issue #14: LNC=2 core_barrier / sendrecv
                 "nki_lite.runtime.interpret_lnc", "nki_lite.lower.llvm.rules_lnc", "nki_lite.lower.cost.rules_lnc",
                 # issue #14: MX formats
                 "nki_lite.runtime.interpret_mx", "nki_lite.lower.llvm.rules_mx", "nki_lite.lower.cost.rules_mx",
                 # issue #14: virtual registers and dynamic loops
                 "nki_lite.runtime.interpret_registers", "nki_lite.lower.llvm.rules_registers",
                 "nki_lite.lower.cost.rules_registers",
                 # issue #14: nisa.dma_compute (interpreter and llvm rules live with dma_copy's)
                 "nki_lite.lower.cost.rules_dma_compute")


def missing_rules() -> list[tuple[str, str]]:
    """(op, backend) pairs without a rule, after loading every backend's rule modules (some load
    lazily at run time, e.g. the JIT's on the first compile)."""
    import importlib
    for mod in _RULE_MODULES:
        importlib.import_module(mod)
    return [(name, b) for name, op in OPS.items() for b in BACKENDS if b not in op.rules]
