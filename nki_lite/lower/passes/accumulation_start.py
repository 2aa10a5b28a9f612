"""PSUM accumulation groups start by overwriting: a fresh PSUM tile whose first use is an
accumulating matmul (`psum[...] += nisa.nc_matmul(...)`) starts from zero.

NKI's architecture guide (general/nki/arch/trainium_inferentia2_arch.rst, "Near-memory accumulation
in PSUM"): "the first nki.isa.nc_matmul instruction overwrites the destination PSUM bank with the
instruction output", the following ones accumulate — a *matmul accumulation group*. So a kernel
that declares its accumulator with `nl.ndarray(..., buffer=nl.psum)` (or a `ncc.psum.mod_alloc`
address) instead of `nl.zeros` and only `+=`s matmuls into it is valid on hardware (nki-samples'
allocated RMSNorm-QKV kernel does this). Without this pass the interpreter read the NaN fill of
the new tile and the JIT whatever its memory held.

Contract: after every `alloc` of a PSUM buffer, if the first later instruction of the same block
(in program order, looking into nested loops) that touches the buffer is an accumulating matmul
writing it, a `memset(0)` of the allocated region is inserted right after the alloc (attr
`group_start`). fp32
`0 + p` is `p` exactly (only the sign of a zero product can differ from the overwrite). The engine
model already folds a PSUM memset(0) into the accumulating matmul that follows it
(lower/cost/plan.py `_fold_memsets`), so the hardware's cost is unchanged. Shared by every backend,
before verification (it only initialises memory, it cannot hide an error: uninitialised-read checks
no longer fire for this pattern because on hardware it reads nothing uninitialised).
"""
from __future__ import annotations

from dataclasses import replace

from ...core.ir import Access, Imm, Instr, Kernel, Loop, Space, walk
from ...core.ops import accumulates


def _touches(instr: Instr, buf: str) -> bool:
    return any(isinstance(a, Access) and a.buffer == buf for a in instr.outs + instr.ins)


def _starts_accumulation(rest, buf: str) -> bool:
    """Is the first instruction of `rest` touching `buf` an accumulating write to it?"""
    for instr, _ in walk(tuple(rest)):
        if _touches(instr, buf):
            # a masked `+=` matmul is traced as matmul-into-temporary + masked add (lang/tile.py)
            return (accumulates(instr) or bool(instr.attr("matmul_group"))) and instr.out.buffer == buf
    return False


def start_accumulation_groups(kernel: Kernel) -> Kernel:
    psum = {b.name for b in kernel.buffers if b.space == Space.PSUM}
    if not psum:
        return kernel
    changed = False

    def visit(nodes):
        nonlocal changed
        nodes = [replace(n, body=tuple(visit(n.body))) if isinstance(n, Loop) else n for n in nodes]
        out = []
        for k, n in enumerate(nodes):
            out.append(n)
            if isinstance(n, Instr) and n.op == "alloc" and n.out.buffer in psum \
                    and _starts_accumulation(nodes[k + 1:], n.out.buffer):
                # group_start: not the kernel's own write (the hardware's group starts at the matmul;
                # lower/verify_alloc.py starts the tile's live range there)
                out.append(Instr("memset", (n.out,), (Imm(0, "int32"),), (("engine", "vector"), ("group_start", True)),
                                 None, n.loc))
                changed = True
        return out

    body = tuple(visit(kernel.body))
    return replace(kernel, body=body) if changed else kernel
