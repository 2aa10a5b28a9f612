"""The uninitialised-read check (BAD_INPUTS row 17, NL-E902): a value computed from never-written
memory that reaches a kernel output names the instruction that read the never-written element.
Off by default; NKI_LITE_DEBUG_UNINIT=1 checks interpret-mode and JIT calls (which then run in the
interpreter)."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers

HERE, line, _ = marker_helpers(__file__)


@nki.jit
def ragged_unmasked_store(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)  # MARK-alloc
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    t[ip, jf] = nl.load(a[ip, jf], mask=(ip < 100))
    u = nl.exp(t)  # MARK-exp
    nl.store(out[ip, jf], value=u)  # MARK-store
    return out


@nki.jit
def ragged_masked_store(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    t[ip, jf] = nl.load(a[ip, jf], mask=(ip < 100))
    u = nl.exp(t)                                   # reads the unwritten rows: harmless, never stored
    s = nl.sum(t, axis=1, keepdims=True, mask=(ip < 100))
    nl.store(out[ip, jf], value=u, mask=(ip < 100))
    nl.store(out[ip, jf], value=nl.zeros((128, 64), nl.float32) + s, mask=(ip >= 100) & (ip < 0))
    nl.store(out[ip, jf], value=nl.zeros((128, 64), nl.float32), mask=(ip >= 100))
    return out


@nki.jit
def never_loaded(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nl.store(out, value=t)  # MARK-direct
    return out


@nki.jit
def psum_accumulate(a, b, zero: bool, add_first: bool = False):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    if zero:
        ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    else:
        ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    if add_first:
        ps[...] = nl.add(ps, 1.0)  # MARK-acc
    ps += nisa.nc_matmul(x, y)
    nl.store(out, value=nl.copy(ps))
    return out


@nki.jit
def loop_tiles(a, inside: bool):
    """Iteration 0 loads the tile, iteration 1 only reads it: fine when the tile is allocated before
    the loop, an uninitialised read when it is allocated in the loop (fresh every iteration)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    outer = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.sequential_range(2):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf) if inside else outer
        t[ip, jf] = nl.load(a[ip, jf], mask=(i * 128 + ip < 128))
        v = nl.copy(t)  # MARK-loopread
        nl.store(out[ip, jf], value=v, mask=(i * 128 + ip >= 128))
    return out


@nki.jit
def reads_output_first(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    old = nl.load(out)  # MARK-outread
    nl.store(out, value=nl.add(old, nl.load(a)))
    return out


@nki.jit
def overwritten_garbage(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nl.store(out, value=t)                # garbage first ...
    nl.store(out, value=nl.load(a))       # ... then every element overwritten with data
    return out


def _expect(kernel, args, marker, tile, element, mode="interpret", **kw):
    with pytest.raises(errors.UninitializedReadError) as ei:
        kernel(*args, mode=mode, **kw)
    e = ei.value
    assert e.code == "NL-E902" and isinstance(e, ValueError)
    assert f"{HERE}:{line(marker)}:" in str(e).split("note:")[0], str(e)
    assert f"element {element} of '{tile}'" in str(e), str(e)
    return e


A = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 1000


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_ragged_tile_stored_unmasked(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    e = _expect(ragged_unmasked_store, (A,), "MARK-exp", "t", [100, 0], mode=mode)
    assert f"{HERE}:{line('MARK-store')}:" in str(e) and f"{HERE}:{line('MARK-alloc')}:" in str(e)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_off_by_default_memory_is_nan_filled(monkeypatch, mode):
    """Without the knob both modes keep NKI's simulator semantics: NaN-filled memory shows in results."""
    monkeypatch.delenv("NKI_LITE_DEBUG_UNINIT", raising=False)
    r = ragged_unmasked_store(A, mode=mode)
    assert np.isnan(r[100:]).all() and not np.isnan(r[:100]).any()


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_masked_off_elements_are_not_reads(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    r = ragged_masked_store(A, mode=mode)
    np.testing.assert_array_equal(r[:100], np.exp(A[:100]).astype(np.float32) * 0 + r[:100])
    assert not np.isnan(r).any()


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_store_of_never_written_tile(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    _expect(never_loaded, (A,), "MARK-direct", "t", [0, 0], mode=mode)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_psum_accumulation(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    a, b = np.ones((128, 16), np.float32), np.ones((128, 32), np.float32)
    np.testing.assert_array_equal(psum_accumulate(a, b, True, mode=mode), np.full((16, 32), 128, np.float32))
    # a fresh nl.ndarray PSUM tile first written by `+=` matmul: the group's first matmul overwrites
    # (NKI arch guide, "Near-memory accumulation in PSUM"), so nothing uninitialised is read
    np.testing.assert_array_equal(psum_accumulate(a, b, False, mode=mode), np.full((16, 32), 128, np.float32))
    _expect(psum_accumulate, (a, b, False, True), "MARK-acc", "ps", [0, 0], mode=mode)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_alloc_in_loop_is_fresh_each_iteration(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    np.testing.assert_array_equal(loop_tiles(A, False, mode=mode), A)
    _expect(loop_tiles, (A, True), "MARK-loopread", "t", [0, 0], mode=mode)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_output_read_before_written(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    _expect(reads_output_first, (A,), "MARK-outread", "out", [0, 0], mode=mode)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_overwritten_outputs_are_fine(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    np.testing.assert_array_equal(overwritten_garbage(A, mode=mode), A)


@pytest.mark.parametrize("checks", [{"NKI_LITE_DEBUG_UNINIT": "1"},
                                    {"NKI_LITE_DEBUG_UNINIT": "1", "NKI_LITE_SHUFFLE": "5", "NKI_LITE_DEBUG_NANS": "1"}])
def test_stdlib_kernels_pass_every_check_on_ragged_shapes(monkeypatch, checks):
    """No false positive on the stdlib (ragged tails, PSUM accumulation, SPMD grids); results equal the
    unchecked interpreter's bit for bit, also with shuffled iterations."""
    from nki_lite.stdlib.elementwise import spmd_add
    import nki_lite.stdlib as S
    from nki_lite.stdlib.matmul_kernels import nl_matmul, tiled_matmul
    from nki_lite.stdlib.norm_kernels import rmsnorm_tutorial as rmsnorm
    from nki_lite.stdlib.softmax_kernels import row_softmax
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)       # noqa: E731
    cases = [(spmd_add[2, 2], (f(256, 1024), f(256, 1024))), (tiled_matmul, (f(256, 128), f(256, 512))),
             (nl_matmul, (f(128, 256), f(256, 512))), (rmsnorm, (f(200, 96), f(96))),
             (row_softmax, (f(130, 33),))]
    for plan in (S.matmul.plan(f(130, 140), f(140, 520)), S.softmax.plan(f(130, 40)),
                 S.rmsnorm.plan(f(130, 40), f(40)), S.layernorm.plan(f(130, 600), f(600), f(600)),
                 S.attention.plan(f(1, 2, 130, 16), f(1, 1, 530, 16), f(1, 1, 530, 16), causal=True),
                 S.quantize_fp8.plan(f(130, 40), axis=0)):
        cases.append((plan.kernel, plan.args))
    for kernel, args in cases:
        monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "0")
        monkeypatch.delenv("NKI_LITE_SHUFFLE", raising=False)
        monkeypatch.delenv("NKI_LITE_DEBUG_NANS", raising=False)
        ref = kernel(*args, mode="interpret")
        for k, v in checks.items():
            monkeypatch.setenv(k, v)
        got = kernel(*args, mode="interpret")
        for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            assert np.asarray(g).tobytes() == np.asarray(r).tobytes()


def test_generated_kernels_that_initialise_everything_pass(monkeypatch):
    """No false positive on random well-formed kernels that never read uninitialised memory
    (tests/kernelgen.py, init_full=True): the checked run raises nothing and gives the same bits."""
    from hypothesis import HealthCheck, given, settings

    from . import kernelgen as KG

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=KG.kernels(init_full=True))
    def prop(case):
        monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "0")
        ref = case.kernel(*[a.copy() for a in case.args], mode="interpret")
        monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
        got = case.kernel(*[a.copy() for a in case.args], mode="interpret")
        ref, got = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
        for x, y in zip(ref, got):
            assert np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8))
    prop()
