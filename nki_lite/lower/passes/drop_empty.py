"""Empty tensors: instructions that write nothing disappear; one that would compute a non-empty
result from an empty operand is an error.

Zero-size tensors are legal (an empty batch flows through a kernel: empty in, empty out). An
instruction whose every output access has zero elements has no effect on any backend, so removing
it is exact — and it keeps the backends from ever seeing a zero-extent loop nest, whose bounds
checks and vector loops assume at least one element.

An instruction with a non-empty output and an empty input would be a reduction (or a matmul
contraction) over nothing. Its value is a convention (0 for a sum, -inf for a max, ...) that NKI
does not define and that would differ between ops, so nki_lite refuses it at the instruction's line
rather than invent one. `alloc` of an empty tile is kept (it marks liveness, costs nothing).
"""
from __future__ import annotations

from dataclasses import replace

from ... import errors
from ...core.ir import Access, Instr, Kernel, Loop


def _empty(acc) -> bool:
    return isinstance(acc, Access) and 0 in acc.shape


def drop_empty(kernel: Kernel) -> Kernel:
    changed = False

    def visit(nodes):
        nonlocal changed
        out = []
        for n in nodes:
            if isinstance(n, Loop):
                out.append(replace(n, body=tuple(visit(n.body))))
                continue
            if n.op == "alloc" or not n.outs:
                out.append(n)
                continue
            if all(_empty(o) for o in n.outs):
                changed = True
                continue
            empty_in = next((a for a in n.ins if _empty(a)), None)
            if empty_in is not None:
                raise errors.make("shape_mismatch",
                                  f"'{n.op}' computes a {n.out.shape} result from the empty operand "
                                  f"'{empty_in.buffer}' (shape {empty_in.shape}): a reduction or contraction "
                                  "over zero elements has no NKI-defined value", loc=n.loc,
                                  hint="skip the call for empty inputs, or guard it with `if n > 0:` on the "
                                       "(trace-time) shape")
            out.append(n)
        return out

    body = tuple(visit(kernel.body))
    return replace(kernel, body=body) if changed else kernel
