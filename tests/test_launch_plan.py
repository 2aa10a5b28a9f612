"""The launch plan codegen hands the runtime (lower/llvm/launch_plan.py): what it says, that it
survives the disk cache, and that the runtime executes it without re-deriving it from the IR."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nki_lite as nki
from nki_lite import config
import nki_lite.language as nl
from nki_lite.lower.llvm.launch_plan import CHUNKS_PER_THREAD, LaunchPlan, region_chunks
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.stdlib.elementwise import spmd_add

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")


@nki.jit
def printing(x):
    out = nl.ndarray((128, 8), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[nl.program_id(0) * 128 + nl.arange(128)[:, None], nl.arange(8)[None, :]])
    nl.device_print("t", t)
    nl.store(out, t)
    return out


@nki.jit
def half_written(x):
    out = nl.ndarray((256, 8), x.dtype, buffer=nl.shared_hbm)
    nl.store(out[nl.arange(128)[:, None], nl.arange(8)[None, :]], nl.load(x))
    return out


def _plan(kernel, *args, debug=False):
    from nki_lite.lower.llvm.codegen import generate
    return generate(kernel.trace(*args), debug).plan


A = np.ones((128 * 4, 512), np.float32)


def test_plan_of_independent_spmd_programs():
    plan = _plan(spmd_add[4, 1], A, A)
    assert isinstance(plan, LaunchPlan)
    assert plan.n_programs == 4 and plan.parallel and not plan.needs_print
    assert plan.arg_buffers[:2] == tuple(spmd_add[4, 1].trace(A, A).params)
    assert plan.prefill == frozenset()                      # every output element is written
    assert plan.threads(8) == 4 and plan.threads(3) == 3 and plan.threads(1) == 1


def test_device_print_makes_the_plan_serial():
    plan = _plan(printing[4], A[:, :8])
    assert plan.needs_print and not plan.parallel and plan.threads(8) == 1


def test_prefill_lists_outputs_not_fully_written_and_every_output_in_debug_mode():
    x = np.ones((128, 8), np.float32)
    with pytest.warns(UserWarning, match="only partly written"):
        kernel = half_written.trace(x)
    assert _plan(half_written, x).prefill == frozenset(kernel.outputs)
    assert _plan(spmd_add[4, 1], A, A, debug=True).prefill == frozenset(spmd_add[4, 1].trace(A, A).outputs)


@pytest.mark.parametrize("n,threads", [(1, 1), (7, 3), (8, 8), (5, 2), (1000, 7), (32, 2), (9, 1)])
def test_chunks_cover_every_program_once_in_order(n, threads):
    plan = LaunchPlan("k", (), 0, n, True, False, (), frozenset(), False, (), ())
    t = plan.threads(threads)
    for chunks in (plan.program_chunks(t), region_chunks(n, threads)):
        assert chunks[0][0] == 0 and chunks[-1][1] == n and all(lo < hi for lo, hi in chunks)
        assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
        # several chunks per thread, so threads that finish early take the others' share; one on one thread
        want = 1 if threads == 1 else min(n, threads * CHUNKS_PER_THREAD)
        assert len(chunks) == want
        sizes = [hi - lo for lo, hi in chunks]
        assert max(sizes) - min(sizes) <= 1                 # even chunks


def test_plan_round_trips_through_json():
    kernel = printing[4].trace(A[:, :8])
    from nki_lite.lower.llvm.codegen import generate
    plan = generate(kernel).plan
    assert plan.sites                                   # the print site
    assert LaunchPlan.from_json(plan.to_json(kernel), kernel) == plan


def test_runtime_executes_the_plan_without_re_deriving_it(monkeypatch):
    """Once compiled, launching (first call, cached call, several threads) asks no analysis."""
    from nki_lite.lower import analysis, parallel
    from nki_lite.lower.analysis import coverage, dependence
    from nki_lite.runtime import jit
    monkeypatch.setenv("NKI_LITE_MODE", "jit")
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "2")
    jit.CACHE.clear()
    k = nki.jit(spmd_add.fn)[4, 1]
    k.trace(A, A)                                        # traced (and verified) before the analyses go
    ck, _ = jit.compiled_for(k.trace(A, A), debug=config.get("NKI_LITE_DEBUG"))    # what calls will look up

    def no(*a, **kw):
        raise AssertionError("the runtime re-derived the launch plan")
    for mod, name in ((analysis, "of"), (dependence, "programs_independent"), (dependence, "program_space"),
                      (parallel, "regions"), (coverage, "fully_written")):
        monkeypatch.setattr(mod, name, no)
    kernel = k.trace(A, A)
    outs = ck.launch(dict(zip(kernel.params, (A, A))))
    assert np.array_equal(outs[kernel.outputs[0]], A + A)
    assert np.array_equal(k(A, A), A + A) and np.array_equal(k(A, A), A + A)    # general, then cached
    jit.CACHE.clear()


def test_import_nki_lite_does_not_load_llvmlite():
    code = "import sys, nki_lite; sys.exit('llvmlite' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_a_cached_call_keeps_its_machine_code_alive_after_the_jit_cache_drops_it():
    """The cached-call launcher holds raw entry points into the compiled module: when the JIT cache
    evicts the CompiledKernel (LRU, or CACHE.clear()) and the collector runs, the code must stay
    mapped for as long as a launcher can call it (it segfaulted before runtime/native.py held the
    module). Run in a subprocess so a crash is a failure, not a lost worker."""
    code = textwrap.dedent("""
        import gc, os
        import numpy as np
        os.environ["NKI_LITE_DISK_CACHE"] = "0"
        import nki_lite as nki
        from nki_lite.runtime import jit
        from nki_lite.stdlib.softmax_kernels import row_softmax
        from nki_lite.stdlib.reference import row_softmax_ref
        x = np.random.default_rng(0).standard_normal((130, 33)).astype(np.float32)
        for _ in range(3):
            row_softmax(x)                        # first call, then cached calls
            jit.CACHE.clear()
            for _ in range(3):
                gc.collect()
            np.testing.assert_allclose(row_softmax(x), row_softmax_ref(x), rtol=1e-5, atol=1e-6)
        print("alive")
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "alive" in r.stdout, (r.returncode, r.stderr[-2000:])
