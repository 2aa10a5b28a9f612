"""Tracing a kernel function into an `ir.Kernel`.

Contract: `trace(fn, bound, grid, target)` runs `fn` once with proxy tiles for its tensor
arguments (numpy arrays or nt.tensor placeholders become HBM input buffers named after the
parameters) and passes every other argument through as a trace-time constant. The returned
tensors (None, one, or a tuple/list) become the kernel's outputs. Rules checked here: returned
values are whole HBM tensors, or whole on-chip tiles (NKI's simulator returns their contents, as in
the documented `nisa.range_select` example: each is stored into a fresh HBM output at the return);
nt.mutable_tensor parameters are returned; no loop was left by break/return.
"""
from __future__ import annotations

import inspect
import sys
from collections import Counter
from dataclasses import replace

import numpy as np

from .. import errors
from ..loc import Loc, UNKNOWN_LOC, _is_internal, capture_loc, frame_loc
from ..core import ir
from .tensor_spec import TensorSpec, is_mutable_annotation
from ..core import dtypes as D
from . import boolops, purity, source, syntax
from . import ops_memory  # noqa: F401 - it and ops_math fill tile.TILE_OPS, which every traced kernel needs
from .memory import new_buffer
from .tile import Tile
from .list_loops import index_error_unroll
from .tracer import Tracer, UnrollRequest, active


def fn_loc(fn) -> Loc:
    try:
        code = fn.__code__
        return Loc(code.co_filename, code.co_firstlineno, 0)
    except AttributeError:
        return UNKNOWN_LOC


def arg_spec(value) -> tuple[tuple[int, ...], str] | None:
    """(shape, dtype name) for tensor-like arguments, None for trace-time constants."""
    if isinstance(value, TensorSpec):
        return tuple(value.shape or ()), D.name_of(value.dtype if value.dtype is not None else np.float32)
    if isinstance(value, np.ndarray):
        return value.shape, D.name_of(value.dtype)
    return None


def _recursion_error(e: RecursionError):
    """NL-E809 at the recursive call: the user-code line that occurs most often in the traceback."""
    frames, tb = [], e.__traceback__
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    if not frames:
        return errors.make("recursion", f"tracing the kernel exceeded Python's recursion limit "
                           f"({sys.getrecursionlimit()})")
    counts = Counter((t.tb_frame.f_code.co_filename, t.tb_lineno) for t in frames)
    (where, n), = counts.most_common(1)
    last = next(t for t in frames if (t.tb_frame.f_code.co_filename, t.tb_lineno) == where)   # at the call
    name = last.tb_frame.f_code.co_name
    return errors.make("recursion", f"'{name}' was called {n} times recursively from this line while tracing, "
                       f"reaching Python's recursion limit ({sys.getrecursionlimit()}): the recursion never "
                       "ended", loc=frame_loc(last.tb_frame))


def trace(fn, bound: inspect.BoundArguments, grid: tuple[int, ...], target: str,
          outputs_in_params: bool = False, write_back_params: bool = False) -> ir.Kernel:
    """outputs_in_params: a legacy `nki.trace` kernel, whose outputs are tensors passed in — every
    parameter it writes is an output (written back into the caller's array), the rest stay read-only.
    write_back_params: a current-dialect kernel, which may update its inputs in place — every parameter
    it writes is written back into the caller's array (ir.Kernel.written_back unless returned).

    Loops whose variables steer Python control flow are traced unrolled (lang/tracer.UnrollRequest):
    the kernel is traced again with them unrolled, at most MAX_UNROLL_RETRACES times."""
    unroll: set = set()
    for _ in range(MAX_UNROLL_RETRACES):
        try:
            return _trace_once(fn, bound, grid, target, outputs_in_params, frozenset(unroll), write_back_params)
        except UnrollRequest as u:
            last = u.error
            unroll |= u.locs
        except IndexError as e:        # a list filled in a symbolic loop, indexed past its one tile
            locs = index_error_unroll(e)
            if not locs or locs <= unroll:
                raise
            last = e
            unroll |= locs
    raise last


MAX_UNROLL_RETRACES = 32    # each retrace adds the loops it found; the NKI Library's qkv_cte needs 9+


def _trace_once(fn, bound: inspect.BoundArguments, grid: tuple[int, ...], target: str,
                outputs_in_params: bool, unroll_locs: frozenset, write_back_params: bool = False) -> ir.Kernel:
    loc = fn_loc(fn)
    outer = active()
    if outer is not None and outer.fn is fn:        # the kernel calls itself with trace-time constants only
        raise errors.make("recursive_kernel", f"kernel '{fn.__name__}' calls itself: a kernel is traced once into "
                          "straight-line instructions and loops, so it cannot recurse", loc=capture_loc())
    tr = Tracer(fn.__name__, grid, target)
    tr.unroll_locs = set(unroll_locs)
    tr.broken_loop = None
    tr.fn = fn
    tr.object_truth = write_back_params      # the current dialect: `if hbm_tensor:` tests an optional argument
    sig = inspect.signature(fn)
    with tr:
        call_args = _bind_params(tr, sig, bound, loc, outputs_in_params or write_back_params)
        result = _run_body(fn, sig, call_args)
        if tr.broken_loop is not None:
            raise errors.make("bad_loop", "break (or an early return) inside nl.affine_range or nl.sequential_range: "
                              "the loop body must run to completion in every iteration", loc=tr.broken_loop,
                              hint="use a mask= for partial work, or nl.static_range to unroll")
        outputs, kind, views = _returned_tensors(tr, _copy_out_tiles(tr, result), loc)
        if write_back_params:
            outs, extra = _write_back_outputs(tr, outputs)
            return tr.freeze(outs, kind, loc, written_back=extra, output_views=views)
        _mark_outputs(tr, sig, outputs, loc, outputs_in_params)
        return tr.freeze(tuple(outputs), kind, loc, output_views=views)


def _bind_params(tr: Tracer, sig: inspect.Signature, bound: inspect.BoundArguments, loc: Loc,
                 outputs_in_params: bool) -> dict:
    """The kernel's arguments: tensors become HBM input tiles named after their parameters, everything
    else passes through as a trace-time constant."""
    call_args = {}
    for name, value in bound.arguments.items():
        spec = arg_spec(value)
        param = sig.parameters[name]
        if spec is None:
            call_args[name] = value
            continue
        shape, dt = spec
        mutable = is_mutable_annotation(param.annotation) or outputs_in_params
        buf = tr.add_buffer(ir.Buffer(name, ir.Space.HBM, shape, dt, "input", mutable=mutable, loc=loc))
        tr.params.append(name)
        call_args[name] = Tile(tr, ir.Access.full(buf), dt)
    return call_args


def _run_body(fn, sig: inspect.Signature, call_args: dict):
    """Run the kernel body once under the source checks (syntax rules, purity watch)."""
    args, kwargs = [], {}
    for name, value in call_args.items():
        p = sig.parameters[name]
        if p.kind == p.VAR_POSITIONAL:
            args.extend(value)
        elif p.kind == p.VAR_KEYWORD:
            kwargs.update(value)
        elif p.kind == p.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            args.append(value)
    sources = source.reachable(fn, source.constant_functions(call_args))
    syntax.check(sources)
    watched = purity.watch(sources)
    try:
        result = (boolops.rewritten(fn) or fn)(*args, **kwargs)
    except RecursionError as e:
        raise _recursion_error(e) from None
    except ValueError as e:
        found = None if isinstance(e, errors.NkiLiteError) else source.unpack_shape_mismatch(e)
        if found is None:
            raise
        raise errors.make("argument", found[1], loc=found[0],
                          hint="pass a tensor of the expected rank (reshape it on the host)") from None
    purity.report(watched, fn.__name__)
    return result


def _copy_out_tiles(tr: Tracer, result):
    """Returned whole on-chip tiles become HBM outputs holding their final contents (one DMA each, at
    the end of the kernel); everything else is returned as it is and checked by _returned_tensors."""
    def out(v):
        if not isinstance(v, Tile) or v.space == ir.Space.HBM or v.access != ir.Access.full(v.buf):
            return v
        buf = new_buffer(tr, v.shape, v.buf.dtype, ir.Space.HBM, f"{v.name}_out", v.buf.loc or UNKNOWN_LOC,
                         hbm_kind="shared_hbm")
        dst = Tile(tr, ir.Access.full(buf), v.dtype)
        tr.emit(ir.Instr("dma_copy", (dst.access,), (v.access,), (("engine", "dma"),), None, v.buf.loc or UNKNOWN_LOC))
        return dst
    if isinstance(result, (tuple, list)):
        return type(result)(out(v) for v in result)
    return out(result)


def _returned_tensors(tr: Tracer, result, loc: Loc) -> tuple[list[str], str, tuple]:
    """The names of the returned HBM tensors, the return kind and the returned whole views. A whole
    HBM view (`out.reshape(shape)`, `out.view(dtype)`: a view buffer covering all of its root) is
    returned as its root, reshaped for the caller (Kernel.output_views); a part of a tensor is NL-E901."""
    if result is None:
        values, kind = [], "none"
    elif isinstance(result, (tuple, list)):
        values, kind = list(result), "tuple"
    else:
        values, kind = [result], "single"
    outputs, views = [], []
    for v in values:
        if not isinstance(v, Tile) or v.space != ir.Space.HBM:
            raise errors.make("argument", f"a kernel returns HBM tensors (created with buffer=nl.shared_hbm); "
                              f"got {v!r}", loc=loc)
        root = tr.buffers[v.buf.base] if v.buf.base is not None else v.buf
        if v.access != ir.Access.full(v.buf) or not _whole_view(v.buf, root):
            raise errors.make("argument", f"the kernel returns a view of '{v.buf.base or v.name}'; return the "
                              "whole tensor", loc=loc, hint="return the tensor itself or a reshape of all of it")
        if root is not v.buf:
            views.append((len(outputs), tuple(v.buf.shape), v.buf.dtype))
        outputs.append(root.name)
    return outputs, kind, tuple(views)


def _whole_view(view: ir.Buffer, root: ir.Buffer) -> bool:
    """A buffer that is its root, or an HBM view (reshape / dtype view) of all of the root's bytes."""
    if view is root:
        return True
    nbytes = lambda b: b.size * D.INFO[b.dtype].itemsize
    return view.kind == "view" and nbytes(view) == nbytes(root)


def _mark_outputs(tr: Tracer, sig: inspect.Signature, outputs: list[str], loc: Loc, outputs_in_params: bool) -> None:
    """Legacy nki.trace kernels output every parameter they write; nt.mutable_tensor parameters must be
    returned; returned local tensors become the kernel's outputs."""
    if outputs_in_params:
        written = _written_buffers(tr.stack[0].nodes, tr.buffers)
        for name in tr.params:
            if name in written and name not in outputs:
                outputs.append(name)
            elif name not in written and not is_mutable_annotation(sig.parameters[name].annotation):
                tr.buffers[name] = replace(tr.buffers[name], mutable=False)
    for name in tr.params:
        b = tr.buffers[name]
        if b.mutable and name not in outputs:
            raise errors.make("mutable_not_returned", f"parameter '{name}' is annotated nt.mutable_tensor but "
                              "is not returned by the kernel", loc=loc)
    for name in outputs:
        b = tr.buffers[name]
        if b.kind == "local":
            tr.buffers[name] = replace(b, kind="output")


def _write_back_outputs(tr: Tracer, outputs: list[str]) -> tuple[tuple, tuple]:
    """The current dialect: parameters the kernel writes stay mutable and are written back (appended
    to the outputs when not returned); the others are read-only. No return is required of a written
    parameter (torch-neuronx declares such in-place updates with mutates_args)."""
    written = _written_buffers(tr.stack[0].nodes, tr.buffers)
    extra = tuple(n for n in tr.params if n in written and n not in outputs)
    for name in tr.params:
        if name not in written:
            tr.buffers[name] = replace(tr.buffers[name], mutable=False)
    for name in outputs:
        if tr.buffers[name].kind == "local":
            tr.buffers[name] = replace(tr.buffers[name], kind="output")
    return tuple(outputs) + extra, extra


def _written_buffers(nodes, buffers) -> set[str]:
    """Root buffers (views resolved) that any instruction in `nodes` writes."""
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, ir.Loop):
            out |= _written_buffers(n.body, buffers)
            continue
        for a in n.outs:
            name, seen = a.buffer, 0
            while buffers[name].base is not None and seen < 64:
                name, seen = buffers[name].base, seen + 1
            out.add(name)
    return out
