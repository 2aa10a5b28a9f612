"""Fold `tmp = op(...); view[...] = tmp` into `view[...] = op(...)`.

Tracing gives every nl op a fresh temporary, and `t[...] = nl.load(...)` then copies the temporary
into `t`. When the instruction that writes a temporary T is immediately followed (in the same body)
by an on-chip `tensor_copy` (with the producer's mask, or both unmasked) of the whole of T into a
destination with T's dtype and shape,
and T is read nowhere else, the producer can write the destination directly: the copy is an exact
identity, so results are bit-identical. T and its `alloc` disappear. Stores (`dma_copy` to HBM)
are never folded: a compute engine cannot write HBM, the DMA is real work.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...core.ir import Access, Instr, Kernel, Loop, walk
from ...core.ops import accumulates



def _reads(kernel: Kernel) -> Counter:
    c: Counter = Counter()
    for ins, _ in walk(kernel.body):
        for o in ins.ins:
            if isinstance(o, Access):
                c[o.buffer] += 1
        if accumulates(ins):
            c[ins.out.buffer] += 1
    return c


def fold_copies(kernel: Kernel) -> Kernel:
    bufs = kernel.buffer_map
    reads = _reads(kernel)
    writers: Counter = Counter(o.buffer for ins, _ in walk(kernel.body) if ins.op != "alloc" for o in ins.outs)
    removed: set[str] = set()

    def fold(nodes):
        out: list = []
        for n in nodes:
            if isinstance(n, Loop):
                out.append(replace(n, body=tuple(fold(n.body))))
                continue
            prev = out[-1] if out and isinstance(out[-1], Instr) else None
            if (prev is not None and n.op == "tensor_copy" and n.mask == prev.mask and prev.op != "alloc"
                    and len(prev.outs) == 1 and isinstance(n.ins[0], Access)):
                tmp = prev.out.buffer
                src = n.ins[0]
                b = bufs[tmp]
                if (src.buffer == tmp and src == Access.full(b) and prev.out == Access.full(b)
                        and b.kind == "local" and reads[tmp] == 1 and writers[tmp] == 1
                        and bufs[n.out.buffer].dtype == b.dtype and n.out.shape == b.shape
                        and n.out.buffer != tmp):
                    out[-1] = replace(prev, outs=(n.out,))
                    removed.add(tmp)
                    continue
            out.append(n)
        return out

    body = fold(kernel.body)
    if not removed:
        return kernel

    def drop_allocs(nodes):
        res = []
        for n in nodes:
            if isinstance(n, Loop):
                res.append(replace(n, body=tuple(drop_allocs(n.body))))
            elif not (n.op == "alloc" and n.out.buffer in removed):
                res.append(n)
        return res

    return replace(kernel, body=tuple(drop_allocs(body)),
                   buffers=tuple(b for b in kernel.buffers if b.name not in removed))
