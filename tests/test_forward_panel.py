"""Pass forward-loads on a loop of loads (lower/passes/forward_loads.py): a K x N panel loaded tile by
tile and read by a later loop of nc_matmuls is read from HBM directly — bits and errors unchanged,
and every condition that makes the copy observable keeps it (a cast, a mask, a write to the source,
a loop that covers only part of the tile, a reader before the copy)."""
import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.core.affine import Affine, axis_var
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.lower.passes.forward_loads import forward_loads
from nki_lite.lower.passes.pipeline import run_backend

from .test_jit_differential import run_both

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")

F32 = np.float32


def _panel_kernel(cast=None, cover=None, store_between=False):
    """out[M, N] = aT[K, M].T @ b[K, N] with b's panel loaded 128 rows at a time into one SBUF tile
    (`cover` of its K // 128 row tiles loaded; the rest are a second, separate load), then a loop of
    matmuls reading panel[k]; N may be ragged (the load is masked then)."""
    @nki.jit
    def k(aT, b: nt.mutable_tensor):
        K, M = aT.shape
        N = b.shape[1]
        KT = K // 128
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ik, jn = nl.arange(128)[:, None], nl.arange(512)[None, :]
        cols = jn < N
        pdt = cast if cast is not None else b.dtype
        panel = nl.ndarray((KT, nl.par_dim(128), 512), dtype=pdt, buffer=nl.sbuf)
        done = KT if cover is None else cover
        for kk in nl.affine_range(done):
            panel[kk, ik, jn] = nl.load(b[kk * 128 + ik, jn], mask=cols, dtype=cast)
        for kk in nl.affine_range(KT - done) if done < KT else ():
            panel[done + kk, ik, jn] = nl.load(b[(done + kk) * 128 + ik, jn], mask=cols, dtype=cast)
        if store_between:
            nl.store(b[ik, jn], value=nl.full((128, 512), 2.0, dtype=b.dtype), mask=cols)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(KT):
            at = nl.load(aT[kk * 128 + ik, nl.arange(128)[None, :]], dtype=cast)
            acc += nisa.nc_matmul(at, panel[kk, :, :])
        nl.store(out[nl.arange(128)[:, None], jn], value=nl.copy(acc), mask=cols)
        return out, b
    return k


def _args(K, N, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((K, 128)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)]


def _matmul_reads(kernel, args):
    k, origin = run_backend(kernel.trace(*args), "llvm")
    mm = [i for i, _ in ir.walk(k.body) if i.op == "nc_matmul"]
    fwd = [i for i, _ in ir.walk(k.body) if i.attr("forwarded")]
    return [i.ins[1].buffer for i in mm], fwd, [origin.get(id(i), i).ins[1].buffer for i in mm]


@pytest.mark.parametrize("K", [128, 256, 384])
@pytest.mark.parametrize("dtype", [F32, ml_dtypes.bfloat16])
def test_panel_loop_is_forwarded_and_bit_identical(K, dtype):
    args = _args(K, 512, dtype)
    moving, fwd, traced = _matmul_reads(_panel_kernel(), args)
    assert moving == ["b"] and traced == ["panel"]          # read from HBM; errors name the traced read
    assert any(i.ins[0].buffer == "b" for i in fwd)         # the panel's load: a bounds check only
    run_both(_panel_kernel(), args)                         # bit-identical to the interpreter


def test_forwarded_panel_reads_the_right_rows():
    """Each k iteration must read b's rows [128k, 128k + 128): exact small integers make any row
    mix-up visible against numpy."""
    rng = np.random.default_rng(4)
    aT = rng.integers(-4, 5, (384, 128)).astype(F32)
    b = rng.integers(-4, 5, (384, 512)).astype(F32)
    assert _matmul_reads(_panel_kernel(), [aT, b])[0] == ["b"]
    got = _panel_kernel()(aT, b.copy(), mode="jit")[0]
    np.testing.assert_array_equal(got, aT.T @ b)


@pytest.mark.parametrize("why, make, N", [
    ("a cast on the load", lambda: _panel_kernel(cast=nl.bfloat16), 512),
    ("a ragged N: the load is masked", lambda: _panel_kernel(), 500),
    ("the source is written before the reads", lambda: _panel_kernel(store_between=True), 512),
    ("the loop covers part of the tile", lambda: _panel_kernel(cover=1), 512),
])
def test_panel_copy_kept(why, make, N):
    args = _args(256, N)
    moving, fwd, _ = _matmul_reads(make(), args)
    assert moving == ["panel"], why
    assert not any(i.ins[0].buffer == "b" for i in fwd), why
    ref = run_both(make(), args)
    if "written" in why:                                    # the reads see the values loaded before
        np.testing.assert_array_equal(ref[0], run_both(_panel_kernel(), _args(256, N))[0])


def test_reader_before_the_loop_keeps_the_copy():
    @nki.jit
    def k(b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        panel = nl.ndarray((2, nl.par_dim(128), 512), dtype=b.dtype, buffer=nl.sbuf)
        ik, jn = nl.arange(128)[:, None], nl.arange(512)[None, :]
        panel[0, ik, jn] = nl.load(b[ik, jn])
        early = nl.copy(panel[0, :, :])                     # read between the loads
        for kk in nl.affine_range(2):
            panel[kk, ik, jn] = nl.load(b[kk * 128 + ik, jn])
        nl.store(out, value=nl.add(early, panel[1, :, :]))
        return out
    b = np.random.default_rng(5).standard_normal((256, 512)).astype(F32)
    kern, _ = run_backend(k.trace(b), "llvm")
    assert not any(i.attr("forwarded") for i, _ in ir.walk(kern.body))
    run_both(k, [b])


def test_forwarded_panel_load_still_fails_at_its_line():
    @nki.jit
    def k(aT, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        ik, jn = nl.arange(128)[:, None], nl.arange(512)[None, :]
        panel = nl.ndarray((2, nl.par_dim(128), 512), dtype=b.dtype, buffer=nl.sbuf)
        for kk in nl.affine_range(2):
            panel[kk, ik, jn] = nl.load(b[kk * 128 + ik, jn])       # kk = 1 reads past row 127
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(2):
            at = nl.load(aT[kk * 128 + ik, nl.arange(128)[None, :]])
            acc += nisa.nc_matmul(at, panel[kk, :, :])
        nl.store(out, value=nl.copy(acc))
        return out
    aT, b = np.zeros((256, 128), F32), np.zeros((128, 512), F32)
    with pytest.raises(errors.NkiLiteError) as e_jit:
        k(aT, b, mode="jit")
    with pytest.raises(errors.NkiLiteError) as e_int:
        k(aT, b, mode="interpret")
    assert "panel[kk, ik, jn] = nl.load(b[kk * 128" in str(e_jit.value)
    assert str(e_jit.value).splitlines()[0] == str(e_int.value).splitlines()[0]


def test_stdlib_matmul_reads_b_from_hbm():
    import nki_lite.stdlib as S
    a = np.random.default_rng(6).standard_normal((256, 512)).astype(F32)
    b = np.random.default_rng(7).standard_normal((512, 1024)).astype(F32)
    call = S.matmul.plan(a, b)
    k, _ = run_backend(call.kernel.trace(*call.args), "llvm")
    assert {i.ins[1].buffer for i, _ in ir.walk(k.body) if i.op == "nc_matmul"} == {"b"}


@pytest.mark.parametrize("inner, forwarded", [("j", True), ("i0", False)])
def test_a_later_loop_rebinding_the_sources_variable_keeps_the_copy(inner, forwarded):
    """Hand-built IR: the copy's source row depends on the outer loop's i0; a reader inside a later
    loop that binds i0 again would see another row if it read the source."""
    def full(buf, shape):
        return ir.Access(buf, tuple(Affine.var(axis_var(k)) for k in range(len(shape))), shape)
    bufs = (ir.Buffer("x", ir.Space.HBM, (256, 64), "float32", "input"),
            ir.Buffer("t", ir.Space.SBUF, (128, 64), "float32"),
            ir.Buffer("o", ir.Space.SBUF, (128, 64), "float32"))
    src = ir.Access("x", (Affine.var(axis_var(0)) + Affine.var("i0", 128), Affine.var(axis_var(1))), (128, 64))
    reader = ir.Loop(inner, 1, "affine", (ir.Instr("tensor_copy", (full("o", (128, 64)),), (full("t", (128, 64)),)),))
    body = (ir.Loop("i0", 2, "affine", (ir.Instr("dma_copy", (full("t", (128, 64)),), (src,)), reader)),)
    k = forward_loads(ir.Kernel("k", ("x",), (), bufs, body), {})
    copy = next(i for i, _ in ir.walk(k.body) if i.op == "tensor_copy")
    assert (copy.ins[0].buffer == "x") == forwarded
