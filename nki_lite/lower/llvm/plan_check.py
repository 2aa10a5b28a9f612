"""Can a stored launch plan (a disk-cache entry's metadata, launch_plan.to_json) belong to a kernel?

Contract: `problem(meta, kernel, debug)` returns None when it can, else why not, in words. Types and
ranges of every field are checked; the fields native code relies on (argument order, arena size,
status layout, regions, print flag) and the program count must be exactly what this kernel's code
generator lays out — an entry that passes every other check but disagrees here would run with a
too-small arena or swapped argument pointers. The analysis results (parallel, prefill, long_running)
are taken as stored, like the object code: the entry's key covers the IR and nki_lite's sources.
"""
from __future__ import annotations

from ...core import ir
from .abi import STATUS_LOOPS, STATUS_WORDS


def problem(meta: dict, kernel: ir.Kernel, debug: bool) -> str | None:
    try:
        return _field_problem(meta, kernel) or _layout_problem(meta, kernel, debug)
    except (KeyError, TypeError):
        return "metadata fields missing or mistyped"


def _field_problem(meta: dict, kernel: ir.Kernel) -> str | None:
    n = sum(1 for _ in ir.walk(kernel.body))
    bufs = kernel.buffer_map
    args = meta["arg_buffers"]
    if meta["kernel"] != kernel.name or meta["n_instrs"] != n:
        return "kernel name or instruction count differs"
    if not isinstance(args, list) or len(set(args)) != len(args) or not all(
            isinstance(a, str) and a in bufs and bufs[a].kind in ("input", "output", "const") for a in args):
        return "argument buffers do not match the kernel"
    sites, names = meta["sites"], meta["loop_names"]
    if not all(type(k) is int and 0 <= k < n for k in sites) or len(names) != len(sites) \
            or not all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in names):
        return "error sites do not match the kernel"
    if type(meta["arena_bytes"]) is not int or not 0 <= meta["arena_bytes"] < 1 << 40:
        return "bad arena size"
    sw, sl = meta["status_words"], meta["status_loops"]
    if type(sw) is not int or type(sl) is not int or not 0 < sl < sw <= 4096:
        return "bad status layout"
    if not all(isinstance(meta[f], bool) for f in ("needs_print", "parallel", "long_running")):
        return "bad flags"
    prefill = meta["prefill"]
    if not isinstance(prefill, list) or not all(isinstance(p, str) and p in kernel.outputs for p in prefill):
        return "prefilled outputs do not match the kernel"
    trips = meta["region_trips"]
    if not isinstance(trips, list) or not all(type(t) is int and 0 <= t < 1 << 40 for t in trips):
        return "bad parallel regions"
    return None


def _layout_problem(meta: dict, kernel: ir.Kernel, debug: bool) -> str | None:
    from ..analysis.dependence import program_space
    from ..parallel import regions
    from .codegen import layout_of
    args, arena = layout_of(kernel, debug)
    if list(meta["arg_buffers"]) != list(args):
        return "argument buffers differ from this kernel's"
    if meta["arena_bytes"] != arena:
        return f"arena size {meta['arena_bytes']} differs from this kernel's {arena}"
    if (meta["status_words"], meta["status_loops"]) != (STATUS_WORDS, STATUS_LOOPS):
        return "status layout differs from this nki_lite's"
    if meta["needs_print"] != any(i.op == "device_print" for i, _ in ir.walk(kernel.body)):
        return "print flag differs from this kernel's"
    extents = program_space(kernel)[1] or (1,)
    n_programs = 1
    for e in extents:
        n_programs *= e
    if meta["n_programs"] != n_programs:
        return "program count differs from this kernel's"
    loops = regions(kernel)
    if len(meta["region_trips"]) != len(loops) or any(
            t not in (0, lp.trip) for t, lp in zip(meta["region_trips"], loops)):
        return "parallel regions differ from this kernel's"
    return None
