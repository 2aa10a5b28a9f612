"""Partition broadcast: where NKI allows it and where it raises err_num_partition_mismatch.

NKI (legacy docs): most nki.isa instructions need all tile operands to have the same number of
partitions (nki.errors: err_num_partition_mismatch, fix: broadcast_to); the operator overloads
(`+`, `-`, `*`, `/`, `<<`, `>>`, ...) do not support partition broadcast (NKI known issues: use the
nl functions); the nl functions (nl.add, nl.multiply, ...) do broadcast over partitions (AWS's
test_nki_nl_add: [128, 512] + [1, 512]). Free-dimension broadcast rules are unchanged."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from . import markers

HERE, line_of, _ = markers.marker_helpers(__file__)
F32 = np.float32
MODES = ["interpret", "jit"]
P, F = 16, 32


def _raises_partition_mismatch(kernel, args, marker: str, mode: str):
    with pytest.raises(errors.ShapeError) as ei:
        kernel(*args, mode=mode)
    e = ei.value
    assert e.code == "NL-E103", str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
    assert "partition" in str(e) and "broadcast_to" in e.hint, str(e)
    return e


def _inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal((P, F)).astype(F32), rng.standard_normal((1, F)).astype(F32)


# ----------------------------------------------------------------------------- nisa.tensor_tensor

@nki.jit
def tt_row(a, b, row_first):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    if row_first:
        r = nisa.tensor_tensor(y, x, op=np.add)  # MARK-TT-ROW-FIRST
    else:
        r = nisa.tensor_tensor(x, y, op=np.add)  # MARK-TT
    nl.store(out, r)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row_first,marker", [(False, "MARK-TT"), (True, "MARK-TT-ROW-FIRST")])
def test_tensor_tensor_rejects_partition_broadcast(row_first, marker, mode):
    a, b = _inputs()
    e = _raises_partition_mismatch(tt_row, (a, b, row_first), marker, mode)
    assert "tensor_tensor" in str(e) and f"[{P}, {F}]" in str(e) and f"[1, {F}]" in str(e)


@nki.jit
def tt_broadcast_to(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(out, nisa.tensor_tensor(x, y.broadcast_to((a.shape[0], a.shape[1])), op=np.add))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_tensor_tensor_after_broadcast_to_works(mode):
    """The fix NKI's error message names: broadcast_to makes the partition counts equal."""
    a, b = _inputs()
    np.testing.assert_array_equal(tt_broadcast_to(a, b, mode=mode), a + b)


@nki.jit
def tt_free_broadcast(a, c):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.tensor_tensor(nl.load(a), nl.load(c), op=np.multiply))
    return out


def test_tensor_tensor_free_broadcast_rule_is_unchanged():
    a, _ = _inputs()
    c = np.arange(P, dtype=F32).reshape(P, 1)
    np.testing.assert_array_equal(tt_free_broadcast(a, c), a * c)


# ----------------------------------------------------------------------------- other nisa instructions

@nki.jit
def act_row_bias(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    bias = nl.load(b[:, 0:1])
    nl.store(out, nisa.activation(op=nl.exp, data=nl.load(a), bias=bias))  # MARK-ACT-BIAS
    return out


@nki.jit
def act_row_scale(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scale = nl.load(b[:, 0:1])
    nl.store(out, nisa.activation(op=nl.exp, data=nl.load(a), scale=scale))  # MARK-ACT-SCALE
    return out


@nki.jit
def copy_pred_row(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    dst = nl.load(a)
    pred = nl.greater(dst, 0.0, dtype=nl.uint8)
    nisa.tensor_copy_predicated(src=nl.load(b), dst=dst, predicate=pred)  # MARK-CPRED
    nl.store(out, dst)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,marker", [(act_row_bias, "MARK-ACT-BIAS"), (act_row_scale, "MARK-ACT-SCALE"),
                                           (copy_pred_row, "MARK-CPRED")])
def test_other_nisa_instructions_need_equal_partitions(kernel, marker, mode):
    a, b = _inputs()
    _raises_partition_mismatch(kernel, (a, b), marker, mode)


# ----------------------------------------------------------------------------- operator overloads

OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
             "<": operator.lt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
             "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
             ">>": operator.rshift, "%": operator.mod}
INT_OPS = {"&", "|", "^", "<<", ">>"}


@nki.jit
def op_row(a, b, sym, row_first):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    r = OPERATORS[sym](y, x) if row_first else OPERATORS[sym](x, y)  # MARK-OP
    nl.store(out, nl.copy(r, dtype=nl.float32))
    return out


@pytest.mark.parametrize("row_first", [False, True])
@pytest.mark.parametrize("sym", sorted(OPERATORS))
def test_operator_overloads_reject_partition_broadcast(sym, row_first):
    a, b = _inputs()
    if sym in INT_OPS:
        a, b = (np.abs(a) * 10).astype(np.int32), (np.abs(b) * 10).astype(np.int32)
    e = _raises_partition_mismatch(op_row, (a, b, sym, row_first), "MARK-OP", "interpret")
    assert f"'{sym}'" in str(e) and "nl." in e.hint


@nki.jit
def op_free(a, c, sym):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(OPERATORS[sym](nl.load(a), nl.load(c)), dtype=nl.float32))
    return out


@pytest.mark.parametrize("sym", ["+", "*", "-"])
def test_operator_overloads_keep_free_broadcast_and_scalars(sym):
    a, _ = _inputs()
    c = np.arange(P, dtype=F32).reshape(P, 1) + 1
    np.testing.assert_array_equal(op_free(a, c, sym), OPERATORS[sym](a, c))

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, OPERATORS[sym](nl.load(x), 2.0))
        return out
    np.testing.assert_array_equal(k(a), OPERATORS[sym](a, F32(2.0)))


# ----------------------------------------------------------------------------- nl functions keep broadcasting

@nki.jit
def nl_add_row(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def nl_mul_row_first(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(b), nl.load(a)))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_nl_functions_broadcast_over_partitions(mode):
    """AWS test_nki_nl_add's add_broadcast_par_dim: [128, 512] + [1, 512] with nl.add is valid."""
    a, b = _inputs()
    np.testing.assert_array_equal(nl_add_row(a, b, mode=mode), a + b)
    np.testing.assert_array_equal(nl_mul_row_first(a, b, mode=mode), b * a)
