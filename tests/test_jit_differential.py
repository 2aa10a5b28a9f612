"""The LLVM JIT against the interpreter (the definition), bit for bit, plus the JIT driver's contract.

- Generated kernels (tests/kernelgen.py): every output (NaN payloads included) of the JIT equals the
  interpreter's, at NKI_LITE_JIT_OPT=0 and 2 with NKI_LITE_DEBUG=1 (new tiles NaN-filled in both), and
  with NKI_LITE_DEBUG=0 for kernels that never read uninitialised memory.
- Every stdlib kernel and every kernel of tests/kernels/{patterns,matmul_tutorial}.py, at OPT=2.
- The compile cache: one compile per signature (shapes, dtypes, constants), process-wide counts,
  a bounded number of compiled modules and traces, evicted machine code garbage-collected.
- Threads: concurrent first calls compile once; concurrent launches of a cached kernel are correct.
- Runtime bounds errors (IR that skipped the verifier): the JIT names the same line and loop values.
- Argument handling: non-contiguous / Fortran / unaligned arrays are copied with one warning per
  argument name; read-only arrays are refused for nt.mutable_tensor parameters.

The JIT disk cache is switched off here (NKI_LITE_DISK_CACHE=0): these tests are about the code
generator and about LLVM compiles in this process. The generated examples are derandomized (the same
cases every run); NKI_LITE_HYPOTHESIS_SCALE=k runs k times as many, randomly, and NKI_LITE_SHRINK=1
shrinks a failure. A failing generated case prints as the kernel's source; minimal repros of the bugs the
generator found are in tests/test_jit_regressions.py (open ones in kernelgen.KNOWN_BUGS).
"""
from __future__ import annotations

import gc
import os
import threading
import warnings
import weakref

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.lower.llvm import target as llvm_target
from nki_lite.runtime import jit as J
from nki_lite.runtime.notices import NkiLitePerformanceWarning

from . import kernelgen as KG

pytestmark = pytest.mark.skipif(not llvm_target.jit_supported(), reason="no LLVM JIT on this host")

F32 = np.float32
BF16 = ml_dtypes.bfloat16
HERE = os.path.abspath(__file__)
_SCALE = max(1, int(os.environ.get("NKI_LITE_HYPOTHESIS_SCALE", "1")))
_PHASES = (tuple(Phase) if os.environ.get("NKI_LITE_SHRINK") == "1"
           else (Phase.explicit, Phase.reuse, Phase.generate))


@pytest.fixture(autouse=True)
def _jit_env(monkeypatch):
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    monkeypatch.setenv("NKI_LITE_DEBUG", "1")
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "0")


def line_of(marker: str) -> int:
    src = open(HERE).read().splitlines()
    hits = [i + 1 for i, s in enumerate(src) if s.rstrip().endswith("# " + marker)]
    assert len(hits) == 1, hits
    return hits[0]


def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype == np.bool_:
        return x.view(np.uint8)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def assert_same_bits(interp: np.ndarray, jit: np.ndarray, what: str = "output", context: str = "") -> None:
    assert interp.dtype == jit.dtype and interp.shape == jit.shape, \
        f"{what}: interpreter {interp.dtype}{interp.shape} vs JIT {jit.dtype}{jit.shape}\n{context}"
    a, b = bits(interp), bits(jit)
    if np.array_equal(a, b):
        return
    bad = np.argwhere(a != b)
    lines = [f"{what}: {len(bad)} of {a.size} elements differ (interpreter vs JIT, as bits and values):"]
    for ix in bad[:6]:
        ix = tuple(int(i) for i in ix)
        lines.append(f"  {ix}: 0x{int(a[ix]):x} ({interp[ix]!r}) vs 0x{int(b[ix]):x} ({jit[ix]!r})")
    raise AssertionError("\n".join(lines) + ("\n" + context if context else ""))


def as_tuple(r) -> tuple:
    return r if isinstance(r, tuple) else (() if r is None else (r,))


def run_both(kernel, args, context: str = "") -> tuple:
    """Run on both backends with private copies of the arguments; outputs (and mutated arguments) must
    agree bit for bit. Returns the interpreter's outputs."""
    a_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    j_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = as_tuple(kernel(*a_args, mode="interpret"))
            got = as_tuple(kernel(*j_args, mode="jit"))
        except Exception as e:
            if context:
                e.add_note(context)
            raise
    assert len(ref) == len(got)
    for k, (x, y) in enumerate(zip(ref, got)):
        assert_same_bits(x, y, f"output {k}", context)
    for k, (x, y) in enumerate(zip(a_args, j_args)):
        if isinstance(x, np.ndarray):
            assert_same_bits(x, y, f"argument {k} after the call", context)
    return ref


def gen_settings(n: int):
    return settings(max_examples=n * _SCALE, deadline=None, database=None, derandomize=_SCALE == 1,
                    phases=_PHASES, suppress_health_check=list(HealthCheck))


def _run_generated(n: int, init_full: bool = False, nested_affine: bool = False) -> None:
    KG.STATS.reset()

    @gen_settings(n)
    @given(case=KG.kernels(init_full=init_full, nested_affine=nested_affine))
    def prop(case):
        run_both(case.kernel, case.args, context=repr(case))

    prop()
    assert KG.STATS.generated >= n * _SCALE, KG.STATS.summary()
    assert KG.STATS.drop_rate < 0.2, KG.STATS.summary()


# ================================================================================ generated kernels

def test_generated_kernels_bitwise_opt0():
    _run_generated(150)


def test_generated_kernels_bitwise_opt2(monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "2")
    _run_generated(40)


def test_generated_kernels_with_every_region_dispatched(monkeypatch):
    """Kernels with an affine loop inside a sequential one; every independent nested affine loop
    becomes a parallel region (lower/parallel.py `regions`, normally only loops with enough work),
    run on 3 threads."""
    from nki_lite.lower import parallel
    from nki_lite.runtime import jit
    monkeypatch.setattr(parallel, "REGION_MIN_ELEMENTS", 1)
    monkeypatch.setenv("NKI_LITE_NUM_THREADS", "3")
    jit.CACHE.clear()
    try:
        _run_generated(60, nested_affine=True)
    finally:
        jit.CACHE.clear()


def test_generated_kernels_without_debug_fill(monkeypatch):
    """NKI_LITE_DEBUG=0: the JIT does not NaN-fill new tiles; kernels that initialise what they read
    must still agree with the interpreter."""
    monkeypatch.setenv("NKI_LITE_DEBUG", "0")
    _run_generated(40, init_full=True)


def test_generator_drops_few_kernels_and_covers_the_surface():
    """The generator keeps producing real kernels: few drops, and (over a small sample) every op kind,
    loop kind, grid rank and input dtype family shows up."""
    KG.STATS.reset()
    cases = KG.sample(60)
    s = KG.STATS
    assert len(cases) >= 55 and s.drop_rate < 0.2, s.summary()
    text = "\n".join(c.source for c in cases)
    for needle in ("nl.affine_range", "nl.sequential_range", "nl.static_range", "nl.program_id(1)", "mask=",
                   "nisa.nc_matmul", "nl.load(", "nl.store(", "acc"):
        assert needle in text, needle
    assert len(s.ops) >= 15, s.summary()
    dts = set(s.dtypes)
    assert {"float32", "bfloat16", "int32"} <= dts, dts


# ================================================================================ stdlib & tutorial kernels

def _rng(seed):
    return np.random.default_rng(seed)


def _normal(seed, shape, dt=F32, scale=1.0):
    return (_rng(seed).standard_normal(shape) * scale).astype(F32).astype(dt)


def _library_cases():
    from nki_lite.stdlib import elementwise
    from nki_lite.stdlib import matmul_kernels as matmul, norm_kernels as norms, softmax_kernels as softmax

    from .kernels import matmul_tutorial as MT
    from .kernels.patterns import KERNELS as P, Act, TileConfig
    cases = {
        "stdlib.spmd_add[2,2]": (elementwise.spmd_add[2, 2], lambda: (_normal(1, (256, 1024)),
                                                                       _normal(2, (256, 1024)))),
        "stdlib.tiled_matmul.bf16": (matmul.tiled_matmul, lambda: (_normal(3, (256, 128), BF16),
                                                                    _normal(4, (256, 512), BF16))),
        "stdlib.tiled_matmul.f32": (matmul.tiled_matmul, lambda: (_normal(5, (128, 128)), _normal(6, (128, 512)))),
        "stdlib.tiled_matmul.fp8": (matmul.tiled_matmul, lambda: (_normal(7, (256, 128), ml_dtypes.float8_e4m3),
                                                                   _normal(8, (256, 512), ml_dtypes.float8_e4m3))),
        "stdlib.nl_matmul": (matmul.nl_matmul, lambda: (_normal(9, (128, 256), BF16), _normal(10, (256, 512), BF16))),
        "stdlib.rmsnorm": (norms.rmsnorm_tutorial, lambda: (_normal(11, (200, 96)), _normal(12, (96,)))),
        "stdlib.rmsnorm.bf16": (norms.rmsnorm_tutorial, lambda: (_normal(13, (130, 64), BF16), _normal(14, (64,), BF16))),
        "stdlib.row_softmax": (softmax.row_softmax, lambda: (_normal(15, (130, 33), scale=4.0),)),
        "patterns.layernorm": (P.layernorm, lambda: (_normal(16, (130, 600), scale=2.5), _normal(17, (600,)),
                                                     _normal(18, (600,)), 1e-5)),
        "patterns.layernorm.bf16": (P.layernorm, lambda: (_normal(19, (77, 96), BF16), _normal(20, (96,), BF16),
                                                          _normal(21, (96,), BF16), 1e-5)),
        "patterns.selective_scan": (P.selective_scan, lambda: (
            np.abs(_normal(22, (1, 128, 32), scale=0.1)), _normal(23, (1, 128, 32)), -np.abs(_normal(24, (128, 2))),
            _normal(25, (1, 2, 32)), _normal(26, (1, 2, 32)), 16)),
        "patterns.block_transpose": (P.block_transpose, lambda: (_normal(27, (130, 200)),)),
        "patterns.causal_attention": (P.causal_attention, lambda: (_normal(28, (256, 64)), _normal(29, (256, 64)),
                                                                   _normal(30, (256, 64)), nl.bfloat16)),
        "patterns.avgpool2d": (P.avgpool2d, lambda: (_normal(31, (130, 8, 12)), 2)),
        "patterns.configured.tanh": (P.configured, lambda: (_normal(32, (70, 40)), TileConfig(32, 0.5), Act.TANH)),
        "patterns.configured.silu": (P.configured, lambda: (_normal(33, (70, 40)), TileConfig(64, 1.5), Act.SILU)),
        "patterns.axpy_inplace": (P.axpy_inplace, lambda: (_normal(34, (130, 64)), _normal(35, (130, 64)), 0.75)),
        "matmul_tutorial.tiled": (MT.mm_tiled, lambda: (_normal(36, (256, 128), BF16), _normal(37, (256, 512), BF16))),
        "matmul_tutorial.hoisted": (MT.mm_hoisted, lambda: (_normal(38, (256, 128), BF16),
                                                            _normal(39, (256, 512), BF16))),
        "matmul_tutorial.block_free": (MT.mm_block_free, lambda: (_normal(40, (128, 256), BF16),
                                                                  _normal(41, (128, 1024), BF16))),
        "matmul_tutorial.optimized": (MT.mm_optimized, lambda: (_normal(42, (512, 128), BF16),
                                                                _normal(43, (512, 512), BF16), 1, 1, 2)),
    }
    return cases


_LIBRARY = sorted(_library_cases())


@pytest.mark.parametrize("name", _LIBRARY)
def test_library_kernels_bitwise_at_opt2(name, monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "2")
    kernel, make_args = _library_cases()[name]
    out = run_both(kernel, make_args(), context=name)
    assert all(not np.all(np.isnan(o.astype(np.float64))) for o in out)


# ---- hand-written hazards for the JIT's elementwise fusion and in-place updates (lower/llvm/fusion.py)

@nki.jit
def _hz_view_of_fused_intermediate(x):
    o1 = nl.ndarray((8, 1), nl.float32, buffer=nl.shared_hbm)
    o2 = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    a = nl.exp(nl.load(x))
    b = nl.add(a, 1.0)
    nl.store(o1, nl.sum(a[:, 0:3], axis=1, keepdims=True))      # a is read outside the run too
    nl.store(o2, b)
    return o1, o2


@nki.jit
def _hz_write_after_read_in_a_chain(x):
    o = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.add(a, 1.0)
    a[...] = nl.multiply(a, 2.0)
    nl.store(o, nl.add(b, a))
    return o


@nki.jit
def _hz_masked_chain_then_full_read(x):
    o = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    ip = nl.arange(8)[:, None]
    a = nl.exp(nl.load(x), mask=(ip < 5))
    b = nl.add(a, 1.0, mask=(ip < 5))
    nl.store(o, nl.multiply(a, b))                  # reads the masked-off (NaN-filled) rows of a and b
    return o


@nki.jit
def _hz_carried_across_iterations(x):
    o = nl.ndarray((8, 16), nl.float32, buffer=nl.shared_hbm)
    h = nl.zeros((8, 16), nl.float32)
    for i in nl.sequential_range(3, -1, -1):
        u = nl.add(h, nl.load(x[i * 8:(i + 1) * 8, :]))
        h[...] = nl.multiply(u, 0.5)
    nl.store(o, h)
    return o


@nki.jit
def _hz_psum_updated_in_place(x, w):
    o = nl.ndarray((16, 32), nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((16, 32), nl.float32, buffer=nl.psum)
    ps += nisa.nc_matmul(nl.load(w), nl.load(x))
    a = nl.exp(ps)
    ps[...] = nl.add(ps, a)
    nl.store(o, nl.multiply(ps, a))
    return o


@nki.jit
def _hz_views_of_one_tile(x):
    o = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    a = nl.ndarray((8, 16), nl.float32)
    a[:, 0:8] = nl.exp(t[:, 0:8])
    a[:, 8:16] = nl.add(a[:, 0:8], t[:, 8:16])
    nl.store(o, nl.multiply(a[:, 8:16], a[:, 0:8]))
    return o


@nki.jit
def _hz_overlapping_read_and_write(x):
    o = nl.ndarray((8, 15), nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    a[:, 1:16] = nl.add(a[:, 0:15], 1.0)            # one instruction reads what it overwrites
    nl.store(o, nl.multiply(a[:, 1:16], 2.0))
    return o


_HAZARDS = {
    "view_of_fused_intermediate": (_hz_view_of_fused_intermediate, ((8, 16),)),
    "write_after_read_in_a_chain": (_hz_write_after_read_in_a_chain, ((8, 16),)),
    "masked_chain_then_full_read": (_hz_masked_chain_then_full_read, ((8, 16),)),
    "carried_across_iterations": (_hz_carried_across_iterations, ((32, 16),)),
    "psum_updated_in_place": (_hz_psum_updated_in_place, ((8, 32), (8, 16))),
    "views_of_one_tile": (_hz_views_of_one_tile, ((8, 16),)),
    "overlapping_read_and_write": (_hz_overlapping_read_and_write, ((8, 16),)),
}


@pytest.mark.parametrize("name", sorted(_HAZARDS))
@pytest.mark.parametrize("opt", ["0", "2"])
def test_fusion_and_in_place_hazards(name, opt, monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)
    kernel, shapes = _HAZARDS[name]
    run_both(kernel, [_normal(80 + k, s) for k, s in enumerate(shapes)], context=name)


def test_device_print_output_is_identical(capsys):
    @nki.jit
    def printing(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2, -1, -1):
            t = nl.load(x[i:i + 1, :])
            nl.device_print("row", t)
            nl.device_print("masked", t, mask=(nl.arange(1)[:, None] + i < 2))
            nl.store(out[i:i + 1, :], nl.exp(t))
        return out

    x = np.arange(18, dtype=F32).reshape(3, 6)
    texts, results = {}, {}
    for mode in ("interpret", "jit"):
        results[mode] = printing(x, mode=mode)
        texts[mode] = capsys.readouterr().out
    assert texts["interpret"].count("row") == 3 and texts["jit"] == texts["interpret"]
    assert_same_bits(results["interpret"], results["jit"])


# ================================================================================ the compile cache

def test_same_signature_compiles_once():
    @nki.jit
    def scaled_rows(x, factor):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.multiply(nl.exp(t), factor, dtype=x.dtype))
        return out

    x = _normal(50, (32, 48))
    before = J.CACHE.compiles
    outs = [scaled_rows(x, 2.0, mode="jit") for _ in range(5)]
    info = scaled_rows.cache_info()
    assert info["compiles"] == 1 and info["traces"] == 1 and info["hits"] == 4 and info["misses"] == 1, info
    assert J.CACHE.compiles == before + 1
    assert all(np.array_equal(bits(o), bits(outs[0])) for o in outs)
    assert_same_bits(scaled_rows(x, 2.0, mode="interpret"), outs[0])
    # new data, same signature: no compile; the interpreter never compiles
    y = scaled_rows(x + 1, 2.0, mode="jit")
    scaled_rows(x, 2.0, mode="interpret")
    assert scaled_rows.cache_info()["compiles"] == 1 and J.CACHE.compiles == before + 1
    assert_same_bits(scaled_rows(x + 1, 2.0, mode="interpret"), y)
    # a new shape, a new dtype, a new constant: one compile each
    scaled_rows(_normal(51, (32, 49)), 2.0, mode="jit")
    assert scaled_rows.cache_info()["compiles"] == 2
    scaled_rows(x.astype(BF16), 2.0, mode="jit")
    assert scaled_rows.cache_info()["compiles"] == 3
    scaled_rows(x, 3.0, mode="jit")
    assert scaled_rows.cache_info()["compiles"] == 4
    # ... and back to known signatures: no compile
    for args in ((x, 2.0), (_normal(52, (32, 49)), 2.0), (x.astype(BF16), 2.0), (x, 3.0)):
        scaled_rows(*args, mode="jit")
    assert scaled_rows.cache_info()["compiles"] == 4
    assert J.CACHE.compiles == before + 4


def test_debug_flag_and_opt_level_are_part_of_the_compile_key(monkeypatch):
    @nki.jit
    def masked_sum(x):
        out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.sum(t, axis=1, keepdims=True))
        return out

    x = _normal(53, (16, 40))
    r0 = masked_sum(x, mode="jit")
    monkeypatch.setenv("NKI_LITE_DEBUG", "0")
    r1 = masked_sum(x, mode="jit")
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "2")
    r2 = masked_sum(x, mode="jit")
    masked_sum(x, mode="jit")
    assert masked_sum.cache_info()["compiles"] == 3
    ref = masked_sum(x, mode="interpret")
    for r in (r0, r1, r2):
        assert_same_bits(ref, r)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_many_signatures_keep_memory_bounded(monkeypatch):
    """2000 distinct signatures: at most NKI_LITE_JIT_CACHE_SIZE compiled kernels and
    NKI_LITE_TRACE_CACHE_SIZE traces stay alive, evicted machine code is collected, and memory stops
    growing."""
    monkeypatch.setenv("NKI_LITE_JIT_CACHE_SIZE", "6")
    monkeypatch.setenv("NKI_LITE_TRACE_CACHE_SIZE", "5")
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "0")

    @nki.jit
    def row_copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    first_ck = first_module = None
    rss_1000 = None
    for n in range(1, 2001):
        x = np.full((1, n), n, dtype=F32)
        out = row_copy(x, mode="jit")
        assert out.shape == (1, n) and out[0, -1] == n
        if n == 1:
            first_ck = weakref.ref(next(reversed(J.CACHE.entries.values())))
            first_module = weakref.ref(first_ck().module)
            assert first_ck().kernel.name == "row_copy"
        assert len(J.CACHE.entries) <= 6
        assert len(row_copy._cache) <= 5
        if n == 1000:
            gc.collect()
            rss_1000 = _rss_bytes()
    gc.collect()
    growth = _rss_bytes() - rss_1000
    assert growth < 50 * 2 ** 20, f"RSS grew by {growth / 2 ** 20:.1f} MiB from signature 1000 to 2000"
    assert first_ck() is None, "the evicted CompiledKernel of the first signature is still alive"
    assert first_module() is None, "the evicted module (machine code) of the first signature is still alive"
    assert row_copy.cache_info()["compiles"] == 2000


# ================================================================================ threads

def _threaded_ref(a, b, w):
    s = a * F32(2) + b
    ab = a.astype(BF16).astype(F32)
    wf = w.astype(F32)
    acc = np.zeros((w.shape[1], a.shape[1]), F32)
    for k in range(a.shape[0]):
        acc = (acc + wf[k][:, None] * ab[k][None, :]).astype(F32)
    return s, s.max(axis=1, keepdims=True), acc


def _threaded_args(seed):
    r = _rng(seed)
    return (r.standard_normal((64, 96)).astype(F32), r.standard_normal((64, 96)).astype(F32),
            r.standard_normal((64, 24)).astype(BF16))


def test_threads_first_call_compiles_once_then_run_concurrently(monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "2")         # a slower compile: a wider race window

    @nki.jit
    def threaded_kernel(a, b, w):
        """out = 2a + b, its row max, and w^T @ bf16(a) accumulated in PSUM (uses per-thread scratch)."""
        P, F = a.shape
        M = w.shape[1]
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        mx = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        mm = nl.ndarray((M, F), dtype=nl.float32, buffer=nl.shared_hbm)
        ta = nl.load(a)
        s = nl.add(nl.multiply(ta, 2.0), nl.load(b))
        nl.store(out, s)
        nl.store(mx, nl.max(s, axis=1, keepdims=True))
        ps = nl.zeros((M, F), nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(nl.load(w), nl.copy(ta, dtype=nl.bfloat16))
        nl.store(mm, nl.copy(ps))
        return out, mx, mm

    kernel = threaded_kernel
    args = _threaded_args(60)
    before = J.CACHE.compiles
    barrier = threading.Barrier(8)
    results: list = [None] * 8
    failures: list = []

    def first(i):
        try:
            barrier.wait()
            results[i] = kernel(*args, mode="jit")
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=first, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert J.CACHE.compiles == before + 1
    assert kernel.cache_info()["compiles"] == 1, kernel.cache_info()
    ref = as_tuple(kernel(*args, mode="interpret"))
    for r in results:
        for x, y in zip(ref, r):
            assert_same_bits(x, y)
    for x, y in zip(_threaded_ref(*args), ref):
        assert_same_bits(x, y, "numpy reference vs interpreter")

    # 8 threads x 50 calls of the cached kernel, each with its own data
    bad: list = []

    def many(i):
        try:
            for k in range(50):
                a = _threaded_args(1000 * i + k)
                got = kernel(*a, mode="jit")
                for x, y in zip(_threaded_ref(*a), got):
                    if not np.array_equal(bits(x), bits(y)):
                        bad.append((i, k))
                        break
        except BaseException as e:  # noqa: BLE001
            bad.append((i, repr(e)))

    threads = [threading.Thread(target=many, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:5]
    assert J.CACHE.compiles == before + 1


# ================================================================================ runtime errors

def _unverified(k, args, grid=()):
    """The IR of k(*args) with the default passes but without `verify` (what a verifier bug would let
    through): the backends must bounds-check at run time on their own."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared
    return run_shared(trace(k.fn, k.bind(args, {}), grid, "trn2"))


def _oob_loop_kernel(masked: bool):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(4)[None, :]
        for i in nl.affine_range(2):
            for j in nl.sequential_range(3):
                if masked:
                    t = nl.load(x[j * 64 + ip, jf], mask=(j * 64 + ip < 250))  # MARK-OOB-MASKED
                else:
                    t = nl.load(x[j * 64 + ip, jf])  # MARK-OOB
                nl.store(out, t)
        return out
    return k


def _both_errors(kern, inputs):
    from nki_lite.runtime.interpreter import run
    with pytest.raises(errors.IndexOutOfBoundsError) as ei:
        run(kern, inputs)
    ck, _ = J.compiled_for(kern, debug=True)
    with pytest.raises(errors.IndexOutOfBoundsError) as ej:
        ck.launch(inputs)
    return ei.value, ej.value


def _when(e) -> str:
    msg = e.message
    return msg.split(" when ", 1)[1] if " when " in msg else ""


@pytest.mark.parametrize("masked", [False, True])
def test_runtime_bounds_error_names_line_and_loop_values(masked):
    x = np.zeros((200, 4), F32)
    k = _oob_loop_kernel(masked)
    ie, je = _both_errors(_unverified(k, (x,)), {"x": x})
    line = line_of("MARK-OOB-MASKED" if masked else "MARK-OOB")
    for e in (ie, je):
        assert e.loc.line == line and e.loc.file == HERE, str(e)
        assert "'x'" in e.message and "exceeds [0, 199]" in e.message, e.message
    assert _when(ie) == _when(je) == "i0=0, i1=2", (ie.message, je.message)
    if not masked:
        assert ie.message == je.message
        assert "[128, 255]" in je.message


def test_runtime_bounds_error_in_an_spmd_program_names_the_program():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(4)[None, :]
        t = nl.load(x[nl.program_id(0) * 100 + ip, jf])  # MARK-OOB-PID
        nl.store(out, t)
        return out

    x = np.zeros((200, 4), F32)
    ie, je = _both_errors(_unverified(k, (x,), grid=(2,)), {"x": x})
    for e in (ie, je):
        assert e.loc.line == line_of("MARK-OOB-PID")
    assert _when(ie) == _when(je) == "pid0=1"
    assert ie.message == je.message


# ================================================================================ arguments

def test_noncontiguous_fortran_and_unaligned_arguments_are_copied_once_warned():
    @nki.jit
    def combine(nc_strided_arg, nc_fortran_arg, nc_unaligned_arg):
        out = nl.ndarray(nc_strided_arg.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(nc_strided_arg)
        b = nl.load(nc_fortran_arg)
        c = nl.load(nc_unaligned_arg)
        nl.store(out, nl.add(nl.multiply(a, b), c))
        return out

    r = _rng(70)
    big = r.standard_normal((24, 80)).astype(F32)
    strided = big[:, ::2]
    fortran = np.asfortranarray(r.standard_normal((24, 40)).astype(F32))
    raw = np.zeros(24 * 40 * 4 + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=F32, count=24 * 40, offset=1).reshape(24, 40)
    unaligned[...] = r.standard_normal((24, 40)).astype(F32)
    assert not strided.flags.c_contiguous and not fortran.flags.c_contiguous and not unaligned.flags.aligned

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = combine(strided, fortran, unaligned, mode="jit")
    perf = [w for w in rec if issubclass(w.category, NkiLitePerformanceWarning)]
    named = sorted(n for n in ("nc_strided_arg", "nc_fortran_arg", "nc_unaligned_arg")
                   for w in perf if f"'{n}'" in str(w.message))
    assert named == ["nc_fortran_arg", "nc_strided_arg", "nc_unaligned_arg"], [str(w.message) for w in perf]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        again = combine(strided, fortran, unaligned, mode="jit")
    assert not [w for w in rec if issubclass(w.category, NkiLitePerformanceWarning)], "warned twice"
    contiguous = combine(np.ascontiguousarray(strided), np.ascontiguousarray(fortran), unaligned.copy(), mode="jit")
    for x in (got, again):
        assert_same_bits(contiguous, x)
    assert_same_bits(combine(strided, fortran, unaligned, mode="interpret"), got)
    assert combine.cache_info()["compiles"] == 1
    # a dtype that differs from the kernel's is a different signature, never a copy; a byte-swapped
    # array (the one "same dtype, other layout" case numpy has) is refused
    with pytest.raises(errors.ArgumentError):
        combine(strided.astype(">f4"), fortran, unaligned, mode="jit")


def _bump_kernel():
    """A fresh kernel that adds x into its mutable parameter `mut_y` and returns it."""
    @nki.jit
    def bump(mut_y: nt.mutable_tensor, x):
        t = nl.load(mut_y)
        nl.store(mut_y, nl.add(t, nl.load(x)))
        return mut_y
    return bump


def test_noncontiguous_mutable_parameter_is_written_back():
    bump = _bump_kernel()

    base = np.arange(16 * 20, dtype=F32).reshape(16, 20)
    view = base[:, ::2]
    x = np.ones((16, 10), F32)
    expect = view + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NkiLitePerformanceWarning)
        out = bump(view, x, mode="jit")
    assert np.array_equal(view, expect) and np.array_equal(out, expect)
    assert np.array_equal(base[:, 1::2], np.arange(16 * 20, dtype=F32).reshape(16, 20)[:, 1::2])


def test_read_only_mutable_parameter_is_refused_by_the_jit():
    bump_ro = _bump_kernel()

    y = np.zeros((8, 8), F32)
    y.setflags(write=False)
    with pytest.raises(errors.ArgumentError) as ei:
        bump_ro(y, np.ones((8, 8), F32), mode="jit")
    assert "read-only" in str(ei.value) and "mut_y" in str(ei.value)
    assert np.all(y == 0)
    # a read-only array is fine where the kernel does not write
    x = np.ones((8, 8), F32)
    x.setflags(write=False)
    w = np.zeros((8, 8), F32)
    assert np.all(bump_ro(w, x, mode="jit") == 1) and np.all(w == 1)
