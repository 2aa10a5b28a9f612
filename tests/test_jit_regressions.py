"""Minimal repros of JIT / interpreter disagreements found by tests/kernelgen.py and the differential tests.

Each test states the contract it checks: a kernel that traces runs on both backends with the same
results bit for bit (or is rejected at trace time with an NkiLiteError, which is a fine fix too), and
both backends treat arguments the same way. Every test here failed when its bug was found; they stay
as regression tests. A bug that is found but not fixed yet also gets an entry in kernelgen.KNOWN_BUGS
(the generator can then steer around it with NKI_LITE_KERNELGEN_AVOID_KNOWN=1).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.lower.llvm import target as llvm_target

pytestmark = pytest.mark.skipif(not llvm_target.jit_supported(), reason="no LLVM JIT on this host")

F32 = np.float32


@pytest.fixture(autouse=True)
def _jit_env(monkeypatch):
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    monkeypatch.setenv("NKI_LITE_DEBUG", "1")
    monkeypatch.setenv("NKI_LITE_JIT_OPT", "0")


def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype == np.bool_:
        return x.view(np.uint8)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def assert_backends_agree(kernel, *args) -> None:
    """The contract: rejected at trace time, or both backends return the same bits (and neither crashes
    with something other than an NkiLiteError)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel.trace(*args)
    except errors.NkiLiteError:
        return
    outs, crashes = {}, []
    for mode in ("interpret", "jit"):
        call_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        try:
            r = kernel(*call_args, mode=mode)
        except errors.NkiLiteError as e:
            outs[mode] = ("error", type(e).__name__)
            continue
        except Exception as e:  # noqa: BLE001 - this is the bug being reported
            crashes.append(f"the {mode} backend crashed on a kernel that traced: {type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''}"
                           + (f" / {str(e).splitlines()[1].strip()}" if len(str(e).splitlines()) > 1 else ""))
            continue
        outs[mode] = ("ok", tuple(bits(o) for o in (r if isinstance(r, tuple) else (r,))),
                      tuple(bits(a) for a in call_args if isinstance(a, np.ndarray)))
    if crashes:
        pytest.fail("\n".join(crashes))
    i, j = outs["interpret"], outs["jit"]
    assert i[0] == j[0], f"interpreter {i[0]} vs JIT {j[0]}"
    if i[0] == "error":
        assert i[1] == j[1]
        return
    for k, (x, y) in enumerate(zip(i[1], j[1])):
        assert np.array_equal(x, y), f"output {k}: interpreter {x.ravel()[:8]} vs JIT {y.ravel()[:8]} (bits)"
    for k, (x, y) in enumerate(zip(i[2], j[2])):
        assert np.array_equal(x, y), f"argument {k} after the call: interpreter {x.ravel()[:8]} vs JIT {y.ravel()[:8]}"


# ---------------------------------------------------------------------------------------------------------
# Found by the generator: each fp32math function's LLVM text carried its own `declare @llvm.roundeven/
# floor/sqrt...`; two functions sharing an intrinsic in one kernel (exp and tanh, sin and cos, sqrt and
# rsqrt, ...) gave "invalid redefinition of function 'llvm.roundeven.f32'" (LLVM IR parsing error).

def _two_functions(f1, f2):
    @nki.jit
    def two_functions(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, getattr(nl, f2)(getattr(nl, f1)(t)))
        return out
    return two_functions


@pytest.mark.parametrize("f1,f2", [("exp", "tanh"), ("sigmoid", "gelu"), ("sin", "cos"), ("sqrt", "rsqrt")])
def test_two_transcendentals_sharing_an_llvm_intrinsic(f1, f2):
    x = np.linspace(-2, 2, 4 * 16, dtype=F32).reshape(4, 16)
    assert_backends_agree(_two_functions(f1, f2), np.abs(x) if "sqrt" in f1 + f2 else x)


# ---------------------------------------------------------------------------------------------------------
# Found by the generator: tensor_scalar_reduce whose tensor_scalar runs on the integer path (integer data
# and operand): the JIT's attached reduction emitted `fadd float %t, None` (LLVM IR parsing error).

def test_tensor_scalar_reduce_on_the_integer_path():
    @nki.jit
    def int_tsr(x):
        out = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray((4, 1), dtype=nl.float32)
        nisa.tensor_scalar_reduce(data=t, op0=np.add, operand0=1, reduce_op=np.add, reduce_res=r)
        nl.store(out, r)
        return out

    assert_backends_agree(int_tsr, np.arange(32, dtype=np.int32).reshape(4, 8))


# ---------------------------------------------------------------------------------------------------------
# Found by the generator: the frontend accepted a bitwise/shift op on integer tiles whose instruction then
# did not take the integer path (a float dtype=, uint32 with a signed type promoting to float32, a float
# operand of a two-op tensor_scalar): the interpreter raised KeyError('bitwise_or') from alu.FP32, the JIT
# NotImplementedError.

def _bitwise_float_dtype(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.bitwise_or(t, t, dtype=nl.float32))
    return out


def _uint32_xor_int_scalar(x):
    out = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, t ^ 3)                       # uint32 with an int32 scalar promotes to float32
    return out


def _uint32_and_int16(x, y):
    out = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    nl.store(out, nl.bitwise_and(nl.load(x), nl.load(y)))
    return out


def _tensor_scalar_float_then_shift(x):
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nisa.tensor_scalar(t, np.add, 0.5, op1=np.left_shift, operand1=1))
    return out


_U32 = np.arange(32, dtype=np.uint32).reshape(4, 8)


@pytest.mark.parametrize("fn,args", [
    (_bitwise_float_dtype, (np.arange(32, dtype=np.int32).reshape(4, 8),)),
    (_uint32_xor_int_scalar, (_U32,)),
    (_uint32_and_int16, (_U32, np.arange(32, dtype=np.int16).reshape(4, 8))),
    (_tensor_scalar_float_then_shift, (np.arange(32, dtype=np.int32).reshape(4, 8),)),
], ids=["bitwise_or_dtype_float32", "uint32_xor_int_scalar", "uint32_and_int16", "tensor_scalar_add_float_then_shift"])
def test_bitwise_op_off_the_integer_path(fn, args):
    assert_backends_agree(nki.jit(fn), *args)


# ---------------------------------------------------------------------------------------------------------
# Found by the generator (1 case in ~2000 at OPT=2): tensor_tensor_scan with op0 = op1 = maximum (or
# minimum), an integer data0 and a *signalling* NaN in data1. The interpreter's carry stays NaN:
# [5, nan, nan, nan]; at NKI_LITE_JIT_OPT >= 1 the JIT dropped it after one step: [5, nan, 7, 8] (OPT=0
# agreed; a float data0 or a quiet NaN agreed at every level).

_SNAN = np.array([0x7FA00000], np.uint32).view(F32)[0]


@pytest.mark.parametrize("op", [np.maximum, np.minimum], ids=["maximum", "minimum"])
@pytest.mark.parametrize("opt", ["0", "1", "2"])
def test_scan_carry_keeps_a_signalling_nan(op, opt, monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)

    @nki.jit
    def scan_minmax(x0, x1):
        out = nl.ndarray(x1.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        sc = nisa.tensor_tensor_scan(nl.load(x0), nl.load(x1), initial=0.0, op0=op, op1=op)
        nl.store(out, sc)
        return out

    x0 = np.array([[5, 6, 7, 8]], np.int16)
    x1 = np.array([[1.0, _SNAN, 2.0, 3.0]], F32)
    assert_backends_agree(scan_minmax, x0, x1)


# ---------------------------------------------------------------------------------------------------------
# Aliasing: the interpreter copies every input before running (and writes mutable parameters back at
# the end), the JIT works on the caller's buffers. When the same array was passed as an nt.mutable_tensor
# parameter and as another input, the JIT read values it had already overwritten (rows 0, 0, 0, 0).

def test_mutable_parameter_aliasing_another_input():
    @nki.jit
    def shift_rows_down(y: nt.mutable_tensor, x):
        for i in nl.sequential_range(3):
            nl.store(y[i + 1:i + 2, :], nl.load(x[i:i + 1, :]))
        return y

    a = np.arange(32, dtype=F32).reshape(4, 8)
    results = {}
    for mode in ("interpret", "jit"):
        arr = a.copy()
        shift_rows_down(arr, arr, mode=mode)
        results[mode] = arr
    # interpreter: y[1:4] = old x[0:3] -> rows 0, 0, 1, 2 of the original
    assert np.array_equal(results["interpret"][:, 0], [0, 0, 8, 16])
    assert np.array_equal(results["jit"], results["interpret"]), results["jit"][:, 0]


# ---------------------------------------------------------------------------------------------------------
# Read-only arrays passed as nt.mutable_tensor parameters: the JIT refused a contiguous one with
# ArgumentError before running, but the interpreter ran and failed in np.copyto with a bare ValueError, and
# so did the JIT for a read-only *non-contiguous* one (it checked writeability after copying it).

@nki.jit
def _bump(y: nt.mutable_tensor, x):
    nl.store(y, nl.add(nl.load(y), nl.load(x)))
    return y


@pytest.mark.parametrize("mode", ["interpret", "jit"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
def test_read_only_mutable_parameter_is_an_argument_error(mode, contiguous):
    base = np.zeros((8, 16), F32)
    y = base[:, :8].copy() if contiguous else base[:, ::2]
    y.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(errors.ArgumentError):
            _bump(y, np.ones((8, 8), F32), mode=mode)
    assert np.all(base == 0) and np.all(y == 0)


# ---------------------------------------------------------------------------------------------------------
# Vectorised max/min reductions run several independent accumulators (exactly associative ops): signed
# zeros and NaNs anywhere in a long row must give the interpreter's bits.

@pytest.mark.parametrize("op", [np.maximum, np.minimum], ids=["max", "min"])
@pytest.mark.parametrize("opt", ["0", "2"])
def test_long_minmax_reductions_with_signed_zeros_and_nans(op, opt, monkeypatch):
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)

    @nki.jit
    def red(x):
        out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_reduce(op, nl.load(x), axis=1, keepdims=True))
        return out

    rows = np.zeros((6, 300), F32)
    rows[0, :] = -0.0
    rows[0, 257] = 0.0                      # one +0 among -0s (max: +0, min: -0)
    rows[1, :] = 0.0
    rows[1, 3] = -0.0
    rows[2, 150] = np.nan                   # NaN in the unrolled part
    rows[3, 290] = np.nan                   # NaN in the leftover chunks / tail
    rows[4] = np.linspace(-5, 5, 300, dtype=F32)
    rows[5] = -np.inf
    rows[5, 299] = _SNAN
    assert_backends_agree(red, rows)


def test_fused_accumulator_carried_across_iterations_is_stored():
    """Fusion elided `acc` in `acc += load(x[i]); store(out[i], acc)`: every read of acc was inside
    the fused run, but the first one reads the previous iteration's value, so acc must be stored.
    (Found while adding prologue threading.)"""
    from .test_threads import running_sum_of_tiles as running_sum

    x = np.random.default_rng(5).standard_normal((128 * 4, 48)).astype(F32)
    assert_backends_agree(running_sum, x)
    want = np.cumsum(x.reshape(4, 128, 48), axis=0, dtype=F32).reshape(x.shape)
    np.testing.assert_array_equal(running_sum(x), want)


def test_max8_shift_keeps_equal_keys_in_index_order():
    """max8's insertion dropped the wrong one of two equal keys when a larger value arrived later:
    the displaced element must pass equal keys below it (it came first). Visible with +0/-0 (equal
    keys, different bits) and with NaN next to +inf (both sort as +inf). Found by the generator at
    NKI_LITE_HYPOTHESIS_SCALE=15."""
    @nki.jit
    def top8(x):
        out = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.max8(src=nl.load(x)))
        return out

    x = np.full((4, 48), -0.0, F32)
    x[0, :6] = 0.0                           # six +0, then -0s, then a larger value at 26
    x[0, 26] = 0.1
    x[1, :3] = np.inf
    x[1, 3:7] = np.nan                       # NaN keys tie with +inf
    x[1, 30] = np.float32(np.nan)
    x[2, ::2] = 0.0
    x[2, 40] = 5.0
    x[3] = np.linspace(-1, 1, 48, dtype=F32)
    assert_backends_agree(top8, x)
    got = top8(x, mode="jit")
    assert [hex(int(v)) for v in got[0].view(np.uint32)] == ["0x3dcccccd"] + ["0x0"] * 6 + ["0x80000000"]


@pytest.mark.parametrize("opt", ["0", "2"])
@pytest.mark.parametrize("op", [np.maximum, np.minimum])
def test_elementwise_max_min_with_signalling_nan_operands(op, opt, monkeypatch):
    """At O2, llvm.maximum's x86 lowering (scalar path: a strided operand) returned the other operand
    for the signalling NaN 0x7F800001 next to an int32-derived operand (generator case at
    NKI_LITE_HYPOTHESIS_SCALE=20). The contract (numerics/alu.py): a NaN operand gives the canonical
    NaN, and +0 beats -0."""
    monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)

    @nki.jit
    def mm(x, v, y):
        out = nl.ndarray((32, 17), dtype=nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.arange(32)[:, None], nl.arange(17)[None, :]
        strided = nl.load(x[ip, 2 * jf])
        nl.store(out[ip, jf], value=nisa.tensor_tensor(nl.sqrt(nl.load(v[0:32])), strided, op=op))
        nl.store(out2, nisa.tensor_tensor(nl.load(y), nl.load(x[0:32, 0:32]), op=op))   # vector path
        return out, out2

    x = np.random.default_rng(0).standard_normal((32, 34)).astype(F32)
    nans = np.array([0x7F800001, 0x7FA00000, 0xFFA00001, 0xFFC00000], np.uint32).view(F32)
    x[2, 32], x[4, 6], x[7, 0], x[9, 10] = nans
    x[11, :4] = [0.0, -0.0, 0.0, -0.0]
    y = np.random.default_rng(1).standard_normal((32, 32)).astype(F32)
    y[11, :4] = [-0.0, 0.0, 0.0, -0.0]
    y[3, 5] = nans[0]
    v = np.arange(-16, 16, dtype=np.int32)
    assert_backends_agree(mm, x, v, y)
    got, got2 = mm(x, v, y, mode="jit")
    assert np.isnan(got[2, 16]) and np.isnan(got[4, 3]) and np.isnan(got2[3, 5])


def test_in_place_updates_fuse_and_hazards_do_not():
    """Fusion joins `t[...] = f(t, ...)` chains of the identical access (element for element the
    same order), and keeps apart an update whose buffer an earlier member read elsewhere."""
    from nki_lite.lower.llvm.fusion import plan

    @nki.jit
    def chain(x, g):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((x.shape[0], 32), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.multiply(nl.load(x), 0.5)
        t[...] = nl.multiply(t, nl.load(g))
        t[...] = nl.add(t, 1.0)
        nl.store(out, t)
        u = nl.load(x)
        v = nl.multiply(u[:, 0:32], 2.0)                      # reads u's first half ...
        u[:, 32:64] = nl.add(v, 1.0)                          # ... then writes its second half
        nl.store(out2, nl.add(u[:, 32:64], u[:, 0:32]))
        return out, out2

    rng = np.random.default_rng(9)
    x = rng.standard_normal((128, 64)).astype(F32)
    g = rng.standard_normal((128, 64)).astype(F32)
    assert_backends_agree(chain, x, g)
    kern = chain.trace(x, g)
    runs = [r for r in plan(list(kern.body), lambda b: kern.buffer_map[b].base or b) if isinstance(r, list)]
    ops = [[i.op for i in r if i.op != "alloc"] for r in runs]
    assert any(r.count("tensor_tensor") + r.count("tensor_scalar") >= 3 and "dma_copy" in r for r in ops), ops
