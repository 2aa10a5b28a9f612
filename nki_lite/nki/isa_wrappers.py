"""dst-first forms of instructions nki_lite's legacy ISA already has, for the current `nki` dialect.

Contract: each function takes the reference's parameters (nki_lite/nki/reference.py, aws-neuron-sdk
nki/api/nki/isa stubs), `dst` first, and is the legacy instruction written into dst,
`dst[...] = legacy(operands, dtype=dst's dtype)` (or the legacy form that already takes dst), so it
traces into the existing IR ops with their verification, interpreter, JIT and engine-model rules;
nothing here adds an op but nonzero_with_count (below). Errors name the kernel's line (the legacy
instructions' own checks, NL-E914 for a dst that is not a tensor of the kernel, NL-E916 for a
documented argument value not built here, declared in the instruction's `partial=` and shown in
docs/compat_nki.md).

- nc_stream_shuffle(dst, src, shuffle_mask): the legacy instruction, operands in the new order.
- dma_transpose(dst, src, axes=None, ...): dst = legacy dma_transpose(src, axes); `priority` is a
  scheduling hint (ignored, as for dma_copy); oob_mode other than error is NL-E916.
- range_select / select_reduce / nc_match_replace8 / tensor_partition_reduce / local_gather / dropout:
  the legacy instruction with dst's dtype as its output dtype.
- exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=idle): dst = exp(src - max_value)
  computed in fp32 and rounded once to dst's dtype (the reference: "performs the computation in float32
  precision internally"): traced as an fp32 tensor_scalar subtraction followed by an exp activation
  (with reduce_op=add into reduce_res when given), so its cost is that of those two instructions.
  reduce_cmd other than idle / reset_reduce, or a non-zero reduce_init, is NL-E916 (accumulator
  registers carried across instructions are not modelled).
- nc_n_gather(dst, data, indices): the legacy gather_flattened (each partition gathers from its own row)
  on [P, free] forms of the tiles (a tile of more than two dims is copied row-major to one); dst's dtype must
  be data's.
- nonzero_with_count(dst, src, index_offset=0, padding_val=-1): a GpSimd instruction of its own (IR op
  `nonzero_with_count`, lang/isa_partition.py). Each GpSimd core reads and writes only the first of its
  16 partitions, so the op is traced on the views src[0:P:16] / dst[0:P:16]; dst's other partitions
  are not modified, as the reference says. Tiles with several free dims run on [P, free] row-major copies.
"""
from __future__ import annotations

import numpy as np

from .. import isa as _legacy
from ..lang.isa_gather import CORE_PARTITIONS
from ..lang.isa_partition import emit_nonzero_with_count
from .. import language as _nl
from ..isa import dge_mode, oob_mode, reduce_cmd
from . import _bridge
from .conform import conform
from .. import errors
from ..loc import capture_loc
from .surface import instruction, not_built_argument

_ACCUM = "reduce_cmd other than idle / reset_reduce (accumulator registers carried across instructions)"


def _dst(dst, api: str):
    if not _bridge.is_tensor(dst):
        raise errors.make("dst_operand", f"{api}: dst must be a tensor or tile of the kernel, got "
                          f"{type(dst).__name__}", loc=capture_loc())
    return dst


def _cmd_name(cmd) -> str:
    return str(getattr(cmd, "name", getattr(cmd, "value", cmd)))


def _plain_reduce(api: str, cmd) -> None:
    if _cmd_name(cmd) not in ("idle", "reset_reduce", "None"):
        raise not_built_argument(api, f"reduce_cmd={cmd!r}")


@instruction("nki.isa.nc_stream_shuffle")
def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    _legacy.nc_stream_shuffle(src, _dst(dst, "nisa.nc_stream_shuffle"), shuffle_mask)


@instruction("nki.isa.dma_transpose", partial={"oob_mode": "values other than oob_mode.error"})
def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, name=None):
    d = _dst(dst, "nisa.dma_transpose")
    if _cmd_name(oob_mode) != "error":
        raise not_built_argument("nisa.dma_transpose", f"oob_mode={oob_mode!r}")
    d[...] = _legacy.dma_transpose(src, axes=axes, dge_mode=dge_mode)


@instruction("nki.isa.range_select")
def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=_nl.maximum, range_start=0, on_false_value=-3.4028234663852886e+38,
                 name=None):
    d = _dst(dst, "nisa.range_select")
    d[...] = _legacy.range_select(on_true_tile=on_true_tile, comp_op0=comp_op0, comp_op1=comp_op1, bound0=bound0,
                                  bound1=bound1, reduce_cmd=reduce_cmd, reduce_res=reduce_res, reduce_op=reduce_op,
                                  range_start=range_start, on_false_value=on_false_value, dtype=d.dtype_name)


@instruction("nki.isa.select_reduce")
def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_op=_nl.maximum,
                  reverse_pred=False, name=None):
    _legacy.select_reduce(dst=_dst(dst, "nisa.select_reduce"), predicate=predicate, on_true=on_true, on_false=on_false,
                          reduce_res=reduce_res, reduce_cmd=reduce_cmd, reduce_op=reduce_op, reverse_pred=reverse_pred)


@instruction("nki.isa.nc_match_replace8")
def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    d = _dst(dst, "nisa.nc_match_replace8")
    d[...] = _legacy.nc_match_replace8(data=data, vals=vals, imm=imm, dst_idx=dst_idx, dtype=d.dtype_name)


@instruction("nki.isa.tensor_partition_reduce")
def tensor_partition_reduce(dst, op, data, name=None):
    d = _dst(dst, "nisa.tensor_partition_reduce")
    d[...] = _legacy.tensor_partition_reduce(op, data, dtype=d.dtype_name)


@instruction("nki.isa.local_gather")
def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    d = _dst(dst, "nisa.local_gather")
    d[...] = _legacy.local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices)


@instruction("nki.isa.nc_n_gather")
def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p].flat[indices[p].flat[j]] (free dims flattened on each side; per partition)."""
    d = _dst(dst, "nisa.nc_n_gather")
    if _bridge.is_tensor(data) and data.dtype_name != d.dtype_name:
        raise errors.make("dtype", f"nisa.nc_n_gather: dst dtype {d.dtype_name} must be data's dtype "
                          f"{data.dtype_name} (the reference)", loc=capture_loc())
    got = _nl.gather_flattened(_flat(data), _flat(indices), dtype=d.dtype_name)
    if len(d.shape) <= 2:
        d[...] = got
    else:
        _copy(d, got)


def _flat(t):
    """An on-chip tile as [P, free elements]: itself when 2-D, else a row-major copy (an indirect copy cannot
    read a view that merges free dimensions, lang/flat_storage.py)."""
    if not _bridge.is_tensor(t) or len(t.shape) <= 2:
        return t
    flat = _nl.ndarray((t.shape[0], int(np.prod(t.shape[1:]))), dtype=t.dtype_name, buffer=_nl.sbuf)
    _copy(flat, t)
    return flat


def _copy(dst, src) -> None:
    """nisa.tensor_copy(dst=dst, src=src): equal element counts per partition pair row-major (nki/conform.py)."""
    d, s = conform(dst, src)
    d[...] = _legacy.tensor_copy(s, dtype=dst.dtype_name)


@instruction("nki.isa.dropout")
def dropout(dst, data, prob, name=None):
    d = _dst(dst, "nisa.dropout")
    d[...] = _legacy.dropout(data, prob, dtype=d.dtype_name)


@instruction("nki.isa.exponential", partial={"reduce_cmd": _ACCUM, "reduce_init": "a non-zero initial value"})
def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0, name=None):
    d = _dst(dst, "nisa.exponential")
    _plain_reduce("nisa.exponential", reduce_cmd)
    if not (isinstance(reduce_init, (int, float)) and reduce_init == 0):
        raise not_built_argument("nisa.exponential", f"reduce_init={reduce_init!r}")
    shifted = _legacy.tensor_scalar(src, _nl.subtract, max_value, dtype=_nl.float32)
    if reduce_res is None:
        d[...] = _legacy.activation(_nl.exp, shifted, dtype=d.dtype_name)
    else:
        d[...] = _legacy.activation(_nl.exp, shifted, reduce_op=_nl.add, reduce_res=reduce_res, dtype=d.dtype_name)


@instruction("nki.isa.nonzero_with_count")
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    d = _dst(dst, "nisa.nonzero_with_count")
    if _bridge.is_tensor(src) and (len(src.shape) > 2 or len(d.shape) > 2) and d.shape[0] == src.shape[0]:
        # free dims of more than one axis count row-major (library find_nonzero_indices: src [P, 80, 128],
        # dst [P, 1, 10241]): the instruction runs on [P, free] copies; dst's copy starts from dst's contents so
        # the partitions it does not write stay as they were
        flat_dst = _flat(d)
        nonzero_with_count(flat_dst, _flat(src), index_offset, padding_val)
        if flat_dst is not d:
            _copy(d, flat_dst)
        return
    if not _bridge.is_tensor(src) or len(src.shape) != 2 or len(d.shape) != 2 or d.shape[0] != src.shape[0]:
        raise errors.make("shape_mismatch", "nisa.nonzero_with_count: src [P, T] and dst [P, T + 1] with the same "
                          f"partitions; got dst {getattr(d, 'shape', None)}, src {getattr(src, 'shape', None)}",
                          loc=capture_loc())
    step = CORE_PARTITIONS
    emit_nonzero_with_count(d[0:d.shape[0]:step, :], src[0:src.shape[0]:step, :], index_offset, padding_val)

