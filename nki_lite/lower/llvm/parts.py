"""Long bodies become several LLVM functions ("parts"), so that LLVM's work stays linear.

LLVM's optimiser is superlinear in the size of one function (loop passes over many sibling loops,
instcombine over long chains): an unrolled kernel of 10^4 instructions in one function does not
compile in minutes. So a body whose weight exceeds PART_WEIGHT is cut into consecutive parts of at
most PART_WEIGHT, each emitted as `internal noinline i32 @nkl_part_<k>(args, arena, status, print_cb,
i64 <enclosing loop values...>)` and called in order; a part's own nested bodies may be split again.

Contract:
- `split(em, nodes) -> list[list]`: the parts of a body, in order (one part: not split). Weight: an
  instruction 1 (`alloc` 0 outside debug mode, where it emits no code), a loop 1 + its body's weight
  (capped at PART_WEIGHT: a heavier body is split inside the loop). Deterministic (the code is a
  cache key), and the arena layout (arena.py) sees the same parts.
- `emit_call(em, part, ctx)`: emits the part's function and, at the current point, its call; the
  part returns what a kernel function returns (0, 1 = error in the status words, 2 = stopped) and the
  caller passes 1 and 2 on to its own exits. A part reads the same status words and buffers as its
  caller (private buffers in the same thread arena) and receives the caller's loop values, so error
  reports name the same loop values. Bits do not change: a part runs exactly the instructions the
  caller would have run at that point, in the same order; fused runs end at part boundaries (a
  consumer in the next part reads the producer's stored value, as fusion's contract allows).
"""
from __future__ import annotations

from ...core import ir
from . import functions as F
from .context import LoopEnv

PART_WEIGHT = 64


def _weight(node, memo: dict, debug: bool) -> int:
    if isinstance(node, ir.Loop):
        w = memo.get(id(node))
        if w is None:
            w = memo[id(node)] = 1 + min(PART_WEIGHT, sum(_weight(n, memo, debug) for n in node.body))
        return w
    return 0 if node.op == "alloc" and not debug else 1


def split(em, nodes) -> list[list]:
    memo = em.part_weights
    nodes = list(nodes)
    weights = [_weight(n, memo, em.debug) for n in nodes]
    if sum(weights) <= PART_WEIGHT:
        return [nodes]
    parts, cur, w = [], [], 0
    for n, wn in zip(nodes, weights):
        if cur and w + wn > PART_WEIGHT:
            parts.append(cur)
            cur, w = [], 0
        cur.append(n)
        w += wn
    parts.append(cur)
    return parts


def emit_call(em, part: list, ctx) -> None:
    name = f"nkl_part_{len(em.mod.part_texts)}"
    em.mod.part_texts.append("")                       # reserve the index (nested parts append after it)
    index = len(em.mod.part_texts) - 1
    caller, row_value = em.fn, em.row_value          # the caller's function state comes back afterwards
    F.begin(em, caller.private, pin_mxcsr=False)
    env = {n: f"%env{j}" for j, n in enumerate(ctx.names)}
    em.run_nodes(part, LoopEnv(env, list(ctx.names)))
    params = "".join(f", i64 %env{j}" for j in range(len(ctx.names)))
    em.mod.part_texts[index] = F.end(em, name, args_noalias=False, params=params, linkage="internal ",
                                            attrs=" noinline")
    em.fn, em.row_value = caller, row_value
    b = em.b
    args = "".join(f", i64 {ctx.env[n]}" for n in ctx.names)
    rc = b.op(f"call i32 @{name}(ptr %args, ptr %arena, ptr %status, ptr %print_cb{args})")
    F.propagate_status(em, rc, "pt")
