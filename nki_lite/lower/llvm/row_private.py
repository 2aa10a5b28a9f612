"""Row-private tiles of a row-major body: stored as one partition row, reused by every row.

A row-major body (rowmajor.py) runs all its instructions for partition 0, then partition 1, ...
A tile that lives only inside that body is, at row r, only ever touched in its row r. Stored at full
size, the rows of a [128, 4096] fp32 temporary are 2 MiB of distinct addresses: each row is written,
read once, and then evicted dirty to L3/DRAM (more than Zen 4's 1 MiB L2). Stored as one row (16 KiB,
reused by every row), it stays in L1 and never reaches memory.

Contract: `row_private(em, nodes) -> {root name: partition dim}` for a body `row_local` accepted:
the on-chip root buffers (no views) that the body allocates before any other touch, that some
instruction of the body writes (so, by row_local's rule, every access of the body reaches them through
one partition mapping `@0 + c` on one dimension), and that no instruction outside the body touches.
At row r every access of such a buffer touches partition r + c only; no earlier row touched it, and
nothing reads it after the body. So giving it the storage of one partition (the partition dimension
dropped from its address: `Emitter.flat_index`), reused by each row, changes no value any
instruction reads. In debug mode the buffer's NaN fill runs at the start of every row (rows read
exactly what they read at full size: the fill). Bounds checks keep the buffer's full shape.
"""
from __future__ import annotations

from collections import Counter

from ...core import ir
from ...core.ops import accumulates
from .rowmajor import _row_index


def touch_counts(kernel: ir.Kernel) -> Counter:
    """Per root buffer: how many (instruction occurrence, access) pairs touch it, allocs included."""
    bufs = kernel.buffer_map
    c: Counter = Counter()
    for ins, _ in ir.walk(kernel.body):
        for acc in _touches(ins):
            c[bufs[acc.buffer].base or acc.buffer] += 1
    return c


def _touches(ins: ir.Instr):
    yield from ins.outs
    yield from (o for o in ins.ins if isinstance(o, ir.Access))
    if accumulates(ins):
        yield ins.outs[0]


def row_private(em, nodes) -> dict[str, int]:
    bufs = em.bufs
    local: Counter = Counter()
    first_is_alloc: dict[str, bool] = {}
    written: dict[str, int] = {}
    for n in nodes:
        for acc in _touches(n):
            root = bufs[acc.buffer].base or acc.buffer
            local[root] += 1
            first_is_alloc.setdefault(root, n.op == "alloc")
        if n.op != "alloc":
            for o in n.outs:
                ri = _row_index(o)
                if ri is not None:
                    written[bufs[o.buffer].base or o.buffer] = ri[0]
    viewed = em.viewed_roots
    out = {}
    for root, dim in written.items():
        b = bufs[root]
        if (first_is_alloc[root] and root not in viewed and b.base is None and b.space != ir.Space.HBM
                and local[root] == em.touches[root]):
            out[root] = dim
    return out


def loop_extents(kernel: ir.Kernel) -> dict[str, int]:
    """Every loop variable's trip count and every SPMD program id's extent (vars range over [0, n))."""
    ext = {f"pid{g}": n for g, n in enumerate(kernel.grid or ())}

    def visit(nodes):
        for n in nodes:
            if isinstance(n, ir.Loop):
                ext[n.var] = max(ext.get(n.var, 1), n.trip)
                visit(n.body)
    visit(kernel.body)
    return ext


def _statically_in_bounds(em, acc: ir.Access) -> bool:
    shape = em.bufs[acc.buffer].shape
    ext = {**em.extents, **{f"@{k}": n for k, n in enumerate(acc.shape)}}
    for d, e in enumerate(acc.index):
        if not e.vars() <= ext.keys():
            return False
        lo, hi = e.bounds(ext)
        if lo < 0 or hi >= shape[d]:
            return False
    return True


def destinations(em, nodes, private: dict[str, int]) -> dict[str, ir.Access]:
    """Row-private tiles stored straight in the HBM row their body's store later overwrites:
    {tile: the store's destination access}. Then a row's result is written where it ends up while
    the row is computed (the stores' cache misses overlap the arithmetic), and the final pass updates
    L1-resident lines in place instead of streaming a copy.

    Conditions (each keeps every value any instruction reads, and every element outside the
    store's destination, unchanged): the store S is unmasked, its destination access statically in
    bounds for every loop value (the tile's writes run before S's own check), of the tile's dtype and
    shape, onto an HBM root R that no instruction of the body reads and only S writes; the tile is
    2-D, partition dim 0, reached only through its full identity access [@0, @1], and no instruction
    after S touches it. S writes element (p, j) of R from values of element (p, j) of the tile: in a
    fused run the tile's element is read before S stores over it, and nothing reads it again."""
    out: dict[str, ir.Access] = {}
    bufs = em.bufs
    writers: Counter = Counter()
    read_roots: set = set()
    for n in nodes:
        if n.op == "alloc":
            continue
        for o in n.outs:
            writers[em.root(o.buffer)] += 1
        for o in n.ins:
            if isinstance(o, ir.Access):
                read_roots.add(em.root(o.buffer))
        if accumulates(n):
            read_roots.add(em.root(n.outs[0].buffer))
    last_touch: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for acc in _touches(n):
            last_touch[acc.buffer] = k
    stored = _stored_tiles(em, nodes)
    used: set = set()
    for k, s in enumerate(nodes):
        if s.op == "alloc" or s.mask is not None or len(s.outs) != 1:
            continue
        dst = s.outs[0]
        root = em.root(dst.buffer)
        if (bufs[root].space != ir.Space.HBM or root in read_roots or writers[root] != 1 or root in used
                or len(dst.shape) != 2 or not _statically_in_bounds(em, dst)):
            continue
        for t in stored:                                      # the latest-written tile first
            tb = bufs[t]
            if (private.get(t) != 0 or t in out or tb.shape != dst.shape or tb.dtype != bufs[dst.buffer].dtype
                    or last_touch.get(t, k + 1) > k):
                continue
            full = ir.Access.full(tb)
            if all(a == full for n in nodes for a in _touches(n) if a.buffer == t):
                out[t] = dst
                used.add(root)
                break
    return out


def _stored_tiles(em, nodes) -> list[str]:
    """Tiles the body really stores, latest first writer first: not those only a forwarded load
    writes (it emits no stores), nor those a fused run keeps in registers (written and read only by
    members of one run)."""
    from .fusion import plan
    in_run: dict[str, set] = {}
    for k, item in enumerate(plan(list(nodes), em.root)):
        for n in (item if isinstance(item, list) else [item]):
            for acc in _touches(n):
                if n.op != "alloc":
                    in_run.setdefault(acc.buffer, set()).add(k if isinstance(item, list) else ("single", id(n)))
    first_write: dict[str, int] = {}
    for k, n in enumerate(nodes):
        if n.op == "alloc" or n.attr("forwarded"):
            continue
        for o in n.outs:
            first_write.setdefault(o.buffer, k)
    kept = [t for t in first_write if not (len(in_run.get(t, ())) == 1 and isinstance(next(iter(in_run[t])), int))]
    return sorted(kept, key=lambda t: -first_write[t])
