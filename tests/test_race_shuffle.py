"""NKI_LITE_SHUFFLE=<seed>: affine_range iterations and SPMD programs run in a seeded random order, and
accesses of one element by two iterations (RAW, WAW, WAR) raise NL-E601 / NL-E602 naming both lines
(the dynamic half of BAD_INPUTS row 15). Valid kernels give the same bits for every seed."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.runtime import debug_checks

from .markers import marker_helpers

HERE, line, _ = marker_helpers(__file__)


@nki.jit
def hbm_raw(a):
    """Iteration i stores block i, then loads block 1 - i, which the other iteration stores."""
    out = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    res = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(64)[None, :]
    for i in nl.affine_range(2):
        nl.store(out[i * 128 + ip, jf], value=nl.load(a[i * 128 + ip, jf]))  # MARK-w
        t = nl.load(out[(1 - i) * 128 + ip, jf])  # MARK-r
        nl.store(res[i * 128 + ip, jf], value=t)
    return out, res


@nki.jit
def programs_overlap(a):
    """Every program stores rows [0, 128): a write-after-write between programs."""
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    t = nl.load(a[p * 128:(p + 1) * 128, :])
    nl.store(out[0:128, :], value=t)  # MARK-pw
    return out


@nki.jit
def tiled_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        for j in nl.affine_range(a.shape[1] // 64):
            x = nl.load(a[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64])
            y = nl.load(b[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64])
            nl.store(out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], value=nl.add(x, y))
    return out


@nki.jit
def psum_k_loop(a, b):
    """PSUM accumulation over an affine k loop (the allowed idiom): keeps its order, so exact bits."""
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 128):
        x = nl.load(a[k * 128:(k + 1) * 128, :])
        y = nl.load(b[k * 128:(k + 1) * 128, :])
        ps += nl.matmul(x, y, transpose_x=True)
    nl.store(out, value=nl.copy(ps))
    return out


def test_hbm_read_after_write_across_iterations(monkeypatch):
    """The static dependence check (lower/verify_deps.py) now proves this race at trace time, in every
    mode and whatever the shuffle seed: NL-E601 at one of the two lines, naming the other."""
    a = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    lines = {line("MARK-w"), line("MARK-r")}
    for seed in (None, "0", "3"):
        if seed is None:
            monkeypatch.delenv("NKI_LITE_SHUFFLE", raising=False)
        else:
            monkeypatch.setenv("NKI_LITE_SHUFFLE", seed)
        for mode in ("interpret", "jit"):
            with pytest.raises(errors.DependencyError) as ei:
                hbm_raw(a, mode=mode)
            e = str(ei.value)
            assert ei.value.code == "NL-E601" and ei.value.loc.line in lines, e
            other = (lines - {ei.value.loc.line}).pop()
            assert f"test_race_shuffle.py:{other}" in e, e


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_programs_writing_the_same_rows(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_SHUFFLE", "1")
    with pytest.raises(errors.DependencyError) as ei:
        programs_overlap[2](np.ones((256, 64), np.float32), mode=mode)
    e = ei.value
    assert e.code == "NL-E602" and "write-after-write race between programs" in str(e), str(e)
    assert f"{HERE}:{line('MARK-pw')}:" in str(e)


def test_valid_kernels_give_identical_bits_for_every_seed(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((384, 256)).astype(np.float32), rng.standard_normal((384, 256)).astype(np.float32)
    k1 = rng.standard_normal((512, 128)).astype(np.float32)
    k2 = rng.standard_normal((512, 256)).astype(np.float32)
    monkeypatch.delenv("NKI_LITE_SHUFFLE", raising=False)
    ref_add, ref_mm = tiled_add(a, b, mode="interpret"), psum_k_loop(k1, k2, mode="interpret")
    for seed in ("0", "1", "12345"):
        monkeypatch.setenv("NKI_LITE_SHUFFLE", seed)
        assert np.array_equal(tiled_add(a, b, mode="interpret"), ref_add)
        assert np.array_equal(psum_k_loop(k1, k2, mode="interpret").view(np.uint32), ref_mm.view(np.uint32))


def test_order_is_a_seeded_permutation(monkeypatch):
    """The shuffle really reorders (and reproducibly): record the order the stores run in."""
    seen = []
    orig = debug_checks.CheckingMachine.step

    def spy(self, instr, env):
        if instr.op == "dma_copy" and instr.out.buffer == "out":
            seen.append(tuple(v for k, v in sorted(env.items())))
        return orig(self, instr, env)
    monkeypatch.setattr(debug_checks.CheckingMachine, "step", spy)
    a = np.zeros((384, 256), np.float32)

    def order(seed):
        seen.clear()
        monkeypatch.setenv("NKI_LITE_SHUFFLE", seed)
        tiled_add(a, a, mode="interpret")
        return list(seen)
    o1, o2, o3 = order("3"), order("3"), order("4")
    assert sorted(o1) == [(i, j) for i in range(3) for j in range(4)]
    assert o1 == o2 and o1 != sorted(o1) and o3 != o1


def test_psum_accumulating_loop_keeps_its_order(monkeypatch):
    seen = []
    orig = debug_checks.CheckingMachine.step

    def spy(self, instr, env):
        if instr.op == "nc_matmul":
            seen.append(tuple(env.values()))
        return orig(self, instr, env)
    monkeypatch.setattr(debug_checks.CheckingMachine, "step", spy)
    monkeypatch.setenv("NKI_LITE_SHUFFLE", "3")
    psum_k_loop(np.ones((512, 128), np.float32), np.ones((512, 256), np.float32), mode="interpret")
    assert seen == [(0,), (1,), (2,), (3,)]


def test_malformed_seed_is_an_argument_error(monkeypatch):
    monkeypatch.setenv("NKI_LITE_SHUFFLE", "abc")
    with pytest.raises(errors.ArgumentError, match="NKI_LITE_SHUFFLE"):
        tiled_add(np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32), mode="interpret")


def test_generated_kernels_are_race_free_and_seed_independent(monkeypatch):
    """Random well-formed kernels (tests/kernelgen.py: affine/sequential loops, SPMD grids, accumulation
    loops) raise no race under a shuffle and give the unshuffled bits."""
    from hypothesis import HealthCheck, given, settings

    from . import kernelgen as KG

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=KG.kernels(nested_affine=True))
    def prop(case):
        monkeypatch.delenv("NKI_LITE_SHUFFLE", raising=False)
        ref = case.kernel(*[a.copy() for a in case.args], mode="interpret")
        monkeypatch.setenv("NKI_LITE_SHUFFLE", "11")
        got = case.kernel(*[a.copy() for a in case.args], mode="interpret")
        ref, got = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
        for x, y in zip(ref, got):
            assert np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8))
    prop()
