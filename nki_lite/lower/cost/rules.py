"""Cost rules: one `@rule("cost", op)` per IR op (the engine model's backend slot in lower/ops.py).

Contract: a rule is `fn(instr, ctx) -> Cost`. It decides the engine (the instruction's `engine`
attr, else the op's default), the engine cycles from the documented per-instruction formula
(shared/NKI_REFERENCE.md §4.7, with the per-generation multipliers of §3.1/§4.7), the duration in
ns, and what the instruction moves or computes (DMA bytes, HBM bytes, TensorE flops). Rules are
pure functions of the instruction, the buffers and the target; the only per-iteration input is
`ctx.active` (elements left active by a mask), which scales DMA traffic.

Notation in the formulas: N = elements per partition of the longest on-chip operand (the engines
stream the free dimension, §3.4); P = partitions (an on-chip access's shape[0]); MIN_II = 64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...core import dtypes as D
from ...core.affine import axis_of, is_axis_var
from ...core.ir import Access, Buffer, Imm, Instr, Space
from ...core.ops import OPS, engine_of, rule
from ...core.targets import Target

COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
TWO_BYTE = frozenset({"bfloat16", "float16"})
FP8 = frozenset({"float8_e4m3", "float8_e4m3fn", "float8_e5m2"})


@dataclass(frozen=True)
class Cost:
    engine: str                     # tensor | vector | scalar | gpsimd | dma | none
    ns: float = 0.0                 # duration on the engine (DMA: on each queue it uses)
    cycles: float = 0.0             # engine cycles (compute engines; DMA: 0)
    formula: str = ""               # the documented formula, evaluated, for traces and tests
    opcode: str = ""
    queues: int = 0                 # DMA queues used
    descriptors: int = 0            # DMA descriptors (contiguous runs)
    dma_bytes: int = 0
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    flops: float = 0.0              # TensorE hardware flops (2 x rows x cols x moving elements)
    transpose_flops: float = 0.0    # the part of `flops` done for transposes
    adjusted_flops: float = 0.0     # BF16-equivalent (§6.4 adjusted_hardware_flops)
    reads: tuple[str, ...] = ()     # memory spaces touched (for the v2 port-sharing rules)
    writes: tuple[str, ...] = ()


@dataclass
class CostCtx:
    target: Target
    bufs: dict[str, Buffer]
    active: int | None = None       # elements active under the instruction's mask (None: no mask)

    # ---- buffers
    def buf(self, a: Access) -> Buffer:
        return self.bufs[a.buffer]

    def space(self, a) -> str:
        return self.bufs[a.buffer].space.value if isinstance(a, Access) else "imm"

    def dtype(self, a) -> str:
        return self.bufs[a.buffer].dtype if isinstance(a, Access) else a.dtype

    def itemsize(self, a) -> int:
        return D.INFO[self.dtype(a)].itemsize

    def clock(self, engine: str) -> float:
        return self.target.clocks[engine]


# ------------------------------------------------------------------------------ access geometry

def elements(a: Access) -> int:
    return math.prod(a.shape) if a.shape else 1


def partition_axis(a: Access, buf: Buffer) -> int | None:
    """The access axis that walks the buffer's partition dimension (None: a single partition or an
    HBM access). For a plain tile this is axis 0 (the brief's convention: P = shape[0])."""
    if buf.space == Space.HBM or not a.shape:
        return None
    axes = [axis_of(v) for v, c in a.index[buf.par_axis].terms if is_axis_var(v) and c]
    axes = [k for k in axes if a.shape[k] > 1]
    return axes[0] if len(axes) == 1 else None


def partitions_of(a: Access, buf: Buffer) -> int:
    if buf.space == Space.HBM:
        return a.shape[0] if a.shape else 1
    k = partition_axis(a, buf)
    if k is not None:
        return a.shape[k]
    used = {axis_of(v) for e in a.index for v, c in e.terms if is_axis_var(v) and c}
    if a.shape and 0 not in used:
        return a.shape[0]            # a partition broadcast: axis 0 spans the partitions
    return 1


def partitions(a: Access) -> int:
    return a.shape[0] if a.shape else 1


def free_size(a: Access) -> int:
    return math.prod(a.shape[1:]) if len(a.shape) > 1 else 1


def free_size_of(a: Access, buf: Buffer) -> int:
    """N: elements per partition."""
    return elements(a) // max(1, partitions_of(a, buf))


def _row_major_strides(shape) -> list[int]:
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return list(reversed(st))


def axis_strides(a: Access, buf: Buffer, within_partition: bool) -> list[int]:
    """Element stride of each access axis in the buffer's linear layout (on-chip: within a
    partition, i.e. over the buffer's free dimensions only)."""
    dims = list(range(len(buf.shape)))
    if within_partition:
        dims = [d for d in dims if d != buf.par_axis]
    shape = [buf.shape[d] for d in dims]
    st = dict(zip(dims, _row_major_strides(shape)))
    out = [0] * len(a.shape)
    for d in dims:
        for var, c in a.index[d].terms:
            if is_axis_var(var):
                out[axis_of(var)] += c * st[d]
    return out


def _free_axes(a: Access, buf: Buffer) -> list[int]:
    pk = partition_axis(a, buf)
    if buf.space == Space.HBM:
        return list(range(len(a.shape)))
    if pk is None and a.shape:
        used = {axis_of(v) for e in a.index for v, c in e.terms if is_axis_var(v) and c}
        if 0 not in used or a.shape[0] == 1:
            pk = 0
    return [k for k in range(len(a.shape)) if k != pk]


def contiguous_run(a: Access, buf: Buffer) -> int:
    """Elements in one contiguous run of the access (a DMA descriptor's payload, §3.4): HBM over all
    axes; on-chip over the free axes (never across partitions)."""
    on_chip = buf.space != Space.HBM
    st = axis_strides(a, buf, within_partition=on_chip)
    run, expect = 1, 1
    for k in reversed(_free_axes(a, buf)):
        if a.shape[k] == 1:
            continue
        if st[k] != expect:
            break
        run *= a.shape[k]
        expect *= a.shape[k]
    return run


def innermost_stride_bytes(ctx: CostCtx, a) -> int:
    """Byte stride of the innermost free axis with extent > 1 (0 if none or a broadcast)."""
    if not isinstance(a, Access):
        return 0
    buf = ctx.buf(a)
    st = axis_strides(a, buf, within_partition=buf.space != Space.HBM)
    for k in reversed(_free_axes(a, buf)):
        if a.shape[k] > 1:
            return abs(st[k]) * ctx.itemsize(a)
    return 0


def _accesses(instr: Instr) -> list[Access]:
    return [o for o in instr.outs + instr.ins if isinstance(o, Access)]


def stream_n(ctx: CostCtx, instr: Instr) -> int:
    """N: elements per partition the engine streams (the longest on-chip operand's free size)."""
    ns = [free_size_of(a, ctx.buf(a)) for a in _accesses(instr) if ctx.space(a) != "hbm"]
    return max(ns) if ns else 1


def spaces(ctx: CostCtx, ops) -> tuple[str, ...]:
    return tuple(sorted({ctx.space(a) for a in ops if isinstance(a, Access)}))


# ------------------------------------------------------------------------------ compute helpers

def _stride_factor(ctx: CostCtx, instr: Instr) -> float:
    """§3.4: an innermost free stride above 16 bytes halves the SBUF/PSUM interface bandwidth."""
    for a in _accesses(instr):
        if ctx.space(a) != "hbm" and innermost_stride_bytes(ctx, a) > 16:
            return ctx.target.strided_penalty
    return 1.0


def compute(ctx: CostCtx, instr: Instr, cycles: float, formula: str, engine: str | None = None,
            speedup: float = 1.0, **extra) -> Cost:
    eng = engine or engine_of(instr)
    if eng not in COMPUTE_ENGINES:       # e.g. engine="dma" on a compute op: treat as GpSimd-issued
        eng = "gpsimd"
    factor = _stride_factor(ctx, instr) if speedup == 1.0 else 1.0
    cyc = cycles * factor / speedup
    f = formula
    if factor != 1.0:
        f += f" x{factor:g} (stride > 16 B)"
    if speedup != 1.0:
        f += f" / {speedup:g} (perf mode)"
    return Cost(eng, ns=cyc / ctx.clock(eng), cycles=cyc, formula=f, opcode=extra.pop("opcode", instr.op),
                reads=spaces(ctx, instr.ins), writes=spaces(ctx, instr.outs), **extra)


def _max_ii(ctx, n: float) -> float:
    return max(ctx.target.min_ii, n)


def _streamed(ctx, instr: Instr, n: float, **kw) -> Cost:
    """The common one-element-per-cycle stream: max(MIN_II, N) cycles."""
    return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, N={n})", **kw)


def _streamed_or_gpsimd(ctx, instr: Instr) -> Cost:
    """A stream, or on GpSimd its fixed start-up plus one element per cycle."""
    n = stream_n(ctx, instr)
    if engine_of(instr) == "gpsimd":
        return compute(ctx, instr, ctx.target.gpsimd_start + n, f"GPSIMD_START + N = 150 + {n}")
    return _streamed(ctx, instr, n)


def _dtypes(ctx: CostCtx, instr: Instr) -> set[str]:
    return {ctx.dtype(a) for a in _accesses(instr)}


def _vector_speedup(ctx: CostCtx, instr: Instr, eng: str, kind: str) -> float:
    """§4.7 Trn2 VectorE perf mode: 4x for copy/tensor_scalar all-SBUF 2-byte unit stride; 2x when the
    stride is not unit or one side is PSUM; 2x for tensor_tensor all-bf16 in SBUF (v3+ only)."""
    t = ctx.target
    if not t.vector_perf_mode or eng != "vector":
        return 1.0
    small = TWO_BYTE | (FP8 if t.nc_version >= 4 else frozenset())
    dts = _dtypes(ctx, instr)
    if not dts or not dts <= small:
        return 1.0
    acc = _accesses(instr)
    sp = {ctx.space(a) for a in acc}
    unit = all(innermost_stride_bytes(ctx, a) in (0, ctx.itemsize(a)) for a in acc)
    if kind == "copy":
        return 4.0 if (sp == {"sbuf"} and unit) else 2.0
    if kind == "tensor_tensor":
        return 2.0 if (sp == {"sbuf"} and dts == {"bfloat16"}) else 1.0
    return 1.0


def _scalar_speedup(ctx: CostCtx, instr: Instr, eng: str) -> float:
    """§3.1 v4 ScalarE: 256 elements/cycle for BF16/FP16/FP8 in/out (2x), 128 otherwise."""
    t = ctx.target
    if eng != "scalar" or t.scalar_2byte_speedup == 1.0:
        return 1.0
    dts = _dtypes(ctx, instr)
    return t.scalar_2byte_speedup if dts and dts <= (TWO_BYTE | FP8) else 1.0


# ------------------------------------------------------------------------------ DMA

def _engine_groups(ctx: CostCtx, dst, src):
    """(engines, descriptor elements) of an HBM <-> SBUF copy, or None for any other copy.

    AWS's DMA overview ("Performance Considerations", examples 1-2; trn2 profiles): each of the 16
    DMA engines serves 8 SBUF partitions (128 / 16), so A[4, 4096] bf16 is one 32 KiB transfer on
    one engine (1416 ns) and A[128, 128] bf16 is 16 transfers of 2 KiB, one per engine, "a single
    2KiB read (8 rows x 128 elements x 2B)" (97 ns each): partition rows that are contiguous in HBM
    are read as one run, with no per-row cost. So the engines used are the partition groups the
    access covers, and a descriptor is the group's rows when the HBM side is contiguous across them
    (else one per contiguous run, as before)."""
    if not isinstance(src, Access):
        return None
    sides = [(a, ctx.buf(a)) for a in (dst, src)]
    hbm = [x for x in sides if x[1].space == Space.HBM]
    chip = [x for x in sides if x[1].space == Space.SBUF]
    if len(hbm) != 1 or len(chip) != 1:
        return None
    (ha, hb), (sa, sb) = hbm[0], chip[0]
    pk = partition_axis(sa, sb)
    parts = sa.shape[pk] if pk is not None else 1
    t = ctx.target
    rows_per_engine = max(1, t.partitions // t.dma_queues)
    engines = max(1, min(t.dma_queues, math.ceil(parts / rows_per_engine)))
    run_s, run_h = contiguous_run(sa, sb), contiguous_run(ha, hb)
    row = elements(sa) // max(1, parts)
    if run_s == row and run_h >= 2 * row:       # whole rows, adjacent in HBM: one run per group
        return engines, min(run_h, rows_per_engine * row)
    return engines, min(run_s, run_h)


def dma_cost(ctx: CostCtx, instr: Instr, transpose: bool = False) -> Cost:
    """DMA model (§3.4, §4.6, §4.8): the copy is cut into descriptors (contiguous runs; at least one
    per partition); descriptors are spread over min(16, descriptors) queues; each descriptor costs
    (bytes + H) / B on its queue, with H = dma_descriptor_half_bytes and B the per-queue bandwidth
    (capped by the NeuronCore's HBM share when HBM is involved)."""
    t = ctx.target
    dst, src = instr.outs[0], instr.ins[0]
    item = max(ctx.itemsize(dst), ctx.itemsize(src)) if isinstance(src, Access) else ctx.itemsize(dst)
    n = elements(dst)
    active = n if ctx.active is None else ctx.active
    runs = [contiguous_run(dst, ctx.buf(dst))]
    if isinstance(src, Access):
        runs.append(contiguous_run(src, ctx.buf(src)))
    eff = 1.0
    hw_transpose = False
    if isinstance(src, Access) and (transpose or (min(runs) == 1 and max(runs) > 1)) \
            and t.dma_transpose_efficiency > 0 and item in (2, 4):
        hw_transpose = True        # §4.7 Trn2 DMA transpose: the engine writes transposed runs
        eff = t.dma_transpose_sbuf_efficiency if ctx.space(src) != "hbm" and ctx.space(dst) != "hbm" \
            else t.dma_transpose_efficiency
        run = max(runs)
    else:
        run = min(runs)
    groups = _engine_groups(ctx, dst, src) if not hw_transpose else None
    if groups is not None:
        run = groups[1]
    run = max(1, min(run, n))
    desc = math.ceil(active / run) if active else 0
    nbytes = active * item
    hbm = "hbm" in (ctx.space(dst), ctx.space(src))
    queues = max(1, min(t.dma_queues, desc, groups[0] if groups is not None else desc))
    bw = t.dma_queue_bytes_per_ns
    if hbm:
        bw = min(bw, t.hbm_bytes_per_ns_per_nc / queues)
    per_queue_desc = math.ceil(desc / queues) if desc else 0
    desc_bytes = run * item
    ns = per_queue_desc * (desc_bytes + t.dma_descriptor_half_bytes) / bw / eff if desc else 0.0
    formula = (f"{desc} desc x ({desc_bytes} B + {t.dma_descriptor_half_bytes} B) / {queues} queues "
               f"/ {bw:g} B/ns" + (f" / {eff:g} (DMA transpose)" if hw_transpose else ""))
    return Cost("dma", ns=ns, formula=formula, opcode="dma_transpose" if hw_transpose else "dma_copy",
                queues=queues, descriptors=desc, dma_bytes=nbytes,
                hbm_read_bytes=nbytes if ctx.space(src) == "hbm" else 0,
                hbm_write_bytes=nbytes if ctx.space(dst) == "hbm" else 0,
                reads=spaces(ctx, instr.ins), writes=spaces(ctx, instr.outs))


# ------------------------------------------------------------------------------ the rules

@rule("cost", "alloc")
def _alloc(instr: Instr, ctx: CostCtx) -> Cost:
    return Cost("none", formula="0 (allocation)", opcode="alloc")


@rule("cost", "bitcast")
def _bitcast(instr: Instr, ctx: CostCtx) -> Cost:
    return Cost("none", formula="0 (an `.ap(dtype=)` view: no instruction on the device)", opcode="bitcast")


@rule("cost", "device_print")
def _print(instr: Instr, ctx: CostCtx) -> Cost:
    return Cost("none", formula="0 (debug print, not on device)", opcode="device_print")


@rule("cost", "dma_copy")
def _dma_copy(instr: Instr, ctx: CostCtx) -> Cost:
    if engine_of(instr) not in ("dma", "gpsimd", "sync"):
        # an on-chip copy routed to a compute engine by the frontend
        n = stream_n(ctx, instr)
        return _streamed(ctx, instr, n, opcode="tensor_copy")
    return dma_cost(ctx, instr)


@rule("cost", "tensor_copy")
def _tensor_copy(instr, ctx):
    eng = engine_of(instr)
    if eng == "dma":
        return dma_cost(ctx, instr)
    n = stream_n(ctx, instr)
    sp = _vector_speedup(ctx, instr, eng, "copy") if eng == "vector" else \
        (ctx.target.scalar_2byte_speedup if eng == "scalar" and ctx.target.nc_version >= 4 else 1.0)
    return _streamed(ctx, instr, n, speedup=sp)


@rule("cost", "memset")
def _memset(instr, ctx):
    n = stream_n(ctx, instr)
    v = instr.ins[0]
    zero_16 = isinstance(v, Imm) and v.value == 0 and ctx.dtype(instr.out) in TWO_BYTE
    if zero_16:
        return compute(ctx, instr, _max_ii(ctx, n / 2), f"max(MIN_II, N/2={n / 2:g}) (zero, 16-bit)")
    return _streamed(ctx, instr, n)


@rule("cost", "iota")
def _iota(instr, ctx):
    return _streamed_or_gpsimd(ctx, instr)


# The profiler's hardware_flops (Σ 2 x active rows x active cols x elements per TensorE instruction, §6.4)
# counts an fp32 matmul or PE transpose twice: measured on trn1, every fp32 NKIBench kernel's
# hardware_flops (AccelOpt profile_results.csv) is 2.00x the model's 2·K·M·N plus its transposes
# (matmul 1.160e12 vs 5.80e11, rmsnorm_matmul 3.65e10 vs 1.83e10, matmul_add_rmsnorm 8.59e10 vs 4.29e10),
# while the bf16 matmul tutorial's published HFU (85% at 6.97 ms) counts 2·K·M·N once. The time stays the
# §4.7 4x; so an fp32 kernel's HFU tops out at 50% (the measured fp32 kernels reach 43.5%). Applied on every
# target (trn2/trn3 assumed as measured on trn1). adjusted_hardware_flops keeps the §6.4 4x of 2·K·M·N.
FP32_HARDWARE_FLOPS_COUNT = 2.0


@rule("cost", "transpose")
def _transpose(instr, ctx):
    eng = engine_of(instr)
    src = instr.ins[0]
    if eng == "dma":
        return dma_cost(ctx, instr, transpose=True)
    P, F = partitions_of(src, ctx.buf(src)), free_size_of(src, ctx.buf(src))
    if eng == "tensor":
        base = max(P, min(ctx.target.mm_init_latency, F))
        fp32 = "float32" in (ctx.dtype(src), ctx.dtype(instr.out))
        k = ctx.target.tensor_fp32_transpose_factor if fp32 else 1.0
        macs2 = 2.0 * P * F * P        # as nc_matmul(stationary=in[P, F], moving=identity[P, P])
        flops = macs2 * (FP32_HARDWARE_FLOPS_COUNT if fp32 else 1.0)
        f = f"max(P={P}, min(64, F={F}))" + (f" x{k:g} (fp32)" if k != 1 else "")
        return compute(ctx, instr, base * k, f, engine="tensor", flops=flops, transpose_flops=flops,
                       adjusted_flops=macs2 * (4.0 if fp32 else 1.0), opcode="transpose")
    n = stream_n(ctx, instr)
    return _streamed(ctx, instr, n)


@rule("cost", "activation")
def _activation(instr, ctx):
    eng = engine_of(instr)
    n = stream_n(ctx, instr)
    cyc, f = _max_ii(ctx, n), f"max(MIN_II, N={n})"
    if len(instr.outs) > 1:                       # activation_reduce: + ActReadAccumulator
        cyc += ctx.target.min_ii
        f += " + MIN_II (reduce)"
    return compute(ctx, instr, cyc, f, speedup=_scalar_speedup(ctx, instr, eng))


@rule("cost", "tensor_tensor")
def _tensor_tensor(instr, ctx):
    eng = engine_of(instr)
    n = stream_n(ctx, instr)
    sp_in = [ctx.space(a) for a in instr.ins if isinstance(a, Access)]
    fast = sorted(sp_in) == ["psum", "sbuf"]
    if not fast and sp_in and all(s == "sbuf" for s in sp_in):
        fast = (_dtypes(ctx, instr) == {"bfloat16"} and instr.attr("op") in ("add", "multiply", "subtract")
                and all(innermost_stride_bytes(ctx, a) in (0, ctx.itemsize(a)) for a in _accesses(instr)))
    if fast:
        return _streamed(ctx, instr, n,
                       speedup=_vector_speedup(ctx, instr, eng, "tensor_tensor"))
    return compute(ctx, instr, _max_ii(ctx, 2 * n), f"max(MIN_II, 2N={2 * n})",
                   speedup=_vector_speedup(ctx, instr, eng, "tensor_tensor"))


@rule("cost", "tensor_scalar")
def _tensor_scalar(instr, ctx):
    eng = engine_of(instr)
    n = stream_n(ctx, instr)
    cyc, f = _max_ii(ctx, n), f"max(MIN_II, N={n})"
    if len(instr.outs) > 1:                       # tensor_scalar_reduce
        cyc += ctx.target.min_ii
        f += " + MIN_II (reduce)"
    sp = _vector_speedup(ctx, instr, eng, "copy") if eng == "vector" else _scalar_speedup(ctx, instr, eng)
    return compute(ctx, instr, cyc, f, speedup=sp)


@rule("cost", "tensor_reduce")
def _tensor_reduce(instr, ctx):
    n = stream_n(ctx, instr)
    bf = _dtypes(ctx, instr) == {"bfloat16"} and instr.attr("op") in ("add", "maximum", "max")
    if bf:
        return compute(ctx, instr, _max_ii(ctx, n / 2), f"max(MIN_II, N/2={n / 2:g}) (bf16 add/max)")
    return _streamed(ctx, instr, n)


def _predicated(instr, ctx):
    n = stream_n(ctx, instr)
    if any(ctx.space(a) == "psum" for a in instr.ins if isinstance(a, Access)):
        return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, N={n}) (an input in PSUM)")
    return compute(ctx, instr, _max_ii(ctx, 2 * n), f"max(MIN_II, 2N={2 * n})")


@rule("cost", "select")
def _select(instr, ctx):
    return _predicated(instr, ctx)      # as tensor_copy_predicated (§4.7)


@rule("cost", "copy_predicated")
def _copy_predicated(instr, ctx):
    return _predicated(instr, ctx)


@rule("cost", "scalar_tensor_tensor")
def _stt(instr, ctx):
    n = stream_n(ctx, instr)
    data, tile1 = instr.ins[0], instr.ins[2] if len(instr.ins) > 2 else None
    fast = (isinstance(data, Access) and isinstance(tile1, Access) and ctx.dtype(data) == "bfloat16"
            and ctx.dtype(tile1) == "bfloat16" and instr.attr("op0") == "subtract"
            and instr.attr("op1") == "multiply" and n % 2 == 0)
    if fast:
        return compute(ctx, instr, _max_ii(ctx, n), f"max(MIN_II, N={n}) (bf16 subtract/multiply)")
    return compute(ctx, instr, _max_ii(ctx, 2 * n), f"max(MIN_II, 2N={2 * n})")


@rule("cost", "tensor_tensor_scan")
def _scan(instr, ctx):
    n = stream_n(ctx, instr)
    return compute(ctx, instr, _max_ii(ctx, 2 * n), f"max(MIN_II, 2N={2 * n})")


@rule("cost", "affine_select")
def _affine_select(instr, ctx):
    return _streamed_or_gpsimd(ctx, instr)


@rule("cost", "bn_stats")
@rule("cost", "max8")
@rule("cost", "find_index8")
def _one_pass_stream(instr, ctx):
    """bn_stats, max8, find_index8: one pass over the free elements."""
    return _streamed(ctx, instr, stream_n(ctx, instr))


@rule("cost", "bn_aggr")
def _bn_aggr(instr, ctx):
    n = stream_n(ctx, instr)
    return compute(ctx, instr, _max_ii(ctx, 13 * (n / 3)), f"max(MIN_II, 13*(N/3)={13 * n / 3:g})")


@rule("cost", "nc_matmul")
def _nc_matmul(instr, ctx):
    """§4.7: max(min(64, N_stationary), N_moving) TensorE cycles for fp8/bf16/fp16/tf32, 4x for fp32.
    FP8 double-row (v3+, §3.1/§3.2): K = 2 x 128 per instruction in the time of a BF16 instruction."""
    t = ctx.target
    st, mv = instr.ins[0], instr.ins[1]
    dts = {ctx.dtype(st), ctx.dtype(mv)}
    K = partitions_of(st, ctx.buf(st))
    s_shape, m_shape = st.shape, mv.shape
    rows_mult = 1
    double = instr.attr("perf_mode") == "double_row" and t.fp8_double_row and dts <= FP8
    if double and len(s_shape) == 3 and s_shape[1] == 2:
        rows_mult = 2
        M, N = s_shape[2], math.prod(m_shape[2:]) if len(m_shape) > 2 else m_shape[-1]
    else:
        M, N = free_size_of(st, ctx.buf(st)), free_size_of(mv, ctx.buf(mv))
    Keff = K * rows_mult
    base = max(min(t.mm_init_latency, M), N)
    f = f"max(min(64, M={M}), N={N})"
    cyc = float(base)
    if "float32" in dts:
        cyc *= t.matmul_fp32_factor
        f += f" x{t.matmul_fp32_factor:g} (fp32)"
    elif double:
        # same time as a BF16 instruction for K = 256 rows (§4.7): time scales with the row passes
        cyc *= Keff / (t.pe_rows * t.fp8_double_row_rate)
        f += f" x K={Keff}/{t.pe_rows * t.fp8_double_row_rate:g} (fp8 double_row)"
    macs2 = 2.0 * Keff * M * N
    flops = macs2 * (FP32_HARDWARE_FLOPS_COUNT if "float32" in dts else 1.0)
    if "float32" in dts:
        adj = 4.0
    elif dts <= FP8:
        adj = 1.0 if t.nc_version == 2 else 0.5          # §6.4 adjusted_hardware_flops
    else:
        adj = 1.0
    return compute(ctx, instr, cyc, f, engine="tensor", flops=flops, adjusted_flops=macs2 * adj,
                   opcode="MATMUL")


def cost_of(instr: Instr, ctx: CostCtx) -> Cost:
    fn: Callable | None = OPS[instr.op].rules.get("cost")
    if fn is None:
        raise KeyError(f"no cost rule for op {instr.op!r}")
    return fn(instr, ctx)
