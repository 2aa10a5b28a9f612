"""Threads claim chunks of programs and of region iterations (launch_plan.CHUNKS_PER_THREAD per
thread): every chunk runs exactly once, results are the serial bits for every thread count, chunk
count, grid, shape and dtype, and after an error no chunk starts."""
import threading

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.lower.llvm import launch_plan
from nki_lite.runtime import native as NV
from nki_lite.runtime import threads as TH
from nki_lite.stdlib.elementwise import spmd_add


@pytest.fixture(autouse=True)
def jit_mode(monkeypatch):
    monkeypatch.setenv("NKI_LITE_MODE", "jit")


@pytest.fixture
def calls(monkeypatch):
    """Every native call of the programs phase (phases 2) as (lo, hi, thread)."""
    seen = []
    orig = NV.Native.run

    def run(self, args, lo, hi, stop_addr, phases=7, shared=None, dispatch=0):
        if phases == 2:
            seen.append((lo, hi, threading.get_ident()))
        return orig(self, args, lo, hi, stop_addr, phases, shared, dispatch)
    monkeypatch.setattr(NV.Native, "run", run)
    return seen


@nki.jit
def rows_tanh_scaled(x, w):
    """A prologue (w loaded once, shared read-only), then an affine loop over 128-row tiles with a
    ragged, masked last tile: the iterations are the programs."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    ic = nl.arange(x.shape[1])[None, :]
    wt = nl.load(w[nl.arange(1)[:, None], ic], dtype=nl.float32).broadcast_to((128, x.shape[1]))
    for i in nl.affine_range((x.shape[0] + 127) // 128):
        valid = i * 128 + ip < x.shape[0]
        t = nl.load(x[i * 128 + ip, ic], mask=valid, dtype=nl.float32)
        nl.store(out[i * 128 + ip, ic], value=nl.multiply(nl.tanh(t), wt, dtype=x.dtype, mask=valid), mask=valid)
    return out


@pytest.mark.parametrize("per_thread", [1, 4, 64])
@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("grid", [(7, 1), (3, 5), (16, 2)])
def test_spmd_chunks_each_run_once_with_the_serial_bits(monkeypatch, calls, per_thread, threads, grid):
    monkeypatch.setattr(launch_plan, "CHUNKS_PER_THREAD", per_thread)
    rng = np.random.default_rng(sum(grid))
    a = rng.standard_normal((128 * grid[0], 512 * grid[1])).astype(np.float32)
    b = rng.standard_normal(a.shape).astype(np.float32)
    k = spmd_add[grid]
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "1")
    ref = k(a, b)
    calls.clear()
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", str(threads))
    out = k(a, b)
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))
    n = grid[0] * grid[1]
    want = launch_plan._chunks(n, min(n, threads * per_thread))
    assert sorted((lo, hi) for lo, hi, _ in calls) == want          # each chunk once, nothing else
    assert len({t for _, _, t in calls}) <= threads


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("rows", [128 * 9 + 5, 128 * 2])
@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_affine_loop_programs_in_chunks_keep_the_serial_bits(monkeypatch, calls, dtype, rows, threads):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 96)).astype(dtype)
    w = rng.standard_normal((1, 96)).astype(np.float32)
    ref = rows_tanh_scaled(x, w, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    out = rows_tanh_scaled(x, w)
    assert np.array_equal(out.view(np.uint16 if dtype != np.float32 else np.uint32),
                          ref.view(np.uint16 if dtype != np.float32 else np.uint32))
    n = (rows + 127) // 128
    expect = [] if threads == "1" else launch_plan._chunks(n, min(n, int(threads) * launch_plan.CHUNKS_PER_THREAD))
    assert sorted((lo, hi) for lo, hi, _ in calls) == expect


@nki.jit
def steps_of_row_tiles(x):
    """A sequential loop whose body is an affine loop over row tiles (a parallel region per step):
    step s adds tanh of the previous step's output."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(x[i * 128:(i + 1) * 128, :]))
    for s in nl.sequential_range(2):
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.load(out[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.tanh(t), t))
    return out


@pytest.mark.parametrize("per_thread", [1, 3, 50])
@pytest.mark.parametrize("threads", ["2", "3"])
def test_region_chunks_are_claimed_and_keep_the_serial_bits(monkeypatch, per_thread, threads):
    from nki_lite.lower import parallel
    from nki_lite.runtime import jit
    monkeypatch.setattr(parallel, "REGION_MIN_ELEMENTS", 1)
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    monkeypatch.setattr(launch_plan, "CHUNKS_PER_THREAD", per_thread)
    jit.CACHE.clear()
    ranges = []
    orig = TH.region_chunks

    def spy(trip, t):
        ranges.append(orig(trip, t))
        return ranges[-1]
    monkeypatch.setattr(TH, "region_chunks", spy)
    x = np.random.default_rng(per_thread).standard_normal((128 * 7, 40)).astype(np.float32)
    ref = steps_of_row_tiles(x, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    try:
        out = steps_of_row_tiles(x)
    finally:
        jit.CACHE.clear()
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))
    assert len(ranges) == 2                                     # one dispatch per step
    assert ranges[0] == launch_plan._chunks(7, min(7, int(threads) * per_thread))


class _FakeNative:
    """Stands in for runtime.native.Native in on_pool: job `lo` fails when lo is in `failing`."""

    def __init__(self, failing=(), delay=None):
        self.failing, self.delay, self.ran, self.lock = set(failing), delay, [], threading.Lock()

    def run(self, args, lo, hi, stop_addr, phases, shared, dispatch):
        with self.lock:
            self.ran.append(lo)
        if self.delay is not None:
            self.delay(lo)
        st = np.array([lo], np.int64)
        return (1, st) if lo in self.failing else (0, st)

    def error(self, st):
        return errors.NkiLiteError(f"program {int(st[0])} failed")


def test_on_pool_runs_every_job_once_on_at_most_the_workers_asked():
    fake = _FakeNative()
    threads_seen = set()
    fake.delay = lambda lo: threads_seen.add(threading.get_ident())
    TH.on_pool(fake, [], [(lo, lo + 1, 2, None, 0) for lo in range(10)], workers=3)
    assert sorted(fake.ran) == list(range(10))
    assert 1 <= len(threads_seen) <= 3


def test_on_pool_starts_no_job_after_an_error_and_raises_the_lowest():
    fake = _FakeNative(failing={2})
    with pytest.raises(errors.NkiLiteError, match="program 2 failed"):
        TH.on_pool(fake, [], [(lo, lo + 1, 2, None, 0) for lo in range(8)], workers=1)
    assert fake.ran == [0, 1, 2]                               # one worker: jobs 3.. never start
    # two workers both failing: the lower program's error, whichever finished first
    gate = threading.Event()
    two = _FakeNative(failing={0, 1}, delay=lambda lo: gate.set() if lo == 1 else gate.wait(5))
    with pytest.raises(errors.NkiLiteError, match="program 0 failed"):
        TH.on_pool(two, [], [(lo, lo + 1, 2, None, 0) for lo in range(6)], workers=2)
    assert sorted(two.ran) == [0, 1]
