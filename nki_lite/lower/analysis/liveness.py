"""Live ranges of on-chip tiles, so that memory of dead tiles can be freed (interpreter) or reused
(the JIT's arena). A kernel of 10^5 unrolled ops has 10^5 temporaries; holding all of them at once
costs 10^5 tiles of memory.

Contract: `live_ranges(kernel, units=None) -> Liveness`.
- Positions number the *units* of the kernel body in program order. By default a unit is one
  instruction; `units(nodes)` may group the items of a body differently — it returns, for the body
  `nodes`, a list whose items are `ir.Loop`s (descended into) or lists of instructions that count as
  one position (the JIT passes its schedule: a fused run, or a whole row-major body, executes its
  instructions interleaved, so only whole units are ordered).
- A buffer is *tracked* when it is an on-chip (SBUF/PSUM) root buffer with no views whose first
  touch (any access as output or operand) is one of its `alloc`s. Only tracked buffers appear.
- `ranges[name] = (first, last)`: the buffer's value is needed at no position outside
  [first, last]. A range that would cross a loop's boundary is widened to the whole loop (a value
  that lives across the back edge is live in every iteration): concretely, with L the innermost
  loop containing the first and the last touch, each end that lies inside a loop nested in L is
  moved to that nested loop's end. Two tracked buffers whose ranges do not intersect are never
  needed at the same time, in any iteration.
- `free_after[id(node)]`: names of tracked buffers that are dead once `node` (an instruction or a
  Loop, in the body where it sits) has finished; the next touch of such a buffer, if any, is its
  `alloc` in a later iteration. A node object that occurs twice in the body is never a free point.
Linear in the number of instructions (plus the loop nesting depth per buffer).

`live_interval(first_loops, first_pos, last_loops, last_pos, span)` is that widening rule on its own,
for any numbering of positions: the capacity rule's footprints (lower/footprints.py, positions of
lower/analysis/program.py) read the same rule, so the JIT's arena, the interpreter's freeing and the
verifier's SBUF/PSUM capacity agree on when a tile is live.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...core import ir
from .accesses import root_name, roots_with_views


def live_interval(first_loops, first_pos: int, last_loops, last_pos: int, span):
    """(start, end, loop) of a value touched first at `first_pos` (inside `first_loops`, outermost
    first) and last at `last_pos` (inside `last_loops`): with L the innermost loop holding both, an
    end inside a loop nested in L moves to that loop's start (first) or end (last); `span(loop)` is a
    loop's (first, last) position. `loop` is the loop nested in L that holds the last touch (None
    when the last touch sits directly in L): the point after which the value is dead."""
    k, n = 0, min(len(first_loops), len(last_loops))
    while k < n and first_loops[k] is last_loops[k]:
        k += 1
    start = span(first_loops[k])[0] if len(first_loops) > k else first_pos
    if len(last_loops) > k:
        return start, span(last_loops[k])[1], last_loops[k]
    return start, last_pos, None


class _Scope:
    """A loop's span of positions (the kernel body is the root scope, chain ())."""
    __slots__ = ("parent", "chain", "start", "end", "node")

    def __init__(self, parent, node, start):
        self.parent, self.node, self.start, self.end = parent, node, start, start - 1
        self.chain = () if parent is None else parent.chain + (self,)


def _span(scope: _Scope) -> tuple[int, int]:
    return scope.start, scope.end


@dataclass
class Liveness:
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    free_after: dict[int, list[str]] = field(default_factory=dict)
    positions: int = 0


def _default_units(nodes) -> list:
    return [n if isinstance(n, ir.Loop) else [n] for n in nodes]


def live_ranges(kernel: ir.Kernel, units=None) -> Liveness:
    units = units or _default_units
    bufs = kernel.buffer_map
    viewed = roots_with_views(kernel)
    candidate = {b.name for b in kernel.buffers
                 if b.space != ir.Space.HBM and b.base is None and b.name not in viewed}
    first: dict[str, tuple] = {}          # name -> (position, scope, was it an alloc)
    last: dict[str, tuple] = {}           # name -> (position, scope, id of the unit's last instruction)
    seen: set[int] = set()
    twice: set[int] = set()
    pos = 0

    def touch(name, p, scope, node_id, is_alloc):
        if name not in candidate:
            return
        if name not in first:
            first[name] = (p, scope, is_alloc)
        last[name] = (p, scope, node_id)

    def visit(nodes, scope):
        nonlocal pos
        for item in units(nodes):
            if isinstance(item, ir.Loop):
                inner = _Scope(scope, item, pos)
                _note(item)
                visit(item.body, inner)
                inner.end = pos - 1
                continue
            for ins in item:
                _note(ins)
            tail = id(item[-1]) if item else None
            for ins in item:
                for o in ins.outs:
                    touch(root_name(bufs, o.buffer), pos, scope, tail, ins.op == "alloc")
                for o in ins.ins:
                    if isinstance(o, ir.Access):
                        touch(root_name(bufs, o.buffer), pos, scope, tail, False)
            pos += 1

    def _note(node):
        k = id(node)
        (twice if k in seen else seen).add(k)

    visit(kernel.body, _Scope(None, None, 0))
    out = Liveness(positions=pos)
    for name, (f, fs, was_alloc) in first.items():
        if not was_alloc:
            continue                              # read before any alloc: not tracked (never freed)
        l, ls, tail = last[name]
        start, end, loop = live_interval(fs.chain, f, ls.chain, l, _span)
        free = tail if loop is None else id(loop.node)
        out.ranges[name] = (start, end)
        if free is not None and free not in twice:
            out.free_after.setdefault(free, []).append(name)
    return out
