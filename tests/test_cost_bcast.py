"""Partition broadcasts lowered as TensorE matmuls plus PSUM copies (lower/cost/bcast.py).

A [1, F] row read as [P, F] by a Vector or Scalar Engine instruction costs, per execution of the
reader, one K=1 nc_matmul and one PSUM -> SBUF copy per fp32 PSUM bank (2 KiB per partition) of
the row; the reader then streams an ordinary SBUF tile. Free-axis broadcasts ([P, 1] operands) and
kernels without partition broadcasts are left as they are.
"""
import math

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.ir import walk
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.bcast import add_broadcasts
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.totals import totals

TRIPS = 3


@nki.jit
def row_scale(x, b):
    """out[i] = x[i] * b (b: one row, broadcast over the 128 partitions), TRIPS row tiles."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        xt = nl.load(x[i * 128:(i + 1) * 128, :])
        row = nl.load(b[0:1, :])
        y = nisa.tensor_tensor(xt, row.broadcast_to((128, x.shape[1])), op=nl.multiply)
        nl.store(out[i * 128:(i + 1) * 128, :], value=y)
    return out


@nki.jit
def column_scale(x, s):
    """out[i] = x[i] * s[i] (s: one value per partition, a free-axis broadcast): nothing to materialise."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        xt = nl.load(x[i * 128:(i + 1) * 128, :])
        st = nl.load(s[i * 128:(i + 1) * 128, :])
        y = nisa.tensor_tensor(xt, st.broadcast_to((128, x.shape[1])), op=nl.multiply)
        nl.store(out[i * 128:(i + 1) * 128, :], value=y)
    return out


def _trace(kernel, f, dtype=np.float32, target="trn1", second=None):
    second = second if second is not None else [1, f]
    return kernel.trace(nt.tensor[[128 * TRIPS, f], dtype], nt.tensor[second, dtype], target=target)


def _ops(plan, op):
    return [(ins, loops) for ins, loops in walk(plan.body) if ins.op == op]


@pytest.mark.parametrize("f,dtype", [(512, np.float32), (1536, np.float32), (1000, np.float32),
                                     (1536, nl.bfloat16)])
def test_broadcast_costs_one_matmul_and_copy_per_psum_bank(f, dtype):
    t = TARGETS["trn1"]
    k = _trace(row_scale, f, dtype)
    plan, plain = Plan(k, t), Plan(k, t, bcast=False)
    chunks = math.ceil(f * 4 / t.psum_bank_bytes)      # fp32 PSUM: 512 columns per bank
    mms, copies = _ops(plan, "nc_matmul"), _ops(plan, "tensor_copy")
    assert len(mms) == len(copies) == chunks
    assert not _ops(plain, "nc_matmul") and not _ops(plain, "tensor_copy")
    assert sum(plan.info[id(i)].cost.cycles for i, _ in mms) == pytest.approx(
        sum(max(64, min(512, f - o)) for o in range(0, f, 512)) * (4 if dtype == np.float32 else 1))
    tot, base = totals(plan), totals(plain)
    fp32 = 2.0 if dtype == np.float32 else 1.0        # the profiler's fp32 count (rules.FP32_HARDWARE_FLOPS_COUNT)
    assert tot.flops == pytest.approx(2 * 1 * 128 * f * TRIPS * fp32)
    assert base.flops == 0
    # the reader now streams an SBUF tile: same Vector cost as before; the copies add Vector/Scalar time
    cp = sum(tot.busy_ns[e] - base.busy_ns[e] for e in ("vector", "scalar"))
    assert cp == pytest.approx(TRIPS * sum(plan.info[id(i)].cost.ns for i, _ in copies))
    assert tot.busy_ns["tensor"] > 0 and base.busy_ns["tensor"] == 0


def test_reader_reads_the_materialised_tile():
    t = TARGETS["trn1"]
    k = _trace(row_scale, 512)
    new, scratch = add_broadcasts(k, t)
    assert scratch == {b.name for b in new.buffers if '.bcast' in b.name} and len(scratch) == 2
    reader = next(ins for ins, _ in walk(new.body) if ins.op == "tensor_tensor")
    bufs = {b.name: b for b in new.buffers}
    srcs = [bufs[a.buffer] for a in reader.ins]
    assert [b.shape for b in srcs] == [(128, 512), (128, 512)]
    assert any(b.name.endswith(".bcast1") for b in srcs)
    mm = next(ins for ins, _ in walk(new.body) if ins.op == "nc_matmul")
    assert bufs[mm.outs[0].buffer].space.value == "psum"
    assert mm.ins[1].shape == (1, 512) and mm.ins[0].shape == (1, 128)


def test_free_axis_broadcast_and_plain_kernels_are_unchanged():
    t = TARGETS["trn1"]
    k = _trace(column_scale, 512, second=[128 * TRIPS, 1])
    assert add_broadcasts(k, t) == (k, frozenset())
    assert not _ops(Plan(k, t), "nc_matmul")


def test_copy_engine_is_balanced_off_a_busy_vector_engine():
    """The reader's body is Vector work only: the compiler-placed PSUM copies go to the Scalar Engine."""
    t = TARGETS["trn1"]
    plan = Plan(_trace(row_scale, 512), t)
    (cp, _), = _ops(plan, "tensor_copy")
    assert plan.info[id(cp)].cost.engine == "scalar"


def test_estimate_gains_tensor_time_and_keeps_the_answer():
    x = np.random.rand(128 * TRIPS, 512).astype(np.float32)
    b = np.random.rand(1, 512).astype(np.float32)
    np.testing.assert_allclose(row_scale(x, b), x * b, rtol=1e-6)
    est = nki.estimate(row_scale, x, b, target="trn1")
    s = est.summary()
    assert s["total_time_tensor"] > 0 and s["hardware_flops"] == pytest.approx(2 * 128 * 512 * TRIPS * 2.0)
