"""SPMD programs on several threads: identical bits for every thread count, serial when unproven,
errors and forks handled."""
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.lower.analysis.dependence import programs_independent
from nki_lite.stdlib.elementwise import spmd_add

from .markers import line_of


@pytest.fixture(autouse=True)
def jit_mode(monkeypatch):
    monkeypatch.setenv("NKI_LITE_MODE", "jit")


@pytest.mark.parametrize("threads", ["1", "2", "3", "8"])
def test_spmd_results_identical_for_every_thread_count(monkeypatch, threads):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128 * 6, 512 * 3)).astype(np.float32)
    b = rng.standard_normal((128 * 6, 512 * 3)).astype(np.float32)
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    out = spmd_add[6, 3](a, b)
    assert np.array_equal(out, a + b)
    assert programs_independent(spmd_add[6, 3].trace(a, b))


@nki.jit
def every_program_writes_row0(x):
    out = nl.ndarray((128, 512), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[nl.program_id(0) * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
    nl.store(out, t)                      # the last program (in row-major order) wins, serially
    return out


def test_overlapping_writes_stay_serial(monkeypatch):
    x = np.arange(4 * 128 * 512, dtype=np.float32).reshape(4 * 128, 512)
    assert not programs_independent(every_program_writes_row0[4].trace(x))
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "4")
    out = every_program_writes_row0[4](x)
    assert np.array_equal(out, x[3 * 128:])
    assert np.array_equal(out, every_program_writes_row0[4](x, mode="interpret"))


def test_error_in_one_program_is_raised_with_its_line(monkeypatch):
    """An out-of-bounds access only the runtime sees (IR run without the verifier), in program 5."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    from nki_lite.runtime.compiled import CompiledKernel

    @nki.jit
    def k(x):
        out = nl.ndarray((8 * 128, 4), x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t = nl.load(x[i * 128 + i * 10 + nl.arange(128)[:, None], nl.arange(4)[None, :]])  # MARK-THREAD-OOB
        nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(4)[None, :]], t)
        return out

    x = np.zeros((8 * 128 + 50, 4), np.float32)
    kern = run_shared(trace(k.fn, k.bind((x,), {}), (8,), "trn2"))
    ck = CompiledKernel(kern, debug=False)
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "4")
    assert ck.plan.parallel
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        ck.launch({"x": x})
    assert f":{line_of(__file__, 'MARK-THREAD-OOB')}:" in str(ei.value)
    assert "pid0=" in str(ei.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_pool_survives_fork(monkeypatch):
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "2")
    a = np.ones((256, 1024), np.float32)
    assert np.array_equal(spmd_add[2, 2](a, a), 2 * a)      # the pool exists in the parent
    pid = os.fork()
    if pid == 0:                                           # child: a fresh pool, same results
        ok = np.array_equal(spmd_add[2, 2](a, a), 2 * a)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_single_affine_loop_kernel_iterations_run_on_threads(monkeypatch):
    """A kernel that is one affine_range loop: its iterations are the programs."""
    from nki_lite.lower.analysis.dependence import program_space
    from nki_lite.stdlib.matmul_kernels import tiled_matmul
    from nki_lite.stdlib.softmax_kernels import row_softmax
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128 * 5 + 17, 300)).astype(np.float32)       # ragged last tile
    lhsT = rng.standard_normal((256, 512)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    assert program_space(row_softmax.trace(x))[1] == (6,)
    assert programs_independent(row_softmax.trace(x)) and programs_independent(tiled_matmul.trace(lhsT, rhs))
    ref_sm = row_softmax(x, mode="interpret")
    ref_mm = tiled_matmul(lhsT, rhs, mode="interpret")
    for threads in ("1", "2", "5"):
        monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
        assert np.array_equal(row_softmax(x).view(np.uint32), ref_sm.view(np.uint32))
        assert np.array_equal(tiled_matmul(lhsT, rhs).view(np.uint32), ref_mm.view(np.uint32))


@nki.jit
def scale_rows_by_weights(x, w):
    """A prologue (the weights loaded once, shared read-only by the workers) then an affine loop."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    wt = nl.load(w)                                          # [128, D], read-only in the loop
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.multiply(t, wt), 1.0))
    return out


@nki.jit
def running_sum_of_tiles(x):
    """The loop accumulates into a buffer allocated before it: iteration i stores the sum of tiles
    0..i, so iterations depend on each other through on-chip state."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, x.shape[1]), dtype=nl.float32)
    for i in nl.affine_range(x.shape[0] // 128):
        acc += nl.load(x[i * 128:(i + 1) * 128, :])  # MARK-RUNNING-ACC
        nl.store(out[i * 128:(i + 1) * 128, :], acc)
    return out


@nki.jit
def prologue_and_epilogue(x):
    """Statements before and after the loop, writing and reading HBM the loop also uses."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    first = nl.load(x[0:128, :])
    nl.store(out[0:128, :], first)                           # prologue: an HBM write
    for i in nl.affine_range(x.shape[0] // 128 - 1):
        t = nl.load(x[(i + 1) * 128:(i + 2) * 128, :])
        nl.store(out[(i + 1) * 128:(i + 2) * 128, :], nl.add(nl.exp(t), first))
    last = nl.load(out[x.shape[0] - 128:x.shape[0], :])       # epilogue: reads what a program wrote
    nl.store(out[0:128, :], nl.multiply(last, 2.0))
    return out


@nki.jit
def epilogue_reads_a_program_tile(x):
    """After the loop, a tile allocated inside it holds the last iteration's values (serially)."""
    out = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.exp(nl.load(x[i * 128:(i + 1) * 128, :]))
    nl.store(out, t)
    return out


@pytest.mark.parametrize("threads", ["1", "2", "3", "5", "8"])
def test_prologue_then_affine_loop_runs_on_threads(monkeypatch, threads):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((128 * 7, 96)).astype(np.float32)
    w = rng.standard_normal((128, 96)).astype(np.float32)
    assert programs_independent(scale_rows_by_weights.trace(x, w))
    ref = scale_rows_by_weights(x, w, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    assert np.array_equal(scale_rows_by_weights(x, w).view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("threads", ["1", "2", "3", "8"])
def test_prologue_loop_epilogue_runs_on_threads(monkeypatch, threads):
    x = np.random.default_rng(14).standard_normal((128 * 6, 40)).astype(np.float32)
    assert programs_independent(prologue_and_epilogue.trace(x))
    ref = prologue_and_epilogue(x, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    assert np.array_equal(prologue_and_epilogue(x).view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("kernel", [running_sum_of_tiles, epilogue_reads_a_program_tile])
def test_shared_on_chip_state_keeps_a_kernel_serial(monkeypatch, kernel):
    x = np.random.default_rng(12).standard_normal((128 * 5, 64)).astype(np.float32)
    assert not programs_independent(kernel.trace(x))
    ref = kernel(x, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "4")
    assert np.array_equal(kernel(x).view(np.uint32), ref.view(np.uint32))


@nki.jit
def long_serial_exp(x):
    """One program, a sequential loop of many tile passes: seconds of work in one native call.
    Iteration i writes row i of the output."""
    out = nl.ndarray((16384, 64), x.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(16384):
        e = nl.exp(nl.tanh(nl.load(x)))
        nl.store(out[i, 0:64], e[0, 0:64])
    return out


@pytest.mark.parametrize("threads", ["1", "2"])
def test_ctrl_c_stops_a_long_single_program(monkeypatch, threads):
    """Ctrl-C (here _thread.interrupt_main from a timer) raises KeyboardInterrupt while the native
    code runs; the output shows the run stopped part-way (its last row was never computed)."""
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    x = np.random.default_rng(13).standard_normal((128, 2048)).astype(np.float32)
    _interrupt_after_start(long_serial_exp, x, np.full((16384, 64), 7.0, np.float32), 64)
    y = np.ascontiguousarray(x[:, :512])
    assert np.array_equal(spmd_add[1, 1](y, y), 2 * y)        # the runtime is still usable


# ---------------------------------------------------------------- parallel regions (nested affine loops)

@nki.jit
def steps_of_tiles(x, w):
    """An affine loop (the programs), then a sequential loop whose body holds an affine loop over row
    tiles (a region, in the epilogue): each step rewrites out from the previous step's out (read
    through the same access) with a weight loaded in the prologue."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    wt = nl.load(w)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(x[i * 128:(i + 1) * 128, :]))
    for s in nl.sequential_range(3):
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.load(out[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.multiply(nl.tanh(t), wt), 0.25))
    return out


@pytest.fixture
def small_regions(monkeypatch):
    """Make every independent nested affine loop a region, whatever its size."""
    from nki_lite.lower import parallel
    from nki_lite.runtime import jit
    monkeypatch.setattr(parallel, "REGION_MIN_ELEMENTS", 1)
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    jit.CACHE.clear()
    yield
    jit.CACHE.clear()


@pytest.mark.parametrize("threads", ["1", "2", "3", "8"])
def test_nested_affine_loop_runs_as_a_parallel_region(monkeypatch, small_regions, threads):
    from nki_lite.lower.parallel import regions
    rng = np.random.default_rng(15)
    x = rng.standard_normal((128 * 5, 72)).astype(np.float32)
    w = rng.standard_normal((128, 72)).astype(np.float32)
    assert programs_independent(steps_of_tiles.trace(x, w))              # the copy loop: programs
    assert len(regions(steps_of_tiles.trace(x, w))) == 1                 # the loop inside the sequential one
    ref = steps_of_tiles(x, w, mode="interpret")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    ck = steps_of_tiles._compiled(steps_of_tiles.trace(x, w))
    assert ck.plan.region_trips == (5,)
    assert np.array_equal(steps_of_tiles(x, w).view(np.uint32), ref.view(np.uint32))


def test_region_tiles_read_after_the_loop_keep_it_serial(small_regions):
    from nki_lite.lower.parallel import regions

    @nki.jit
    def k(x):
        out = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
        for s in nl.sequential_range(2):
            for i in nl.affine_range(x.shape[0] // 128):
                t = nl.exp(nl.load(x[i * 128:(i + 1) * 128, :]))
            nl.store(out, t)                                  # the last iteration's tile
        return out
    x = np.random.default_rng(16).standard_normal((128 * 3, 32)).astype(np.float32)
    assert regions(k.trace(x)) == []
    assert np.array_equal(k(x).view(np.uint32), k(x, mode="interpret").view(np.uint32))


def test_error_in_a_region_names_its_line_and_loop_values(monkeypatch, small_regions):
    """An out-of-bounds access only the runtime sees (IR run without the verifier), in iteration
    i = 3 of a region inside a sequential loop, reported like any other."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    from nki_lite.runtime.compiled import CompiledKernel

    @nki.jit
    def k(x):
        out = nl.ndarray((4 * 128, 8), x.dtype, buffer=nl.shared_hbm)
        for s in nl.sequential_range(2):
            for i in nl.affine_range(4):
                t = nl.load(x[i * 128 + i * 20 + nl.arange(128)[:, None], nl.arange(8)[None, :]])  # MARK-REGION-OOB
                nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(8)[None, :]], t)
        return out

    x = np.zeros((4 * 128 + 50, 8), np.float32)
    kern = run_shared(trace(k.fn, k.bind((x,), {}), (), "trn2"))
    ck = CompiledKernel(kern, debug=False)
    assert ck.plan.region_trips == (4,)
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "2")
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        ck.launch({"x": x})
    assert f":{line_of(__file__, 'MARK-REGION-OOB')}:" in str(ei.value)
    assert "i0=3" in str(ei.value) or "i1=3" in str(ei.value)


def test_region_kernel_from_the_disk_cache(monkeypatch, small_regions, tmp_path):
    """A kernel with a parallel region, loaded by a 'new process' from the disk cache: the entry
    carries the region table, so the loaded code dispatches it too."""
    from nki_lite.runtime import diskcache, jit
    monkeypatch.setenv("NKI_LITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "1")
    monkeypatch.setattr(diskcache, "_START", float("inf"))          # sources edited meanwhile: still cache
    monkeypatch.setattr(diskcache, "_SOURCES_CHANGED", None)
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "2")
    rng = np.random.default_rng(17)
    x = rng.standard_normal((128 * 4, 40)).astype(np.float32)
    w = rng.standard_normal((128, 40)).astype(np.float32)
    ref = steps_of_tiles(x, w, mode="interpret")
    first = nki.jit(steps_of_tiles.fn)
    assert np.array_equal(first(x, w).view(np.uint32), ref.view(np.uint32))
    assert first.cache_info()["compiles"] == 1
    jit.CACHE.clear()
    second = nki.jit(steps_of_tiles.fn)
    assert np.array_equal(second(x, w).view(np.uint32), ref.view(np.uint32))
    info = second.cache_info()
    assert info["compiles"] == 0 and info["disk_hits"] == 1
    assert second._compiled(second.trace(x, w)).plan.region_trips == (4,)


@nki.jit
def long_steps_of_tiles(x):
    """Thousands of steps, each an affine loop over row tiles (a parallel region); step s writes
    row s of the output (16 columns per tile)."""
    out = nl.ndarray((8192, 64), x.dtype, buffer=nl.shared_hbm)
    for s in nl.sequential_range(8192):
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.exp(nl.tanh(nl.load(x[i * 128:(i + 1) * 128, :])))
            nl.store(out[s, i * 16:(i + 1) * 16], t[0, 0:16])
    return out


def test_ctrl_c_stops_a_kernel_inside_a_parallel_region(monkeypatch):
    from nki_lite.lower.parallel import regions
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "2")
    x = np.random.default_rng(18).standard_normal((512, 1024)).astype(np.float32)
    assert len(regions(long_steps_of_tiles.trace(x))) == 1
    _interrupt_after_start(long_steps_of_tiles, x, np.full((8192, 64), 7.0, np.float32), 16)


def _interrupt_after_start(kernel, x, out, cols: int) -> None:
    """Interrupt `kernel(x, out=out)` (row s of out = exp(tanh(x[0, :cols])) per step) after 0.3 s:
    KeyboardInterrupt is raised, the first row was computed and the last one was not."""
    import _thread
    import threading
    kernel.inspect_asm(x)                                      # compile first: interrupt the run, not LLVM
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            kernel(x, out=out)
    finally:
        timer.cancel()
    row = np.exp(np.tanh(x[0, :cols].astype(np.float64)))
    assert np.allclose(out[0, :cols], row, rtol=1e-5)          # it had started
    assert not np.allclose(out[-1, :cols], row, rtol=1e-5)     # and stopped before the last step


@nki.jit
def programs_overwrite_each_other(x):
    """Every SPMD program writes the whole output (serially the last one wins), so the programs stay
    serial; inside each, the affine loop over tiles is a region (program id fixed while it runs)."""
    out = nl.ndarray((x.shape[0], 16), x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 + nl.arange(128)[:, None], pid * 16 + nl.arange(16)[None, :]])
        nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(16)[None, :]], nl.exp(t))
    return out


@pytest.mark.parametrize("threads", ["1", "3"])
def test_region_inside_serial_spmd_programs(monkeypatch, small_regions, threads):
    from nki_lite.lower.parallel import regions
    x = np.random.default_rng(19).standard_normal((128 * 4, 48)).astype(np.float32)
    k = programs_overwrite_each_other[3]
    assert not programs_independent(k.trace(x))
    assert len(regions(k.trace(x))) == 1
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", threads)
    ref = k(x, mode="interpret")
    assert np.array_equal(k(x).view(np.uint32), ref.view(np.uint32))
    np.testing.assert_allclose(ref, np.exp(x[:, 32:48].astype(np.float64)), rtol=1e-6)   # the last program won


def test_inspect_threads_says_what_runs_on_threads_and_why_not():
    from nki_lite.stdlib.softmax_kernels import row_softmax
    x = np.zeros((128 * 5, 64), np.float32)
    w = np.zeros((128, 64), np.float32)
    text = row_softmax.inspect_threads(np.zeros((1024, 64), np.float32))
    assert "programs: 8 iterations of the affine_range loop" in text and "softmax_kernels.py:" in text
    assert ": on threads" in text.splitlines()[0]
    acc = running_sum_of_tiles.inspect_threads(x)
    assert "serial, because tensor_tensor" in acc and "writes 'acc'" in acc
    assert f"test_threads.py:{line_of(__file__, 'MARK-RUNNING-ACC')}" in acc
    assert "after a prologue and before an epilogue: on threads" in prologue_and_epilogue.inspect_threads(x)
    assert "a tile of the loop, after it" in epilogue_reads_a_program_tile.inspect_threads(x)
    grid = every_program_writes_row0[4].inspect_threads(np.zeros((512, 512), np.float32))
    assert "SPMD grid [4]: serial" in grid and "pid0 may write the same elements" in grid
    assert "parallel regions: none" in grid
