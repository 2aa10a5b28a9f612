"""The current `nki` dialect (nki_lite/nki): entry points, launches and the dst-first nisa instructions.

Each dst-first instruction is checked in a kernel written here against numpy, in both backends, and
JIT == interpreter bit for bit; each error of the dialect names the kernel's line."""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

import nki_lite.compat
import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
import nki_lite.nki.typing as nt
from nki_lite import errors

from . import markers

HERE, line_of, _expect = markers.marker_helpers(__file__)
MODES = ["interpret", "jit"]
RNG = np.random.default_rng(14)
F32 = np.float32


def f32(*shape, lo=0.1, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(F32)


def both(kernel, *args):
    """Run in both backends; they agree bit for bit; return the JIT's result."""
    a = kernel(*args, mode="interpret")
    b = kernel(*args, mode="jit")
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert x.dtype == y.dtype and np.array_equal(x.view(np.uint8), y.view(np.uint8))
    return b


def raises(kernel, args, name: str, marker: str, mode: str = "interpret"):
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(*args, mode=mode)
    e = ei.value
    assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
    return e


def load(src, dtype=None):
    """The dialect's idiom: allocate an SBUF tile, dma_copy into it."""
    t = nl.ndarray(src.shape, dtype=dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def save(tile, dtype=None):
    out = nl.ndarray(tile.shape, dtype=dtype or tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, tile)
    return out


# ----------------------------------------------------------------------------- data movement, elementwise

@nki.jit
def tiled_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(a.shape[0] // 128):
        ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m * 128:(m + 1) * 128, :])
        nisa.dma_copy(tb, b[m * 128:(m + 1) * 128, :])
        tc = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, :], src=tc)
    return out


def test_dma_copy_and_tensor_tensor_add_tiles():
    a, b = f32(256, 64), f32(256, 64)
    assert np.array_equal(both(tiled_add, a, b), a + b)


@nki.jit
def scalar_chain(x, col):
    t, c = load(x), load(col)
    r = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar(r, t, op0=nl.multiply, operand0=c, op1=nl.add, operand1=2.0)
    return save(r)


def test_tensor_scalar_rounds_once_to_dst_dtype():
    x, c = f32(128, 32), f32(128, 1)
    want = ((x * c).astype(F32) + F32(2)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(both(scalar_chain, x, c).view(np.uint16), want.view(np.uint16))


@nki.jit
def copy_memset_recip(x):
    t = load(x)
    c = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=t)
    m = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(m, value=3.0)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(r, t)
    return save(c), save(m), save(r)


def test_tensor_copy_memset_reciprocal():
    x = f32(128, 16)
    c, m, r = both(copy_memset_recip, x)
    assert c.dtype == ml_dtypes.float8_e4m3fn and np.array_equal(c.view(np.uint8),
                                                                 x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    assert np.all(m == 3.0)
    np.testing.assert_allclose(r, 1 / x, rtol=1e-6)


@nki.jit
def act_reduce(x):
    t = load(x)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, scale=2.0, reduce_op=nl.add, reduce_res=s)
    mx = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(mx, nl.maximum, t, axis=1)
    e2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    s2 = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(e2, nl.exp, t, reduce_op=nl.add, reduce_res=s2, bias=mx)
    return save(e), save(s), save(mx), save(s2)


def test_activation_reduce_and_tensor_reduce_into_a_column():
    x = f32(128, 64)
    e, s, mx, s2 = both(act_reduce, x)
    np.testing.assert_allclose(e, np.exp(2 * x), rtol=1e-5)
    np.testing.assert_allclose(s[:, 0], np.exp(2 * x).sum(1), rtol=1e-5)
    assert np.array_equal(mx[:, 0], x.max(1))
    np.testing.assert_allclose(s2[:, 0], np.exp(x + x.max(1, keepdims=True)).sum(1), rtol=1e-5)


@nki.jit
def vector_misc(x, y, p):
    t, u, pr = load(x), load(y), load(p)
    stt = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=stt, data=t, op0=nl.multiply, operand0=3.0, op1=nl.subtract, operand1=u)
    scan = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(scan, t, u, 0.0, nl.multiply, nl.add)
    sel = load(x)
    nisa.tensor_copy_predicated(dst=sel, src=u, predicate=pr)
    tsr = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=tsr, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=red)
    return save(stt), save(scan), save(sel), save(tsr), save(red)


def test_scalar_tensor_tensor_scan_predicated_copy_scalar_reduce():
    x, y = f32(128, 16), f32(128, 16)
    p = (RNG.uniform(size=(128, 16)) > 0.5).astype(np.uint8)
    stt, scan, sel, tsr, red = both(vector_misc, x, y, p)
    assert np.array_equal(stt, (x * F32(3)) - y)
    want = np.zeros_like(x)
    acc = np.zeros(128, F32)
    for j in range(16):
        acc = (x[:, j] * acc).astype(F32) + y[:, j]
        want[:, j] = acc
    np.testing.assert_allclose(scan, want, rtol=1e-6)
    assert np.array_equal(sel, np.where(p != 0, y, x))
    assert np.array_equal(tsr, x + F32(1))
    np.testing.assert_allclose(red[:, 0], (x + F32(1)).sum(1), rtol=1e-6)


@nki.jit
def stats_and_top8(x, vals):
    t, v = load(x), load(vals)
    st = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(st, t)
    ag = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(ag, st)
    top = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=t)
    idx = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=t, vals=v)
    return save(ag), save(top), save(idx)


def test_bn_stats_aggr_max8_find_index8():
    x = f32(128, 64)
    top_want = -np.sort(-x, axis=1)[:, :8]
    ag, top, idx = both(stats_and_top8, x, top_want)
    np.testing.assert_allclose(ag[:, 0], x.mean(1), rtol=1e-5)
    np.testing.assert_allclose(ag[:, 1], x.var(1), rtol=1e-4)
    assert np.array_equal(top, top_want)
    assert np.array_equal(np.take_along_axis(x, idx.astype(np.int64), 1), top_want)


# ----------------------------------------------------------------------------- Tensor Engine

@nki.jit
def matmul_kt(a_t, b, acc_mode):
    """a_t [K, M], b [K, N]: one PSUM tile over the k tiles, accumulate= as asked."""
    K, M = a_t.shape
    N = b.shape[1]
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    # overwriting the same tile in every iteration is an ordered loop (affine_range would be NL-E601)
    loop = nl.sequential_range if acc_mode == "false" else nl.affine_range
    for k in loop(K // 128):
        sa = load(a_t[k * 128:(k + 1) * 128, :])
        sb = load(b[k * 128:(k + 1) * 128, :])
        if acc_mode == "default":
            nisa.nc_matmul(ps, sa, sb)
        else:
            nisa.nc_matmul(dst=ps, stationary=sa, moving=sb, accumulate=acc_mode == "true")
    r = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(r, ps)
    return save(r)


def _ordered_matmul(a_t, b):
    acc = np.zeros((a_t.shape[1], b.shape[1]), F32)
    for k in range(a_t.shape[0]):      # the numerics contract: k in order, fp32 steps (exact here)
        acc = acc + np.outer(a_t[k], b[k]).astype(F32)
    return acc


def test_nc_matmul_accumulate_default_true_and_false():
    a_t = RNG.integers(-4, 4, (256, 64)).astype(F32)
    b = RNG.integers(-4, 4, (256, 32)).astype(F32)
    full = a_t.T @ b                      # small integers: every order gives the exact sum
    assert np.array_equal(both(matmul_kt, a_t, b, "default"), full)
    assert np.array_equal(both(matmul_kt, a_t, b, "true"), full)
    # accumulate=False overwrites: only the last k tile remains
    assert np.array_equal(both(matmul_kt, a_t, b, "false"), a_t[128:].T @ b[128:])
    assert np.array_equal(_ordered_matmul(a_t, b), full)


@nki.jit
def transposes(x):
    t = load(x)
    pt = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=pt, data=t)
    st = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(st, pt)
    small = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(small, t[0:32, 0:32], engine=nisa.engine.vector)
    return save(st), save(small)


def test_nc_transpose_tensor_and_vector_engines():
    x = f32(128, 64)
    st, small = both(transposes, x)
    assert np.array_equal(st, x.T) and np.array_equal(small, x[:32, :32].T)


# ----------------------------------------------------------------------------- errors at the line

@nki.jit
def dst_not_a_tensor(x):
    t = load(x)
    nisa.tensor_copy(3.0, t)  # MARK-DST
    return save(t)


@nki.jit
def legacy_mask_keyword(x):
    t = load(x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(r, t, t, nl.add, mask=None)  # MARK-MASK
    return save(r)


@nki.jit
def not_built_instruction(x):
    t = load(x)
    nisa.tensor_scalar_cumulative(t, t, np.add, np.add, 1.0)  # MARK-NOTBUILT
    return save(t)


@nki.jit
def symbolic_accumulate(a_t, b):
    ps = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        sa, sb = load(a_t[k * 128:(k + 1) * 128, :]), load(b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(ps, sa, sb, accumulate=k > 0)  # MARK-ACC
    r = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(r, ps)
    return save(r)


@nki.jit
def reduce_init_given(x):
    t = load(x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(r, t, nl.add, 1.0, nl.add, s, reduce_init=5.0)  # MARK-INIT
    return save(r)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,args,name,marker,text", [
    (dst_not_a_tensor, (f32(128, 8),), "dst_operand", "MARK-DST", "nisa.tensor_copy: dst must be a tensor"),
    (legacy_mask_keyword, (f32(128, 8),), "unknown_keyword", "MARK-MASK", "unexpected keyword argument mask="),
    (not_built_instruction, (f32(128, 8),), "nki_not_built", "MARK-NOTBUILT", "nki.isa.tensor_scalar_cumulative is not built"),
    (symbolic_accumulate, (f32(256, 8), f32(256, 8)), "nki_argument_not_built", "MARK-ACC", "accumulate="),
    (reduce_init_given, (f32(128, 8),), "nki_argument_not_built", "MARK-INIT", "reduce_init"),
])
def test_dialect_errors_name_the_line(kernel, args, name, marker, text, mode):
    e = raises(kernel, args, name, marker, mode)
    assert text in str(e)


def test_a_positional_argument_too_many_is_call_signature():
    @nki.jit
    def k(x):
        t = load(x)
        nisa.reciprocal(t, t, None, 1)  # MARK-ARITY
        return save(t)
    raises(k, (f32(128, 4),), "call_signature", "MARK-ARITY")


# ----------------------------------------------------------------------------- launches and entry points

@nki.jit
def lnc_recip(inp):
    """The lnc.rst pattern: one tile per logical core, or both on one core."""
    in_tile = nl.ndarray(inp.shape[1:], inp.dtype, buffer=nl.sbuf)
    out_tile = nl.ndarray(inp.shape[1:], inp.dtype, buffer=nl.sbuf)
    output = nl.ndarray(inp.shape, inp.dtype, buffer=nl.shared_hbm)
    if nl.num_programs() == 1:
        for i in range(2):
            nisa.dma_copy(in_tile, inp[i])
            nisa.reciprocal(out_tile, in_tile)
            nisa.dma_copy(output[i], out_tile)
    else:
        i = nl.program_id(0)
        nisa.dma_copy(in_tile, inp[i])
        nisa.reciprocal(out_tile, in_tile)
        nisa.dma_copy(output[i], out_tile)
    return output


@nki.jit
def who_am_i(x):
    out = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(t, nl.num_programs())
    nisa.dma_copy(out[nl.program_id(0):nl.program_id(0) + 1, :], t)
    if nl.num_programs() == 1:
        nisa.dma_copy(out[1:2, :], t)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_kernel_lnc_runs_one_program_per_logical_core(mode):
    x = f32(2, 128, 32, lo=0.5)
    one, two = lnc_recip(x, mode=mode), lnc_recip[2](x, mode=mode)
    np.testing.assert_allclose(one, 1 / x, rtol=1e-6)
    assert np.array_equal(one, two) and np.array_equal(lnc_recip[1](x, mode=mode), one)
    assert who_am_i(x, mode=mode)[:, 0].tolist() == [1, 1]
    assert who_am_i[2](x, mode=mode)[:, 0].tolist() == [2, 2]


def test_lnc_beyond_the_target_is_an_error_at_the_launch(monkeypatch):
    x = f32(2, 128, 8, lo=0.5)
    with pytest.raises(errors.NkiLiteError) as ei:
        lnc_recip[8](x)  # MARK-LNC8
    assert ei.value.name == "lnc" and f"{HERE}:{line_of('MARK-LNC8')}:" in str(ei.value)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    with pytest.raises(errors.NkiLiteError, match="trn1 runs a kernel on 1 logical"):
        lnc_recip[2](x)
    assert np.array_equal(lnc_recip[1](x), lnc_recip[1](x, mode="interpret"))


def test_kernel_grid_tuple_is_the_spmd_grid():
    @nki.jit
    def grid_add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        ta = load(a[i * 128:(i + 1) * 128, j * 16:(j + 1) * 16])
        tb = load(b[i * 128:(i + 1) * 128, j * 16:(j + 1) * 16])
        nisa.tensor_tensor(ta, ta, tb, nl.subtract)
        nisa.dma_copy(out[i * 128:(i + 1) * 128, j * 16:(j + 1) * 16], ta)
        return out
    a, b = f32(256, 32), f32(256, 32)
    assert np.array_equal(grid_add[2, 2](a, b, mode="interpret"), a - b)
    assert np.array_equal(grid_add[(2, 2)](a, b, mode="jit"), a - b)


@nki.jit(mode="simulation", platform_target="trn1")
def version_kernel(x):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(t, nisa.get_nc_version().value)
    return save(t)


def test_jit_mode_and_platform_target_are_honoured():
    assert version_kernel(f32(1, 1))[0, 0] == 2                       # trn1 = gen2
    assert nki.jit(platform_target="trn3")(version_kernel.fn)(f32(1, 1))[0, 0] == 4
    assert version_kernel.inner.mode == "interpret"                  # mode="simulation" is the interpreter


def plain_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta, tb = load(a), load(b)
    nisa.tensor_tensor(ta, ta, tb, nl.add)
    nisa.dma_copy(out, ta)
    return out


def test_simulate_takes_functions_kernels_and_launches():
    a, b = f32(128, 8), f32(128, 8)
    assert np.array_equal(nki.simulate(plain_add)(a, b), a + b)
    assert np.array_equal(nki.simulate(nki.jit(plain_add))(a, b), a + b)
    x = f32(2, 128, 8, lo=0.5)
    assert np.array_equal(nki.simulate(lnc_recip[2])(x), lnc_recip(x))
    with pytest.raises(errors.NkiLiteError, match="takes a kernel or a function"):
        nki.simulate(3)


def test_simulator_simulate_kernel_is_the_serving_entry_point():
    x = f32(2, 128, 8, lo=0.5)
    assert np.array_equal(nki.simulator.simulate_kernel(lnc_recip.fn, (x,), {}, 2), lnc_recip(x))
    a, b = f32(128, 8), f32(128, 8)
    assert np.array_equal(nki.simulator.simulate_kernel(plain_add, (a,), {"b": b}, 1), a + b)


def test_nki_simulator_env_runs_on_the_default_backend(monkeypatch):
    a, b = f32(256, 16), f32(256, 16)
    plain = tiled_add(a, b)
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    assert np.array_equal(tiled_add(a, b), plain)
    assert np.array_equal(nki.simulate(tiled_add)(a, b), plain)


def test_typing_annotations_are_checked():
    @nki.jit
    def k(x: nt.tensor[128, 8]):
        return save(load(x))
    assert np.array_equal(k(np.ones((128, 8), F32)), np.ones((128, 8), F32))
    with pytest.raises(errors.NkiLiteError):
        k(np.ones((64, 8), F32))


# ----------------------------------------------------------------------------- language additions

class TileConfig(nl.NKIObject):
    pass


@nki.jit
def configured(x, scale):
    cfg = TileConfig(rows=x.shape[0], factor=scale)
    t = load(x)
    r = nl.ndarray((cfg.rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(r, t, nl.multiply, cfg.factor)
    assert isinstance(t, nl.NkiTensor) and nl.is_sbuf(nl.MemoryRegion.sbuf) and nl.is_hbm(nl.shared_hbm)
    assert nl.is_on_chip(nl.psum) and nl.is_psum(nl.psum) and not nl.is_on_chip(nl.hbm)
    with nl.no_reorder():
        out = save(r)
    return out


def test_nkiobject_memoryregion_and_buffer_predicates():
    x = f32(128, 8)
    assert np.array_equal(both(configured, x, 2.0), x * F32(2))
    assert TileConfig(a=1).a == 1


def test_psum_ndarray_starts_at_zero():
    @nki.jit
    def k(x):
        p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(r, p)
        return save(r)
    assert np.array_equal(both(k, f32(128, 8)), np.zeros((128, 8), F32))


def test_new_dialect_keyword_spellings_of_nl_apis():
    @nki.jit
    def k(x):
        acc = nl.zeros_like(x=load(x), dtype=nl.float32)
        for i in nl.affine_range(start=0, stop=2, step=1):
            nisa.tensor_tensor(acc, acc, nl.broadcast_to(x=load(x[:, 0:1]), shape=x.shape), nl.add)
        for j in nl.sequential_range(1):
            for s in nl.static_range(start=1):
                nl.device_print(print_prefix="acc", tensor=acc)
        return save(acc)
    x = f32(128, 4)
    assert np.array_equal(both(k, x), np.broadcast_to(x[:, :1] + x[:, :1], x.shape))


def test_not_built_names_import_and_raise_nl_e913():
    from nki_lite.nki.language import power  # noqa: F401 - importable
    for obj, name in ((nl.power, "nki.language.power"), (nisa.tensor_scalar_cumulative, "nki.isa.tensor_scalar_cumulative"),
                      (nki.collectives.all_reduce, "nki.collectives.all_reduce")):
        with pytest.raises(errors.NkiLiteError, match=name.replace(".", r"\.") + " is not built") as ei:
            obj()
        assert ei.value.code == "NL-E913"
    with pytest.raises(errors.NkiLiteError, match="ReplicaGroup"):
        nki.collectives.ReplicaGroup.anything


def test_enums_have_the_reference_members():
    assert nisa.dma_engine.gpsimd_dma.value == 2 and nisa.nc_version.gen4.value == 4
    assert {m.name for m in nisa.engine} >= {"tensor", "vector", "scalar", "gpsimd", "dma", "sync", "unknown"}
    assert nisa.tensor_engine is nisa.engine.tensor and nisa.sync_engine is nisa.engine.sync
    assert (nisa.dge_mode.hwdge, nisa.oob_mode.skip, nisa.reduce_cmd.load_reduce) == ("hwdge", "skip", "load_reduce")


def test_fp8_dtypes_round_as_ml_dtypes():
    @nki.jit
    def k(x):
        t = load(x)
        a = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=nl.float8_e5m2, buffer=nl.sbuf)
        nisa.tensor_copy(a, t)
        nisa.activation(b, nl.copy, t)
        return save(a), save(b)
    x = f32(128, 16, lo=-300, hi=300)
    a, b = both(k, x)
    assert np.array_equal(a.view(np.uint8), x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    assert np.array_equal(b.view(np.uint8), x.astype(ml_dtypes.float8_e5m2).view(np.uint8))


# ----------------------------------------------------------------------------- import nki

def test_compat_install_nki_dialect_and_uninstall():
    nki_lite.compat.uninstall()
    added = nki_lite.compat.install(dialect="nki")
    try:
        assert "nki" in added and "neuronxcc" not in added
        import nki as real_looking
        import nki.isa as i
        import nki.language as lang
        import nki.typing as typ
        assert real_looking is nki and lang is nl and i is nisa and typ is nt
        from nki.simulator import simulate_kernel  # noqa: F401
        from nki.isa.constants import dge_mode, oob_mode
        assert (dge_mode, oob_mode) == (nisa.dge_mode, nisa.oob_mode)
    finally:
        nki_lite.compat.uninstall()
    assert "nki" not in sys.modules and "nki.isa" not in sys.modules


def test_compat_install_without_argument_installs_both_dialects():
    nki_lite.compat.uninstall()
    added = nki_lite.compat.install()
    try:
        assert {"neuronxcc.nki", "nki", "nki.language"} <= set(added)
    finally:
        nki_lite.compat.uninstall()
    with pytest.raises(errors.NkiLiteError, match="dialect='neuron'"):
        nki_lite.compat.install(dialect="neuron")


def test_a_real_nki_package_wins(monkeypatch):
    import types
    nki_lite.compat.uninstall()
    fake = types.ModuleType("nki")
    monkeypatch.setitem(sys.modules, "nki", fake)
    assert nki_lite.compat.install(dialect="nki") == []
    assert sys.modules["nki"] is fake


def test_nki_02_dtype_keyword_of_tensor_copy_rounds_through_that_dtype():
    """nki-samples' matmul tutorial: nisa.tensor_copy(dst=..., src=psum, dtype=result.dtype)."""
    @nki.jit
    def k(x):
        t = load(x)
        same = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=same, src=t, dtype=nl.float32)
        via = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=via, src=t, dtype=nl.bfloat16)
        stt = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=stt, data=t, op0=nl.add, operand0=0.0, op1=nl.add, operand1=t,
                                  dtype=nl.bfloat16)
        return save(same), save(via), save(stt)
    x = f32(128, 8)
    same, via, stt = both(k, x)
    assert np.array_equal(same, x)
    assert np.array_equal(via, x.astype(ml_dtypes.bfloat16).astype(F32))
    assert np.array_equal(stt, (x + x).astype(ml_dtypes.bfloat16).astype(F32))


# ----------------------------------------------------------------------------- iota / affine_select patterns

@nki.jit
def iota_kernel(x):
    flat = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(flat, [[3, 2], [-1, 3]], offset=5, channel_multiplier=10)
    shaped = nl.ndarray((4, 2, 3), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=shaped, pattern=[[3, 2], [1, 1], [-1, 3]], offset=5, channel_multiplier=10)
    col = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(col, [[0, 1]], channel_multiplier=2)
    per_iter = nl.ndarray((2, 4, 3), dtype=nl.int32, buffer=nl.shared_hbm)
    for j in nl.affine_range(2):
        t = nl.ndarray((4, 3), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(t, [[1, 3]], offset=j * 100)
        nisa.dma_copy(per_iter[j], t)
    return save(flat), save(shaped), save(col), per_iter


def _pattern_values(P, pattern, offset, cm):
    grids = np.meshgrid(*[np.arange(n) for _, n in pattern], indexing="ij")
    free = sum(s * g for (s, _), g in zip(pattern, grids)).reshape(-1)
    return offset + cm * np.arange(P)[:, None] + free[None, :]


def test_iota_follows_the_reference_pseudo_code():
    flat, shaped, col, per_iter = both(iota_kernel, f32(1, 1))
    want = _pattern_values(4, [[3, 2], [-1, 3]], 5, 10)
    assert np.array_equal(flat, want)
    assert np.array_equal(shaped, want.reshape(4, 2, 3).astype(F32))
    assert np.array_equal(col[:, 0], 2 * np.arange(4))
    assert np.array_equal(per_iter, np.stack([np.broadcast_to(np.arange(3), (4, 3)) + 100 * j for j in range(2)]))


@nki.jit
def causal_mask(x):
    t = load(x)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(r, pattern=[[-1, x.shape[1]]], offset=0, channel_multiplier=1, on_true_tile=t,
                       on_false_value=-9984.0, cmp_op=nl.greater_equal)
    eq = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(eq, [[2, 2], [-1, x.shape[1] // 2]], 1, t, 0.0)
    return save(r), save(eq)


def test_affine_select_is_the_causal_mask():
    x = f32(8, 8)
    r, eq = both(causal_mask, x)
    p, f = np.arange(8)[:, None], np.arange(8)[None, :]
    assert np.array_equal(r, np.where(p - f >= 0, x, F32(-9984.0)))
    vals = _pattern_values(8, [[2, 2], [-1, 4]], 0, 1)
    assert np.array_equal(eq, np.where(vals == 0, x, F32(0)))


def test_iota_pattern_of_the_wrong_size_is_an_error_at_the_line():
    @nki.jit
    def k(x):
        t = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(t, [[1, 5]])  # MARK-IOTA
        return save(t)
    raises(k, (f32(1, 1),), "shape_mismatch", "MARK-IOTA")


def test_reference_positional_parameters_are_positional():
    """The reference's nl signatures take dtype / buffer / keepdims by position; nki_lite's legacy forms
    take them by keyword only. nl.exp(x, nl.bfloat16) must not be NL-E907 here."""
    @nki.jit
    def k(x):
        t = nl.load(x, nl.float32)
        e = nl.exp(t, nl.bfloat16)
        z = nl.zeros(x.shape, nl.float32, nl.sbuf)
        s = nl.sum(t, 1, nl.float32, True)
        m = nl.add(z, t, nl.float32)
        return save(e), save(s), save(m)
    x = f32(128, 8)
    e, s, m = both(k, x)
    assert e.dtype == ml_dtypes.bfloat16 and s.shape == (128, 1) and np.array_equal(m, x)
    with pytest.raises(errors.NkiLiteError) as ei:
        nki.jit(lambda x: save(nl.exp(nl.load(x), nl.float32, 3)))(x)      # one positional too many
    assert ei.value.name == "call_signature"


def test_rejitting_a_kernel_with_options_applies_them():
    assert nki.jit(version_kernel) is version_kernel
    assert nki.jit(platform_target="trn2")(version_kernel)(f32(1, 1))[0, 0] == 3
