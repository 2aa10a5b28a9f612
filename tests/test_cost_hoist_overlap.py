"""Issue 15's second round of engine-model mechanisms (docs/engine_model.md, "Mechanisms").

- Loop-invariant loads are hoisted by the compiler when their copies fit in SBUF (hoist.py): a
  weight tile reloaded inside a row loop is read from HBM once; when not all copies fit, only a
  prefix is hoisted; loads whose destination is rewritten, or whose source the kernel writes, stay.
- Compute engines fill idle gaps with later independent instructions (schedule.py): one tile's
  Vector -> Scalar -> Vector chain overlaps the next tile's.
- A PSUM memset(0) whose next access is a matmul into that buffer costs nothing, also when the
  matmul overwrites (plan._fold_memsets; NKIBench bmm's zeroed PSUM block tensors).
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.core.targets import TARGETS
from nki_lite.lower.cost.plan import Plan
from nki_lite.lower.cost.schedule import Simulator

F32 = np.float32


def _rows_kernel(rewrite: bool):
    """out[i-tile] = xT[:, i-tile].T @ w, the weight tiles loaded inside the row loop (as NKIBench's
    add_rmsnorm_matmul does); with `rewrite`, each iteration also rewrites the loaded weight tile
    in place, which makes it not hoistable."""
    @nki.jit
    def k(xT, w):
        K, M = xT.shape
        N = w.shape[1]
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(K // 128):
                xt = nl.load(xT[kk * 128:(kk + 1) * 128, i * 128:(i + 1) * 128])
                wt = nl.load(w[kk * 128:(kk + 1) * 128, :])
                if rewrite:
                    wt[...] = nl.multiply(wt, 2.0)
                acc += nisa.nc_matmul(xt, wt)
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.copy(acc))
        return out
    return k


rows_times_weight = _rows_kernel(False)
rows_times_scaled_weight = _rows_kernel(True)


def _est(kernel, M, K, N):
    return nki.estimate(kernel, nt.tensor[[K, M], F32], nt.tensor[[K, N], F32], target="trn1")


def test_invariant_weight_is_read_once():
    M, K, N = 1024, 256, 512
    s = _est(rows_times_weight, M, K, N).summary()
    x, w, out = M * K * 4, K * N * 4, M * N * 4
    assert s["hbm_read_bytes"] == x + w            # not x + (M / 128) * w
    assert s["hbm_write_bytes"] == out


def test_rewritten_destination_is_not_hoisted():
    M, K, N = 1024, 256, 512
    e = _est(rows_times_scaled_weight, M, K, N)
    assert all(inf.hoist is None for inf in e.plan.info.values())
    assert e.summary()["hbm_read_bytes"] == M * K * 4 + (M // 128) * K * N * 4


def test_only_what_fits_is_hoisted():
    # w: K / 128 = 128 tiles of 2 KiB per partition = 256 KiB, more than the SBUF left free
    M, K, N = 512, 16384, 512
    e = _est(rows_times_weight, M, K, N)
    (h,) = [inf.hoist for inf in e.plan.info.values() if inf.hoist is not None]
    assert 0 < h.cap < h.distinct == 128 and h.repeats == M // 128
    reads = e.summary()["hbm_read_bytes"]
    tile = 128 * N * 4
    assert reads == M * K * 4 + tile * (h.cap + (128 - h.cap) * (M // 128))


def test_hoisted_extrapolation_is_exact():
    # the body changes where the hoisted prefix ends: extrapolation must not skip across it
    k = rows_times_weight.trace(nt.tensor[[16384, 1024], F32], nt.tensor[[16384, 512], F32], target="trn1")
    res = {ex: Simulator(Plan(k, TARGETS["trn1"]), record_events=False, extrapolate=ex).run() for ex in (True, False)}
    assert res[True].total_ns == pytest.approx(res[False].total_ns, rel=1e-9)


@nki.jit
def chains(a):
    """Per tile: a short Vector op, a long Scalar chain, a short Vector op; tiles independent."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(a[i * 128:(i + 1) * 128, :])
        u = nisa.tensor_scalar(t, np.multiply, 2.0, engine=nisa.vector_engine)
        v = nisa.activation(op=nl.exp, data=u)
        v = nisa.activation(op=nl.exp, data=v)
        v = nisa.activation(op=nl.exp, data=v)
        w = nisa.tensor_scalar(v, np.add, 1.0, engine=nisa.vector_engine)
        nl.store(out[i * 128:(i + 1) * 128, :], value=w)
    return out


def test_independent_chains_interleave_on_an_engine():
    e = nki.estimate(chains, nt.tensor[[512, 512], F32], target="trn1")
    vec = [ev for ev in e.events if ev.track == "vector"]
    assert len(vec) == 8
    by_line = {}
    for ev in vec:
        by_line.setdefault(ev.loc, []).append(ev.start)
    first, second = (sorted(v) for _, v in sorted(by_line.items(), key=lambda kv: int(kv[0].split(":")[1])))
    # the second tile's multiply runs before the first tile's add (it fills the wait for ScalarE;
    # in program order it would wait behind that add)
    assert first[1] < second[0]


@nki.jit
def blocks_zeroed_then_written(a, b):
    """A PSUM block tensor zeroed up front (as NKIBench's bmm does with lazy_initialization), each
    block then written by one overwriting matmul: the zeroing is never observed."""
    out = nl.ndarray((4 * 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((4, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    bt = nl.load(b)
    for i in nl.affine_range(4):
        at = nl.load(a[:, i * 128:(i + 1) * 128])
        acc[i] = nisa.nc_matmul(at, bt)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.copy(acc[i]))
    return out


def test_psum_zeroing_before_an_overwriting_matmul_costs_nothing():
    e = nki.estimate(blocks_zeroed_then_written, nt.tensor[[128, 512], F32], nt.tensor[[128, 512], F32],
                     target="trn1")
    memsets = [inf for inf in e.plan.info.values() if inf.instr.op == "memset"]
    mms = [inf.instr for inf in e.plan.info.values() if inf.instr.op == "nc_matmul"]
    assert memsets and all(inf.folded for inf in memsets)
    assert mms and not any(m.attr("accumulate") for m in mms)
    assert not any(ev.name == "memset" for ev in e.events)
