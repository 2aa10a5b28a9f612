"""Partition broadcasts as the hardware compiler lowers them: TensorE matmuls and PSUM copies.

Contract: `add_broadcasts(kernel, target) -> (kernel', scratch)`. kernel' is `kernel` with every partition
broadcast read by a Vector or Scalar Engine instruction materialised (for the engine model only):
a fresh SBUF tile is allocated before the consumer, filled bank by bank (one PSUM bank, 2 KiB per
partition, per chunk of the broadcast's last axis) by an `nc_matmul` of a [1, P] stationary (the
ones row) against the broadcast row [1, w] into a fresh PSUM tile and a `tensor_copy` of that PSUM
tile into the SBUF tile (engine left to the compiler: lower/cost/engines.py balances it), and the
consumer reads the SBUF tile; `scratch` names the added SBUF and PSUM tiles. Without such a read
`kernel` itself and an empty set are returned. The interpreter and the JIT never see kernel'; the
plan (plan.py) builds on it like on any traced kernel.

A partition broadcast is an on-chip input access whose buffer partition index uses no axis of the
tile (a [1, F] row read as [P, F], e.g. `b_row.broadcast_to((128, F))`). The engines stream
partitions in lanes and cannot read one partition into all of them; NKI's lowering replicates the
row through TensorE (docs/engine_model.md "What is fragile" before this module: "NKI lowers them to
a TensorE matmul").

Why (measured, NKIBench trn1 profile of mamba, AccelOpt profile_results.csv): its kernel reads two
[1, 7168] fp32 rows as [128, 7168] partition broadcasts in each of its 16 x 2 loop iterations, and
the profiler counts exactly 2 x K=1 x M=128 x N=7168 x 64 = 117 440 512 hardware flops (the model
had none), with Scalar active 0.37 ms above the model's ActE work, what 64 [128, 7168] PSUM -> SBUF
copies on the Scalar Engine take (64 x 5.12 us = 0.33 ms). One matmul and one copy per execution
of the consumer (no hoisting out of loops: 64 = one per consumer execution). The model counts these
fp32 flops twice, as it does every fp32 matmul (rules.FP32_HARDWARE_FLOPS_COUNT, the profiler's count
on K = 128 matmuls), so its mamba figure is 2x the measured one: the profiler evidently counts a K=1
matmul once. Time is unaffected (§4.7's fp32 4x applies).
"""
from __future__ import annotations

import dataclasses
import math

from ...core.affine import Affine, axis_var, is_axis_var
from ...core.ir import Access, Buffer, Instr, Loop, Space
from ...core.ops import engine_of

CONSUMER_ENGINES = ("vector", "scalar")       # GpSimd reads across partitions; DMAs broadcast natively
SKIP_OPS = {"alloc", "nc_matmul", "transpose", "dma_copy", "dma_transpose", "dma_indirect"}


def _is_partition_broadcast(a, buf: Buffer) -> bool:
    if not isinstance(a, Access) or buf.space == Space.HBM or len(a.shape) < 2 or a.shape[0] <= 1:
        return False
    if any(v == axis_var(0) for e in a.index for v in e.vars()):
        return False                          # axis 0 of the tile indexes something: not replicated
    par = a.index[buf.par_axis]
    return not any(is_axis_var(v) for v in par.vars())


def _chunks(a: Access, bank_bytes: int) -> list[tuple[int, int]]:
    """(offset, width) along the tile's last axis: one fp32 PSUM bank per partition per chunk."""
    inner = math.prod(a.shape[1:-1])
    w = max(1, bank_bytes // 4 // max(1, inner))
    last = a.shape[-1]
    return [(o, min(w, last - o)) for o in range(0, last, w)]


def _shift_last(index, k: int, off: int):
    """The index with tile axis k read at offset off (axis var @k -> @k + off)."""
    if not off:
        return index
    return tuple(e.subst({axis_var(k): Affine.var(axis_var(k)) + off}) for e in index)


class _Rewriter:
    def __init__(self, kernel, target):
        self.bufs = {b.name: b for b in kernel.buffers}
        self.target = target
        self.new_bufs: list[Buffer] = []
        self.ones: dict[str, Buffer] = {}
        self.count = 0

    def _ones(self, dtype: str, p: int) -> Buffer:
        key = f"{dtype}/{p}"
        if key not in self.ones:
            b = Buffer(f"bcast.ones.{dtype}.{p}", Space.SBUF, (1, p), dtype)
            self.ones[key] = b
            self.new_bufs.append(b)
        return self.ones[key]

    def materialise(self, ins: Instr, a: Access) -> tuple[list[Instr], Access]:
        """The instructions that fill a fresh SBUF tile with access `a`'s values, and its access."""
        buf = self.bufs[a.buffer]
        self.count += 1
        nd = len(a.shape)
        full_idx = tuple(Affine.var(axis_var(k)) for k in range(nd))
        sb = Buffer(f"{a.buffer}.bcast{self.count}", Space.SBUF, a.shape, buf.dtype, loc=ins.loc)
        out = [Instr("alloc", (Access(sb.name, full_idx, a.shape),), (), (), None, ins.loc)]
        chunks = _chunks(a, self.target.psum_bank_bytes)
        w0 = chunks[0][1]
        ps = Buffer(f"{a.buffer}.bcast{self.count}.psum", Space.PSUM, a.shape[:-1] + (w0,), "float32", loc=ins.loc)
        ones = self._ones(buf.dtype, a.shape[0])
        self.new_bufs += [sb, ps]
        last = nd - 1
        for off, w in chunks:
            shape = a.shape[:-1] + (w,)
            # the moving row: the broadcast source's row [1, ...w], the partition axis of size 1
            row = Access(a.buffer, _shift_last(a.index, last, off), (1,) + shape[1:])
            pacc = Access(ps.name, full_idx, shape)
            out.append(Instr("alloc", (Access(ps.name, full_idx, ps.shape),), (), (), None, ins.loc))
            out.append(Instr("nc_matmul", (pacc,), (Access(ones.name, (Affine.var(axis_var(0)), Affine.var(axis_var(1))),
                                                             (1, a.shape[0])), row),
                             (("accumulate", False), ("bcast", True)), None, ins.loc))
            dst = Access(sb.name, _shift_last(full_idx, last, off), shape)
            out.append(Instr("tensor_copy", (dst,), (pacc,), (("engine", "vector"), ("engine_auto", True)),
                             None, ins.loc))
        return out, Access(sb.name, full_idx, a.shape)

    def instr(self, ins: Instr) -> list:
        if ins.op in SKIP_OPS or engine_of(ins) not in CONSUMER_ENGINES:
            return [ins]
        pre, new_ins, changed = [], [], False
        for a in ins.ins:
            if isinstance(a, Access) and a.buffer in self.bufs and _is_partition_broadcast(a, self.bufs[a.buffer]):
                fill, acc = self.materialise(ins, a)
                pre += fill
                new_ins.append(acc)
                changed = True
            else:
                new_ins.append(a)
        if not changed:
            return [ins]
        return pre + [dataclasses.replace(ins, ins=tuple(new_ins))]

    def nodes(self, nodes) -> tuple:
        out = []
        for n in nodes:
            if isinstance(n, Loop):
                out.append(dataclasses.replace(n, body=self.nodes(n.body)))
            else:
                out.extend(self.instr(n))
        return tuple(out)


def add_broadcasts(kernel, target):
    """The kernel with its Vector/Scalar partition-broadcast reads materialised through TensorE."""
    rw = _Rewriter(kernel, target)
    body = rw.nodes(kernel.body)
    if not rw.count:
        return kernel, frozenset()
    scratch = frozenset(b.name for b in rw.new_bufs if ".bcast" in b.name)
    return dataclasses.replace(kernel, body=body, buffers=kernel.buffers + tuple(rw.new_bufs)), scratch
