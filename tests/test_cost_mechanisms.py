"""The engine-model mechanisms issue 15's NKIBench comparison demanded (docs/engine_model.md).

- A masked `nc_matmul` accumulating into PSUM is one matmul on hardware (§3.2): the masked add the
  frontend traces after it costs nothing and puts no Vector instruction between two matmuls.
- Instructions whose engine the compiler picks (`engine=unknown_engine`, nl-level copies and
  tensor-scalar ops) are balanced over Vector and Scalar; an explicit engine is kept, and
  tensor_scalar ops the Scalar Engine does not support stay on Vector.
- The ~1300 ns semaphore latency applies only to edges with a DMA on one side; between two compute
  engines an edge costs the consumer's dependent-issue gap (§4.6: 264 - 64 = 200 cycles).
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.totals import walk

F32 = np.float32


def _mm_kernel(masked: bool):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        i_f = nl.arange(512)[None, :]
        for kk in nl.affine_range(4):
            at = nl.load(a[kk * 128:(kk + 1) * 128, :])
            bt = nl.load(b[kk * 128:(kk + 1) * 128, :])
            if masked:
                acc += nisa.nc_matmul(at, bt, mask=(i_f < 500))
            else:
                acc += nisa.nc_matmul(at, bt)
        nl.store(out, nl.copy(acc))
        return out
    return k


def _ops(est):
    """{(op, engine): count} of the instructions that cost time (folded ones excluded)."""
    got = {}
    for ins, loops in walk(est.plan.body):
        inf = est.plan.info.get(id(ins))
        if ins.op == "alloc" or inf is None or inf.folded or inf.cost is None:
            continue
        key = (ins.op, inf.cost.engine)
        got[key] = got.get(key, 0) + 1
    return got


def test_masked_matmul_accumulates_in_psum():
    args = (nt.tensor[[512, 128], F32], nt.tensor[[512, 512], F32])
    plain = nki.estimate(_mm_kernel(False), *args, target="trn1")
    masked = nki.estimate(_mm_kernel(True), *args, target="trn1")
    assert ("tensor_tensor", "vector") not in _ops(masked)          # the traced add is folded
    assert masked.engine_busy_ns("vector") == plain.engine_busy_ns("vector")
    assert masked.total_time == pytest.approx(plain.total_time, rel=1e-9)


def _ts_kernel(engine, op0=np.multiply):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        a = nl.multiply(t, t)                       # tensor_tensor: Vector only
        b = nl.multiply(a, t)
        c = nisa.tensor_scalar(t, op0, 2.0, engine=engine)
        d = nisa.tensor_scalar(t, op0, 3.0, engine=engine)
        nl.store(out, nl.add(nl.add(b, c), d))
        return out
    return k


def test_compiler_chosen_engine_is_balanced_over_vector_and_scalar():
    x = nt.tensor[[128, 512], F32]
    auto = _ops(nki.estimate(_ts_kernel(nisa.unknown_engine), x, target="trn1"))
    pinned = _ops(nki.estimate(_ts_kernel(nisa.vector_engine), x, target="trn1"))
    assert auto.get(("tensor_scalar", "scalar")) == 2 and ("tensor_scalar", "vector") not in auto
    assert pinned.get(("tensor_scalar", "vector")) == 2 and ("tensor_scalar", "scalar") not in pinned
    assert auto.get(("tensor_tensor", "vector")) == pinned.get(("tensor_tensor", "vector")) == 4


def test_scalar_engine_takes_only_the_ops_it_supports():
    x = nt.tensor[[128, 512], F32]
    got = _ops(nki.estimate(_ts_kernel(nisa.unknown_engine, op0=np.subtract), x, target="trn1"))
    assert got.get(("tensor_scalar", "vector")) == 2 and ("tensor_scalar", "scalar") not in got


def test_nl_copy_goes_where_the_load_is_lighter():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        v = nl.multiply(nl.multiply(t, t), t)      # Vector busy
        nl.store(out, nl.add(v, nl.copy(t)))
        return out
    got = _ops(nki.estimate(k, nt.tensor[[128, 512], F32], target="trn1"))
    assert got.get(("tensor_copy", "scalar")) == 1


def _chain(n):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        for _ in range(n):
            t = nisa.activation(op=nl.exp, data=t)                          # Scalar
            t = nisa.tensor_scalar(t, np.multiply, 0.5, engine=nisa.vector_engine)
        nl.store(out, t)
        return out
    return k


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_compute_to_compute_edges_cost_the_dependent_issue_gap(target):
    x = nt.tensor[[128, 64], F32]
    e3, e4 = (nki.estimate(_chain(n), x, target=target) for n in (3, 4))
    t = TARGETS[target]
    act = [i for i in e4.plan.info.values() if i.cost is not None and i.instr.op == "activation"][0].cost.ns
    ts = [i for i in e4.plan.info.values() if i.cost is not None and i.instr.op == "tensor_scalar"][0].cost.ns
    gap = t.dep_issue_cycles - t.min_ii
    want = act + ts + gap / t.scalar_ghz + gap / t.vector_ghz     # one more pair, two more edges
    assert e4.total_time_ns - e3.total_time_ns == pytest.approx(want, rel=1e-9)
    assert want < 2 * t.semaphore_latency_ns
