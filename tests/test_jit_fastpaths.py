"""The JIT's speed paths keep every bit and every error: the compare-select max/min reduction with its
NaN flag and zero fallback (rules_reduce), the JIT-only passes (lower/passes/true_masks.py, forward_loads.py: always-true
masks dropped, loads forwarded to their readers), vscalefps for fp32math._ldexp (mathlib), and the
`out=` launch fast path (runtime/kernel.py)."""
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.lower.llvm import mathlib
from nki_lite.lower.passes.pipeline import run_backend
from nki_lite.lower.llvm.target import jit_supported

from .test_jit_differential import run_both

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")

F32 = np.float32


def _reduce_kernel(op):
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nisa.tensor_reduce(op, t, axis=1, keepdims=True))
        return out
    return k


def _bits(v):
    return np.array([v], np.uint32).view(F32)[0]


@pytest.mark.parametrize("op", [np.max, np.min])
@pytest.mark.parametrize("cols", [16 * 8, 16 * 8 + 16 * 3, 16 * 33 + 5, 16 * 5])
def test_extreme_reduction_special_rows(op, cols):
    """Rows whose lanes hit every case: NaN (quiet, signalling, negative) in one lane, results +0/-0
    with both zero signs in a lane in either order, all -0, infinities, subnormals."""
    rng = np.random.default_rng(cols)
    rows = []
    base = lambda: rng.standard_normal(cols).astype(F32)       # noqa: E731
    for nan in (np.nan, _bits(0x7F800001), _bits(0xFFC00123)):
        for pos in (0, 5, cols - 1, cols // 2):
            r = base()
            r[pos] = nan
            rows.append(r)
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        for pos in (0, 17, cols - 2):
            r = -np.abs(base()) - 1 if op is np.max else np.abs(base()) + 1
            r[pos], r[(pos + 16) % cols] = first, second
            rows.append(r)
    rows.append(np.full(cols, -0.0, F32))
    rows.append(np.full(cols, 0.0, F32))
    r = base()
    r[3] = np.inf
    r[9] = -np.inf
    rows.append(r)
    rows.append(np.full(cols, -np.inf, F32))
    rows.append((base() * 1e-40).astype(F32))
    x = np.stack(rows + [base() for _ in range(128 - len(rows))])[:128].astype(F32)
    ref, = run_both(_reduce_kernel(op), [x])
    np.testing.assert_array_equal(np.isnan(ref), np.isnan(x).any(axis=1, keepdims=True))
    finite = ~np.isnan(x).any(axis=1)
    np.testing.assert_array_equal(ref[finite, 0], op(x[finite], axis=1))


def test_extreme_reduction_zero_sign_is_order_free():
    """+0 and -0 in the same lane, in both orders and in different lanes: max is +0, min is -0."""
    x = np.full((128, 256), -1.0, F32)
    x[0, 0], x[0, 16] = 0.0, -0.0
    x[1, 0], x[1, 16] = -0.0, 0.0
    x[2, 3], x[2, 200] = -0.0, 0.0
    x[3, :] = -0.0
    got = _reduce_kernel(np.max)(x)
    assert [np.signbit(v) for v in got[:4, 0]] == [False, False, False, True]
    y = -x
    got = _reduce_kernel(np.min)(y)
    assert [np.signbit(v) for v in got[:4, 0]] == [True, True, True, False]


# ---------------------------------------------------------------- lower/passes/true_masks.py, forward_loads.py

@nki.jit
def _softmax_like(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(128)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range((rows + 127) // 128):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        m = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True)
        e = nisa.activation(op=nl.exp, data=t, bias=m)
        nl.store(out[i * 128 + ip, ic], value=e, mask=valid)
    return out


def _ops(kernel):
    return [(i.op, i.mask is not None, bool(i.attr("forwarded"))) for i, _ in ir.walk(kernel.body)]


def test_true_masks_dropped_and_load_forwarded():
    x = np.random.default_rng(1).standard_normal((256, 64)).astype(F32)
    k, origin = run_backend(_softmax_like.trace(x), "llvm")
    ops = _ops(k)
    assert ("dma_copy", False, True) in ops                     # the load: a bounds check only
    assert not any(masked for _, masked, _ in ops)              # 256 rows: every mask holds
    red = next(i for i, _ in ir.walk(k.body) if i.op == "tensor_reduce")
    assert red.ins[0].buffer == "x"                             # reads the source directly
    assert origin[id(red)].ins[0].buffer == "t"                 # and maps back to the traced instruction
    run_both(_softmax_like, [x])


def test_ragged_rows_keep_their_masks_and_copies():
    x = np.random.default_rng(2).standard_normal((200, 48)).astype(F32)
    k, _ = run_backend(_softmax_like.trace(x), "llvm")
    ops = _ops(k)
    assert ("dma_copy", True, False) in ops                     # 200 rows: the load stays masked and real
    run_both(_softmax_like, [x])


def test_no_forwarding_from_a_written_tensor():
    """The source is written after the load: later readers of the copy must see the old values."""
    import nki_lite.typing as nt

    @nki.jit
    def k(x: nt.mutable_tensor):
        out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x[0:128, 0:32])
        nl.store(x[0:128, 0:32], nl.add(t, 1.0))
        nl.store(out, nl.multiply(t, 3.0))
        return x, out
    x = np.random.default_rng(3).standard_normal((128, 32)).astype(F32)
    kern, _ = run_backend(k.trace(x), "llvm")
    assert not any(f for _, _, f in _ops(kern))
    ref = run_both(k, [x])
    np.testing.assert_array_equal(ref[1], x * F32(3))


def test_forwarded_load_still_fails_at_its_line():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.load(x[i * 128:(i + 1) * 128, 0:32])          # i = 1 reads past row 127
            nl.store(out, nl.exp(t))
        return out
    x = np.zeros((128, 32), F32)
    with pytest.raises(errors.NkiLiteError) as e_jit:
        k(x, mode="jit")
    with pytest.raises(errors.NkiLiteError) as e_int:
        k(x, mode="interpret")
    assert "t = nl.load(x[i * 128" in str(e_jit.value)
    assert str(e_jit.value).splitlines()[0] == str(e_int.value).splitlines()[0]


# ---------------------------------------------------------------- vscalefps for _ldexp

_LDEXP_USERS = ("exp", "tanh", "sigmoid", "silu", "silu_dx", "softplus", "mish", "gelu_apprx_tanh", "gelu", "erf")


def _math_kernel_pair(name, configs=((True, False), (False, False))):
    """Compiled 16-wide versions of one fp32math function, one per (scalef, canonical) config
    (default: vscalefps and the integer form)."""
    from nki_lite.lower.llvm.target import compile_module
    texts, names = [], []
    for sc, canonical in configs:
        fname, text = mathlib.function(name, 16, sc, canonical)
        texts.append(text)
        names.append(fname)
    decls = sorted({ln for t in texts for ln in t.splitlines() if ln.startswith("declare ")})
    bodies = ["\n".join(ln for ln in t.splitlines() if not ln.startswith("declare ")) for t in texts]
    drv = []
    for j, fname in enumerate(names):
        drv.append(f"""define void @drv{j}(ptr %src, ptr %dst, i64 %n) {{
entry:
  br label %h
h:
  %i = phi i64 [ 0, %entry ], [ %i2, %b ]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %b, label %x
b:
  %p = getelementptr inbounds <16 x float>, ptr %src, i64 %i
  %v = load <16 x float>, ptr %p, align 4
  %r = call <16 x float> @{fname}(<16 x float> %v)
  %q = getelementptr inbounds <16 x float>, ptr %dst, i64 %i
  store <16 x float> %r, ptr %q, align 4
  %i2 = add i64 %i, 1
  br label %h
x:
  ret void
}}""")
    mod = compile_module("\n".join(bodies + drv + decls) + "\n", f"scalef_{name}", opt=2)
    import ctypes
    fns = [ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(mod.address(f"drv{j}"))
           for j in range(len(configs))]
    return mod, fns


@pytest.mark.skipif(not mathlib.scalef_available(), reason="host has no AVX-512")
@pytest.mark.parametrize("name", _LDEXP_USERS)
def test_scalef_ldexp_same_bits(name):
    """Every 2^32 / 4099-th float32 bit pattern plus a dense sweep of the under/overflow edges
    (the full 2^32 sweep is in the slow profile)."""
    from nki_lite.numerics import fp32math
    if name not in fp32math.FUNCTIONS:
        pytest.skip(f"{name} is not an fp32math function")
    mod, (fast, ref) = _math_kernel_pair(name)
    edges = np.concatenate([np.linspace(-130, 130, 1 << 20, dtype=F32),
                            np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(F32)])
    edges = edges[: len(edges) // 16 * 16].copy()
    a, b = np.empty_like(edges), np.empty_like(edges)
    fast(edges.ctypes.data, a.ctypes.data, len(edges) // 16)
    ref(edges.ctypes.data, b.ctypes.data, len(edges) // 16)
    bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    assert bad.size == 0, f"{name}: {bad.size} differ, e.g. x={edges[bad[:3]]}"
    if name == "exp":            # fp32math.exp's _finish_never_nan: no NaN from a non-NaN input
        assert not np.any(np.isnan(a) & ~np.isnan(edges))
    interp = fp32math.FUNCTIONS[name](edges[::64].copy())
    np.testing.assert_array_equal(a[::64].view(np.uint32), interp.view(np.uint32))
    del mod


@pytest.mark.parametrize("name", sorted(__import__("nki_lite.numerics.fp32math", fromlist=["x"]).FUNCTIONS))
def test_canonical_math_is_the_function_then_nan_canonicalisation(name):
    """mathlib.function(..., canonical=True) (used by activation, which canonicalises NaNs) equals
    the function followed by NaN -> +0x7FC00000, on NaNs of every sign and payload and a sweep."""
    mod, (canon, plain) = _math_kernel_pair(name, ((None, True), (None, False)))
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00001, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32)
    x = np.concatenate([nans, np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32)]).view(F32)
    x = np.concatenate([x, np.linspace(-200, 200, 1 << 16, dtype=F32)])
    x = x[: len(x) // 16 * 16].copy()
    a, b = np.empty_like(x), np.empty_like(x)
    canon(x.ctypes.data, a.ctypes.data, len(x) // 16)
    plain(x.ctypes.data, b.ctypes.data, len(x) // 16)
    want = np.where(np.isnan(b), np.array([0x7FC00000], np.uint32).view(F32)[0], b)
    bad = np.flatnonzero(a.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{name}: {bad.size} differ, e.g. x bits {x[bad[:3]].view(np.uint32)}"
    del mod


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NKI_LITE_SLOW_TESTS") != "1", reason="slow exhaustive profile: set NKI_LITE_SLOW_TESTS=1")
@pytest.mark.skipif(not mathlib.scalef_available(), reason="host has no AVX-512")
@pytest.mark.parametrize("name", _LDEXP_USERS)
def test_scalef_ldexp_same_bits_exhaustive(name):
    from nki_lite.numerics import fp32math
    if name not in fp32math.FUNCTIONS:
        pytest.skip(f"{name} is not an fp32math function")
    mod, (fast, ref) = _math_kernel_pair(name)
    chunk = 1 << 24
    a, b = np.empty(chunk, F32), np.empty(chunk, F32)
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(F32)
        fast(x.ctypes.data, a.ctypes.data, chunk // 16)
        ref(x.ctypes.data, b.ctypes.data, chunk // 16)
        bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
        assert bad.size == 0, f"{name}: bit patterns 0x{start + int(bad[0]):08x}... differ"
        if name == "exp":        # fp32math.exp's _finish_never_nan: no NaN from a non-NaN input
            assert not np.any(np.isnan(a) & ~np.isnan(x)), f"exp: NaN from a number near 0x{start:08x}"
    del mod


# ---------------------------------------------------------------- out= fast path

@nki.jit
def _twice(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def test_out_fast_path_hits_and_checks_every_call():
    x = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    o = np.empty_like(x)
    _twice(x, out=o)
    before = _twice.cache_info()["hits"]
    for _ in range(3):
        o[...] = 0
        r = _twice(x, out=o)
        assert r is o
        np.testing.assert_array_equal(o, x * 2)
    assert _twice.cache_info()["hits"] == before + 3
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(errors.NkiLiteError, match="writable"):
        _twice(x, out=ro)
    with pytest.raises(errors.NkiLiteError, match="overlaps"):
        _twice(x, out=x)
    o2 = np.empty_like(x)                                        # another array of the same signature
    _twice(x, out=o2)
    np.testing.assert_array_equal(o2, x * 2)


# ---------------------------------------------------------------- property test over the fast paths

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _pattern_kernel(op, negate, with_prologue, use_bias, reduce_out):
    """prologue weights (optional) + affine loop over row tiles: load -> max/min reduce -> activation
    with the reduced value as bias (optional) -> store, masked on ragged rows."""
    @nki.jit
    def k(x, w):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm) if reduce_out else None
        rows, cols = x.shape
        ip = nl.arange(128)[:, None]
        ic = nl.arange(cols)[None, :]
        if with_prologue:
            wt = nl.load(w)
        for i in nl.affine_range((rows + 127) // 128):
            valid = i * 128 + ip < rows
            t = nl.load(x[i * 128 + ip, ic], mask=valid)
            m = nisa.tensor_reduce(op, t, axis=1, negate=negate, keepdims=True, mask=valid)
            if use_bias:
                e = nisa.activation(op=nl.exp, data=t, bias=m, mask=valid)
            else:
                e = nl.multiply(t, 2.0, mask=valid)
            if with_prologue:
                e = nl.add(e, wt, mask=valid)
            nl.store(out[i * 128 + ip, ic], value=e, mask=valid)
            if reduce_out:
                nl.store(red[i * 128 + ip, 0], value=m, mask=valid)
        return (out, red) if reduce_out else out
    return k


_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38], F32)


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(rows=st.sampled_from([128, 256, 200, 77]), cols=st.sampled_from([16, 64, 200, 257]),
       op=st.sampled_from([np.max, np.min]), negate=st.booleans(), with_prologue=st.booleans(),
       use_bias=st.booleans(), reduce_out=st.booleans(), dtype=st.sampled_from(["float32", "bfloat16"]),
       specials=st.integers(0, 12), threads=st.sampled_from(["1", "3"]), opt=st.sampled_from(["0", "2"]),
       seed=st.integers(0, 2 ** 16))
def test_fast_paths_agree_with_the_interpreter(rows, cols, op, negate, with_prologue, use_bias, reduce_out,
                                               dtype, specials, threads, opt, seed):
    import ml_dtypes
    saved = {k: os.environ.get(k) for k in ("NKI_LITE_NUM_THREADS", "NKI_LITE_JIT_OPT")}
    os.environ["NKI_LITE_NUM_THREADS"] = threads
    os.environ["NKI_LITE_JIT_OPT"] = opt
    try:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((rows, cols)).astype(F32)
        for _ in range(specials):
            x[rng.integers(rows), rng.integers(cols)] = _SPECIALS[rng.integers(len(_SPECIALS))]
        if rng.random() < 0.3:
            x[rng.integers(rows), :] = rng.choice([0.0, -0.0], size=cols).astype(F32)
        if dtype == "bfloat16":
            x = x.astype(ml_dtypes.bfloat16)
        w = rng.standard_normal((128, cols)).astype(F32)
        run_both(_pattern_kernel(op, negate, with_prologue, use_bias, reduce_out), [x, w])
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
