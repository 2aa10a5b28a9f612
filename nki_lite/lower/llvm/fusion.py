"""Elementwise fusion in the JIT: a run of elementwise instructions over one iteration space becomes
one loop nest whose intermediates stay in registers.

Contract (bit-identical to running the instructions one by one):
- A run is consecutive instructions of one body (allocs may sit between them) whose ops are
  elementwise (op trait `fusable`), single-output, with the same destination shape and the same mask (or
  none). A member may read values earlier members wrote only through the identical access, and
  writes no buffer an earlier member reads or writes — except an in-place update: it writes the
  identical access an earlier member wrote and every member read that buffer through (element for
  element the same order; the earlier store is then dropped). Independent members, e.g. two loads
  that feed one op, join too. Every member computes exactly what its own rule computes — the rule's
  value function is reused — and a consumer reads the producer's *stored* value (already rounded
  to the producer's dtype), so nothing about rounding changes.
- A temporary that only members write and read is not stored at all ("elided").
- `plan(nodes, reads)` splits a body into single nodes and runs; the codegen emits runs with
  `emit_run` and everything else with the op's own rule.
"""
from __future__ import annotations

import contextlib
from collections import Counter

from ...core import ir
from ...core.affine import axis_var
from ...core.ops import OPS, accumulates


def _fusable(n) -> bool:
    return (isinstance(n, ir.Instr) and OPS[n.op].fusable and len(n.outs) == 1 and not n.attr("forwarded")
            and not any(isinstance(o, ir.Access) and o.buffer == n.out.buffer and o != n.out for o in n.ins))


def read_counts(kernel: ir.Kernel) -> Counter:
    c: Counter = Counter()
    for ins, _ in ir.walk(kernel.body):
        for o in ins.ins:
            if isinstance(o, ir.Access):
                c[o.buffer] += 1
        if accumulates(ins):
            c[ins.out.buffer] += 1
    return c


def plan(nodes, roots) -> list:
    """Items: a node, or a list [allocs..., instrs...] forming a run (>= 2 instructions)."""
    out: list = []
    i = 0
    while i < len(nodes):
        n = nodes[i]
        if not _fusable(n):
            out.append(n)
            i += 1
            continue
        members, allocs = [n], []
        written = {roots(n.out.buffer): n.out}
        read: dict = {}                                   # root -> accesses members read it through
        for o in n.ins:
            if isinstance(o, ir.Access):
                read.setdefault(roots(o.buffer), set()).add(o)
        j = i + 1
        pending_allocs = []
        while j < len(nodes):
            m = nodes[j]
            if isinstance(m, ir.Instr) and m.op == "alloc":
                pending_allocs.append(m)
                j += 1
                continue
            if not _fusable(m) or m.out.shape != n.out.shape or m.mask != n.mask:
                break
            ins = [o for o in m.ins if isinstance(o, ir.Access)]
            clash = [o for o in ins if roots(o.buffer) in written and written[roots(o.buffer)] != o]
            out_root = roots(m.out.buffer)
            # writing a buffer the run already touched is fine only element for element: an in-place
            # update (`t[...] = f(t, ...)`) of the identical access that every member read it through
            in_place = (written.get(out_root) == m.out
                        and all(o == m.out for o in read.get(out_root, ())))
            if clash or ((out_root in written or out_root in read) and not in_place):
                break
            members.append(m)
            allocs += pending_allocs
            pending_allocs = []
            written[out_root] = m.out
            for o in ins:
                read.setdefault(roots(o.buffer), set()).add(o)
            j += 1
        if len(members) >= 2:
            out.append(allocs + members)
            i = j - len(pending_allocs)
        else:
            out.append(n)
            i += 1
    return out


def _elided(em, members: list, reads: Counter) -> set:
    """Temporaries of a run that are never stored: only members write and read them (each written
    once, through its whole tile), and no member reads one before the run writes it."""
    # per-run facts gathered in one pass (each member is looked at a bounded number of times: the
    # compile time of a run is linear in its length)
    in_run: Counter = Counter()
    first_read: dict = {}                                  # buffer -> first member that reads it
    for k, m in enumerate(members):
        for o in m.ins:
            if isinstance(o, ir.Access):
                in_run[o.buffer] += 1
                first_read.setdefault(o.buffer, k)
    writes = Counter(m.out.buffer for m in members)

    def read_first(k: int) -> bool:
        """Member k's output buffer is read by member k itself or an earlier member: that read sees
        the value from before the run (e.g. `acc += x` carried across loop iterations), so the
        buffer is live after the run too."""
        return first_read.get(members[k].out.buffer, len(members)) <= k

    return {m.out.buffer for k, m in enumerate(members[:-1])
            if em.bufs[m.out.buffer].kind == "local" and em.bufs[m.out.buffer].space != ir.Space.HBM
            and reads[m.out.buffer] == in_run[m.out.buffer] and m.out == ir.Access.full(em.bufs[m.out.buffer])
            and writes[m.out.buffer] == 1 and not read_first(k)}


def _captured(em, members: list, ctx) -> list:
    """(member, inputs, value function) per member: each rule runs in capturing mode and hands over
    its value function instead of emitting."""
    items = []
    for m in members:
        with em.context(capturing=[]) as cx:
            OPS[m.op].rules["llvm"](em, m, ctx)
        (ins, value_fn), = cx.capturing
        items.append((m, ins, value_fn))
    return items


def emit_run(em, run: list, ctx, reads: Counter) -> None:
    from .rules_common import VECTOR_WIDTH, _vectorizable
    B = em.b
    allocs = [n for n in run if n.op == "alloc"]
    members = [n for n in run if n.op != "alloc"]
    for a in allocs:
        OPS["alloc"].rules["llvm"](em, a, ctx)
    elided = _elided(em, members, reads)
    last_write = {m.out: k for k, m in enumerate(members)}   # output access -> last member writing it
    items = _captured(em, members, ctx)
    slows = [em.check_bounds(m, ctx, [m.out] + list(ins), None) for m, ins, _ in items]
    slows = [x for x in slows if x is not None]
    mask = members[0].mask
    shape = members[0].out.shape
    vax = axis_var(len(shape) - 1)
    vec = (all(_vectorizable(em, m, shape, ins, False, None) for m, ins, _ in items)
           and (mask is None or vax not in mask.vars()))

    # a member whose element a later member overwrites in place needs no store of its own
    overwritten = {k for k, m in enumerate(members) if last_write[m.out] > k}

    def body(env):
        with em.context(fused={}) as cx:
            for k, (m, ins, fn) in enumerate(items):
                v = fn(env)
                if m.out.buffer not in elided and k not in overwritten:
                    em.store_raw(m.out, env, v)
                cx.fused[m.out] = v

    def fused_loops():
        with em.partitions(shape[0], "fp") as p:
            env0 = {**ctx.env, axis_var(0): p}
            if vec:
                n = shape[-1]
                nv = n // VECTOR_WIDTH
                with em.elements(shape, env0, start=1, stop=len(shape) - 1) as env:
                    live = em.mask_value(mask, env)            # uniform along the vector axis
                    with (B.if_(live, "fm") if live is not None else contextlib.nullcontext()):
                        with B.loop(nv, "fv") as c, em.context(W=VECTOR_WIDTH, vaxis=vax):
                            body({**env, vax: B.op(f"mul nsw i64 {c}, {VECTOR_WIDTH}")})
                        if n % VECTOR_WIDTH:
                            with B.loop(n - nv * VECTOR_WIDTH, "ft") as t:
                                body({**env, vax: B.op(f"add nsw i64 {t}, {nv * VECTOR_WIDTH}")})
            else:
                with em.elements(shape, env0, start=1) as env:
                    live = em.mask_value(mask, env)
                    with (B.if_(live, "fs") if live is not None else contextlib.nullcontext()):
                        body(env)

    if not slows:
        fused_loops()
        return
    # masked and possibly out of bounds somewhere: the checked, one-instruction-at-a-time code instead
    anyslow = slows[0]
    for x in slows[1:]:
        anyslow = B.op(f"or i1 {anyslow}, {x}")
    fast, slow, done = B.new_label("ff"), B.new_label("fsl"), B.new_label("fd")
    B.cond_br(anyslow, slow, fast)
    B.block(fast)
    fused_loops()
    B.br(done)
    B.block(slow)
    for m in members:
        OPS[m.op].rules["llvm"](em, m, ctx)
    B.br(done)
    B.block(done)
