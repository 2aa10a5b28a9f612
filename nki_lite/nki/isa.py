"""nki.isa (nisa) of the current `nki` dialect: dst-first instructions over nki_lite's legacy ISA.

Contract:
- Each built instruction takes the reference's parameters (reference.py, from aws-neuron-sdk's
  nki/api/nki/isa stubs): `dst` first, then its operands; there are no `mask=` or `dtype=` arguments
  (the result has dst's dtype). Exception: public kernels written for NKI 0.2 (nki-samples' tutorials)
  pass `dtype=` to tensor_copy and scalar_tensor_tensor; it is accepted there and is the instruction's
  output dtype, which the assignment into dst then converts (one more rounding only if they differ). It is the legacy nki_lite instruction assigned into dst:
  `dst[...] = legacy(operands, dtype=dst's dtype)`, so it traces into the same IR ops, with the same
  verification, numerics, interpreter, JIT and engine-model rules, and errors name the kernel's line.
- dst must be a tensor of the kernel (NL-E914 otherwise). `name=` and `priority=` change nothing
  (instruction names and DMA priorities are compiler hints); `engine=engine.unknown` lets the
  instruction choose its engine as in the legacy dialect.
- nc_matmul: accumulate=False overwrites dst, True accumulates into it, None (the default)
  accumulates, which is "first write overwrites, later writes accumulate" because the dialect's
  nl.ndarray zero-fills PSUM tensors (nki/language.py). A trace-time-unknown `accumulate` (e.g.
  `i > 0` of a loop variable) needs per-iteration flags in the IR: NL-E916.
- A documented argument value that nki_lite does not implement is NL-E916 at the line; every such
  gap is declared in the instruction's `partial=` (docs/compat_nki.md).
- The enums (also as the submodule `nki.isa.constants`): `engine`, `nc_version`, `reduce_cmd`, `matmul_perf_mode`, `dge_mode`, `oob_mode` are
  nki_lite.isa's (so the legacy instructions accept them); `dma_engine` is new. Every other
  reference name is a NotBuilt stub (NL-E913 when used).
"""
from __future__ import annotations

import types
from enum import Enum

import numpy as np

from .. import errors
from .. import isa as _legacy
from ..isa import dge_mode, engine, get_nc_version, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401
from ..isa import gpsimd_engine, scalar_engine, tensor_engine, unknown_engine, vector_engine  # noqa: F401
from ..loc import capture_loc
from .. import language as _nl
from . import _bridge, isa_affine
from .conform import conform
from .surface import fill, instruction, not_built_argument
from ..lang.isa_dma_compute import emit_dma_compute

sync_engine = engine.sync


class dma_engine(Enum):  # noqa: N801 - the reference's spelling
    """Which DMA engine sendrecv uses (nki_lite models DMA queues without this distinction)."""
    dma = 1
    gpsimd_dma = 2


def _dst(dst, api: str):
    if not _bridge.is_tensor(dst):
        raise errors.make("dst_operand", f"{api}: dst must be a tensor or tile of the kernel, got "
                          f"{type(dst).__name__}", loc=capture_loc())
    return dst


def _put(dst, value) -> None:
    """dst[...] = value: the legacy assignment (a fresh result is written straight into dst)."""
    dst[...] = value


def _dt(dst) -> str:
    return dst.dtype_name


_RESET = "reduce_cmd other than idle / reset_reduce (accumulator registers carried across instructions)"


# ------------------------------------------------------------------ data movement

@instruction("nki.isa.dma_copy")
def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None):
    d = _dst(dst, "nisa.dma_copy")
    d, src = _same_shape(d, src)
    _legacy.dma_copy(dst=d, src=src, oob_mode=oob_mode, dge_mode=dge_mode)


@instruction("nki.isa.dma_compute", partial={"srcs": "a source with a vector_offset (read-modify-write scatter / "
                                                       "gather) is NL-E916"})
def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error, name=None):
    d = _dst(dst, "nisa.dma_compute")
    if isinstance(srcs, (list, tuple)):      # each source is reshaped to dst's shape as dma_copy's src is
        srcs = [_same_shape(d, s)[1] for s in srcs]
        d = _same_shape(d, srcs[0])[0] if srcs else d
    emit_dma_compute(d, srcs, reduce_op, scales=scales, unique_indices=unique_indices)


def _same_shape(dst, src):
    """The reference: "The total number of data elements in src must match that of dst" (shapes may
    differ). A whole HBM tensor on either side is reshaped to the other's shape (row-major, as a DMA
    walks both); views whose shapes differ only by size-1 axes have those axes indexed away; other
    shape pairs go to the legacy instruction, whose NL-E103 names them."""
    if not _bridge.is_tensor(src) or tuple(dst.shape) == tuple(src.shape):
        return dst, src
    if int(np.prod(dst.shape)) != int(np.prod(src.shape)):
        return dst, src
    if _bridge.is_indirect(src) or _bridge.is_indirect(dst):
        return _expanded_to_indirect(dst, src)
    if int(np.prod(dst.shape)) == 1:             # one element each side (a 0-d `t[0, 0]` and a [1, 1] view)
        return _element(dst), _element(src)
    if _bridge.is_whole_hbm(src):
        return dst, src.reshape(tuple(dst.shape))
    if _bridge.is_whole_hbm(dst):
        return dst.reshape(tuple(src.shape)), src
    d, s = _squeezed(dst), _squeezed(src)        # views: shapes that differ only by size-1 axes
    if d.shape and tuple(d.shape) == tuple(s.shape):
        return d, s
    return dst, src


def _expanded_to_indirect(dst, src):
    """A run-time indexed view (which cannot be re-viewed) and a plain view whose shapes differ only by
    size-1 axes (bwmm_bwd: `.ap` pattern [[H, n], [1, 1], [1, h]] into `t[0:n, i, 0:h]`): the plain side gets
    the indirect side's size-1 axes (expand_dim); other pairs go to the legacy instruction unchanged."""
    plain, ind = (dst, src) if _bridge.is_indirect(src) else (src, dst)
    want = tuple(ind.shape)
    if _bridge.is_indirect(plain) or [n for n in want if n != 1] != [n for n in plain.shape if n != 1]:
        return dst, src
    t = plain
    for k, n in enumerate(want):
        if k < len(t.shape) and t.shape[k] == n:
            continue
        if n != 1 or k == 0:                     # an extra size-1 axis of the plain side, or a partition axis
            return dst, src
        t = t.expand_dim(k)
    if tuple(t.shape) != want:
        return dst, src
    return (t, src) if plain is dst else (dst, t)


def _element(t):
    """The single element of a one-element tensor or view as a 0-d view (t itself when already 0-d)."""
    return _bridge.drop_axes(t, range(len(t.shape)))


def _squeezed(t):
    """t with its size-1 axes indexed away (t[0, :, 0] for shape (1, n, 1)), keeping the last axis of an
    all-ones shape ((1, 1) -> (1,)); t itself if it has none."""
    shape = tuple(t.shape)
    if 1 not in shape[:-1] and (shape[-1:] != (1,) or len(shape) == 1):
        return t
    ones = [a for a, n in enumerate(shape) if n == 1]
    if len(ones) == len(shape):
        ones.pop()
    return _bridge.drop_axes(t, ones)


@instruction("nki.isa.tensor_copy")
def tensor_copy(dst, src, engine=engine.unknown, name=None, dtype=None):
    d, src = conform(_dst(dst, "nisa.tensor_copy"), src)
    _put(d, _legacy.tensor_copy(src, dtype=dtype or _dt(dst), engine=engine))


@instruction("nki.isa.memset")
def memset(dst, value, engine=engine.unknown, name=None):
    d = _dst(dst, "nisa.memset")
    _put(d, _legacy.memset(d.shape, value, _dt(d), engine=engine))


@instruction("nki.isa.tensor_copy_predicated")
def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    _legacy.tensor_copy_predicated(src=src, dst=_dst(dst, "nisa.tensor_copy_predicated"), predicate=predicate,
                                   reverse_pred=reverse_pred)


# ------------------------------------------------------------------ Tensor Engine

@instruction("nki.isa.nc_matmul", partial={"accumulate": "a trace-time-unknown value (e.g. i > 0 of a loop "
                                                        "variable): per-iteration flags need IR support"})
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):
    d = _dst(dst, "nisa.nc_matmul")
    if accumulate is not None and not isinstance(accumulate, (bool, int)):
        raise not_built_argument("nisa.nc_matmul", f"accumulate={accumulate!r} (not a trace-time bool)")
    result = _legacy.nc_matmul(stationary, moving, is_transpose=is_transpose, perf_mode=perf_mode)
    if accumulate is None or accumulate:
        d[...] += result
    else:
        d[...] = result


@instruction("nki.isa.nc_transpose")
def nc_transpose(dst, data, engine=engine.unknown, name=None):
    _put(_dst(dst, "nisa.nc_transpose"), _legacy.nc_transpose(data, dtype=_dt(dst), engine=engine))


# ------------------------------------------------------------------ Vector / Scalar / GpSimd engines

@instruction("nki.isa.tensor_tensor")
def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    d, data1, data2 = conform(_dst(dst, "nisa.tensor_tensor"), data1, data2)
    _put(d, _legacy.tensor_tensor(data1, data2, op, dtype=_dt(dst), engine=engine))


@instruction("nki.isa.tensor_scalar")
def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    d, data = conform(_dst(dst, "nisa.tensor_scalar"), data)
    _put(d, _legacy.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=_dt(dst), engine=engine))


@instruction("nki.isa.tensor_reduce")
def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    d = _dst(dst, "nisa.tensor_reduce")
    # dst's rank says whether the reduced axes are kept ([P, 1] destinations are the common form)
    keep = bool(keepdims) or (len(d.shape) == len(data.shape) and len(data.shape) > 1)
    _put(d, _legacy.tensor_reduce(op, data, axis, dtype=_dt(d), negate=negate, keepdims=keep))


@instruction("nki.isa.activation", partial={"reduce_cmd": _RESET})
def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None):
    d, data = conform(_dst(dst, "nisa.activation"), data)
    _put(d, _legacy.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                               reduce_cmd=reduce_cmd, dtype=_dt(dst)))


@instruction("nki.isa.activation_reduce")
def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    _put(_dst(dst, "nisa.activation_reduce"),
         _legacy.activation_reduce(op, data, reduce_op=reduce_op, reduce_res=reduce_res, bias=bias, scale=scale,
                                   dtype=_dt(dst)))


@instruction("nki.isa.tensor_scalar_reduce",
             partial={"reduce_cmd": _RESET, "reduce_init": "a non-default initial value",
                      "reduce_res_negate": "True"})
def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    d = _dst(dst, "nisa.tensor_scalar_reduce")
    if getattr(reduce_cmd, "value", reduce_cmd) not in ("idle", "reset_reduce"):
        raise not_built_argument("nisa.tensor_scalar_reduce", f"reduce_cmd={reduce_cmd!r}")
    if reduce_init is not None or reduce_res_negate:
        raise not_built_argument("nisa.tensor_scalar_reduce", "reduce_init= / reduce_res_negate=True")
    _put(d, _legacy.tensor_scalar_reduce(data=data, op0=op0, operand0=operand0, reduce_op=reduce_op,
                                         reduce_res=reduce_res, reverse0=reverse0, dtype=_dt(d)))


@instruction("nki.isa.scalar_tensor_tensor")
def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None,
                         dtype=None):
    d, data, operand0, operand1 = conform(_dst(dst, "nisa.scalar_tensor_tensor"), data, operand0, operand1)
    _put(d, _legacy.scalar_tensor_tensor(data=data, op0=op0, operand0=operand0, op1=op1, operand1=operand1,
                                         reverse0=reverse0, reverse1=reverse1, dtype=dtype or _dt(dst)))


@instruction("nki.isa.tensor_tensor_scan")
def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    _put(_dst(dst, "nisa.tensor_tensor_scan"),
         _legacy.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0, reverse1, dtype=_dt(dst)))


@instruction("nki.isa.reciprocal")
def reciprocal(dst, data, name=None):
    d, data = conform(_dst(dst, "nisa.reciprocal"), data)
    _put(d, _legacy.reciprocal(data, dtype=_dt(dst)))


@instruction("nki.isa.bn_stats")
def bn_stats(dst, data, name=None):
    _put(_dst(dst, "nisa.bn_stats"), _legacy.bn_stats(data, dtype=_dt(dst)))


@instruction("nki.isa.bn_aggr")
def bn_aggr(dst, data, name=None):
    _put(_dst(dst, "nisa.bn_aggr"), _legacy.bn_aggr(data, dtype=_dt(dst)))


@instruction("nki.isa.max8")
def max8(dst, src, name=None):
    _put(_dst(dst, "nisa.max8"), _legacy.max8(src=src, dtype=_dt(dst)))


@instruction("nki.isa.nc_find_index8")
def nc_find_index8(dst, data, vals, name=None):
    _put(_dst(dst, "nisa.nc_find_index8"), _legacy.nc_find_index8(data=data, vals=vals, dtype=_dt(dst)))


@instruction("nki.isa.iota")
def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    isa_affine.iota(_dst(dst, "nisa.iota"), pattern, offset, channel_multiplier)


@instruction("nki.isa.affine_select")
def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=_nl.equal, offset=0,
                  name=None):
    isa_affine.affine_select(_dst(dst, "nisa.affine_select"), pattern, channel_multiplier, on_true_tile,
                             on_false_value, cmp_op, offset)


# dst-first forms of further legacy instructions (isa_wrappers.py)
from .isa_lnc import core_barrier, sendrecv  # noqa: E402,F401  (issue #14)
from .isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402,F401  (issue #14, MX formats)
from .isa_registers import VirtualRegister, register_alloc, register_load, register_move, register_store  # noqa: E402,F401
from .isa_wrappers import (dma_transpose, dropout, exponential, local_gather, nc_match_replace8,  # noqa: E402,F401
                           nc_n_gather, nc_stream_shuffle, nonzero_with_count, range_select, select_reduce,
                           tensor_partition_reduce)

NOT_BUILT = fill(globals(), "nki.isa")

# `from nki.isa.constants import oob_mode, dge_mode` (the NKI Library's spelling): the enums as a submodule
constants = types.ModuleType("nki.isa.constants", "nki.isa's enums (engine, dge_mode, oob_mode, ...)")
for _name in ("engine", "dge_mode", "oob_mode", "nc_version", "reduce_cmd", "matmul_perf_mode", "dma_engine"):
    setattr(constants, _name, globals()[_name])
