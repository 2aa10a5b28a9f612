"""The call contract of a kernel object: what a call may reuse from an earlier one (trace cache, JIT
fast path), what it checks (decorator options, declared signatures, out= arrays), and what it
accepts (empty arrays, DLPack-only CPU tensors). Every case here once returned a wrong result or a
misleading error; each runs in both modes."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.runtime.binding import const_key as _const_key
from tests.markers import line_of

HERE = __file__
MODES = ("interpret", "jit")


@nki.jit
def spmd_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.load(a[i * 128:(i + 1) * 128, :]) + nl.load(b[i * 128:(i + 1) * 128, :])  # MARK-SPMD-LOAD
    nl.store(out[i * 128:(i + 1) * 128, :], t)
    return out


@nki.jit
def scale(x, s):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), s))
    return out


@nki.jit
def by_type(x, s):
    """Branches on the constant's Python type: True, 1 and 1.0 must be three traces."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    k = 3.0 if isinstance(s, bool) else 5.0 if isinstance(s, int) else 7.0
    nl.store(out, nl.multiply(nl.load(x), k))
    return out


# ---------------------------------------------------------------- SPMD grid in the fast path

def _call(kernel, mode, *args):
    """JIT calls pass no mode= so that repeated calls take the positional fast path."""
    return kernel(*args) if mode == "jit" else kernel(*args, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.filterwarnings("ignore::UserWarning")     # grid [1,1] leaves rows unwritten: a coverage warning
def test_grid_is_part_of_every_cache_key(mode):
    a = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    assert np.array_equal(_call(spmd_add[1, 1], mode, a, a)[:128], 2 * a[:128])
    for _ in range(2):                             # the second call takes the JIT's fast path
        assert np.array_equal(_call(spmd_add[2, 1], mode, a, a), 2 * a)
    with pytest.raises(errors.NkiLiteError) as ei:
        _call(spmd_add[3, 1], mode, a, a)
    assert ei.value.code == "NL-E501"              # program 2 lies wholly past the end: out of bounds
    assert f"{HERE}:{line_of(HERE, 'MARK-SPMD-LOAD')}:" in str(ei.value)


# ---------------------------------------------------------------- constants keyed exactly

@pytest.mark.parametrize("mode", MODES)
def test_signed_zero_constants_trace_apart(mode):
    x = np.ones((4, 8), np.float32)
    for _ in range(2):
        assert not np.signbit(scale(x, 0.0, mode=mode)).any()
        assert np.signbit(scale(x, -0.0, mode=mode)).all()


def test_signed_zero_constants_fast_path():
    x = np.ones((4, 8), np.float32)
    for _ in range(3):                             # the positional-only fast path keys by bits too
        assert not np.signbit(scale(x, 0.0)).any()
        assert np.signbit(scale(x, -0.0)).all()
        assert np.signbit(scale(x, np.float32(-0.0))).all()


@pytest.mark.parametrize("mode", MODES)
def test_bool_int_float_constants_trace_apart(mode):
    x = np.ones((2, 4), np.float32)
    for _ in range(2):
        assert by_type(x, True, mode=mode)[0, 0] == 3.0
        assert by_type(x, 1, mode=mode)[0, 0] == 5.0
        assert by_type(x, 1.0, mode=mode)[0, 0] == 7.0
    for _ in range(2):
        assert by_type(x, True)[0, 0] == 3.0 and by_type(x, 1)[0, 0] == 5.0 and by_type(x, 1.0)[0, 0] == 7.0


def _nan(payload: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | payload))[0]


@pytest.mark.parametrize("a, b", [
    (0.0, -0.0), (True, 1), (1, 1.0), (np.float32(1.0), 1.0), (np.float32(1.0), np.float64(1.0)),
    (np.float32(0.0), np.float32(-0.0)), (_nan(1), _nan(2)), ((0.0, 1), (-0.0, 1)), (np.int32(3), np.int64(3)),
    (np.dtype(np.float32), np.dtype(np.float16)), (np.zeros(3), -np.zeros(3)),
])
def test_const_keys_distinguish_what_can_change_a_trace(a, b):
    assert _const_key(a) != _const_key(b)


@pytest.mark.parametrize("v", [0.0, -0.0, _nan(5), (1, 2.5), np.float32(-0.0), "x", None, np.dtype(np.int8)])
def test_const_keys_are_stable(v):
    assert _const_key(v) == _const_key(v)           # equal constants (NaN included) do hit the cache


def test_nan_constant_hits_the_trace_cache():
    x = np.ones((2, 4), np.float32)
    nan = float("nan")
    k = nki.jit(scale.fn)
    k(x, nan, mode="interpret")
    k(x, float("nan"), mode="interpret")            # a different NaN object, the same bits
    assert k.cache_info()["traces"] == 1


# ---------------------------------------------------------------- decorator options

def test_unknown_decorator_option_is_an_error_with_a_suggestion():
    with pytest.raises(errors.NkiLiteError) as ei:
        @nki.jit(platfrom_target="trn2")
        def k(a):
            return a
    assert ei.value.code == "NL-E901" and "platfrom_target" in str(ei.value)
    assert "did you mean platform_target" in str(ei.value)
    with pytest.raises(errors.NkiLiteError, match="did you mean strict"):
        nki.jit(stirct=True)(scale.fn)


@pytest.mark.parametrize("mode", MODES)
def test_strict_refuses_to_copy_a_strided_argument(mode, monkeypatch):
    k = nki.jit(strict=True)(scale.fn)
    x = np.ones((8, 4), np.float32)
    assert np.array_equal(k(x, 2.0, mode=mode), 2 * x)
    with pytest.raises(errors.NkiLiteError, match="strict=True refuses"):
        k(np.ones((4, 8), np.float32).T, 2.0, mode=mode)
    monkeypatch.setattr("nki_lite.runtime.notices._WARNED", set())
    with pytest.warns(UserWarning, match="copies it"):          # without strict: a copy and a warning
        r = nki.jit(scale.fn)(np.ones((4, 8), np.float32).T, 2.0, mode="jit")
    assert np.array_equal(r, np.full((8, 4), 2, np.float32))


def test_baremetal_checks_its_options_too():
    assert isinstance(nki.baremetal(save_neff_name="k.neff")(scale.fn), nki.Kernel)
    with pytest.raises(errors.NkiLiteError, match="did you mean save_neff_name"):
        nki.baremetal(save_nef_name="k.neff")(scale.fn)


def test_documented_compiler_options_are_accepted():
    k = nki.jit(debug_kernel=True, show_compiler_tb=True, experimental_flags="enable-mutable-parameter",
                additional_compile_opt="--O1")(scale.fn)
    assert k.options["debug_kernel"] is True
    x = np.ones((2, 4), np.float32)
    assert np.array_equal(k(x, 2.0), 2 * x)


# ---------------------------------------------------------------- declared signatures

@nki.jit
def declared(x: nt.tensor[[128, 512], nl.bfloat16], y: nt.tensor[128, 512]):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(y), dtype=nl.float32))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_declared_signature_is_checked(mode):
    import ml_dtypes
    good = np.ones((128, 512), ml_dtypes.bfloat16)
    y = np.ones((128, 512), np.float32)
    assert np.array_equal(declared(good, y, mode=mode), np.full((128, 512), 2, np.float32))
    for bad, what in [(np.ones((128, 512), np.uint16), "dtype uint16"), (np.ones((128, 512), np.float32),
                      "dtype float32"), (np.ones((64, 512), ml_dtypes.bfloat16), "shape (64, 512)")]:
        with pytest.raises(errors.NkiLiteError) as ei:
            declared(bad, y, mode=mode)
        assert ei.value.code == "NL-E901" and what in str(ei.value), str(ei.value)
        assert "nt.tensor[[128, 512], bfloat16]" in str(ei.value)
    with pytest.raises(errors.NkiLiteError, match=r"argument 'y' has shape \(128, 256\)"):
        declared(good, np.ones((128, 256), np.float32), mode=mode)


def test_declared_signature_checks_placeholders():
    with pytest.raises(errors.NkiLiteError, match="declared"):
        declared.trace(nt.tensor[[64, 512], nl.bfloat16], nt.tensor[[128, 512], np.float32])


def test_string_annotations_are_resolved():
    ns: dict = {}
    src = ("from __future__ import annotations\nimport nki_lite as nki, nki_lite.language as nl\n"
           "import nki_lite.typing as nt\n"
           "@nki.jit\ndef k(x: nt.tensor[[4, 8], nl.float32], n: int, z: Undefined):\n"
           "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
           "    nl.store(out, nl.load(x))\n    return out\n")
    exec(compile(src, "<declared>", "exec"), ns)
    k = ns["k"]
    assert k(np.ones((4, 8), np.float32), 1, 0).shape == (4, 8)   # an unresolvable annotation declares nothing
    with pytest.raises(errors.NkiLiteError, match="declared"):
        k(np.ones((4, 9), np.float32), 1, 0)


# ---------------------------------------------------------------- out= says what is wrong

@pytest.mark.parametrize("make, words", [
    (lambda: np.empty((4, 8), np.float64), "has dtype float64"),
    (lambda: np.empty((4, 9), np.float32), "has shape (4, 9)"),
    (lambda: np.empty((8, 4), np.float32).T, "not C-contiguous"),
    (lambda: np.frombuffer(bytes(128), np.float32).reshape(4, 8), "read-only"),
    (lambda: "buffer", "is a str, not a numpy array"),
])
def test_out_errors_name_the_property(make, words):
    x = np.ones((4, 8), np.float32)
    with pytest.raises(errors.NkiLiteError) as ei:
        scale(x, 2.0, out=make())
    assert ei.value.code == "NL-E901" and words in str(ei.value), str(ei.value)


# ---------------------------------------------------------------- empty arrays

@nki.jit
def tiled_exp(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    for i in nl.affine_range(math.ceil(n / 128)):
        ip = nl.arange(128)[:, None]
        jf = nl.arange(m)[None, :]
        t = nl.load(x[i * 128 + ip, jf], mask=(i * 128 + ip < n))
        nl.store(out[i * 128 + ip, jf], nl.exp(t), mask=(i * 128 + ip < n))
    return out


@nki.jit
def row_sum(x):
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.sum(nl.load(x), axis=1, keepdims=True))  # MARK-EMPTY-SUM
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(0, 8), (4, 0), (0, 0)])
def test_empty_in_empty_out_untiled(mode, shape):
    r = scale(np.ones(shape, np.float32), 2.0, mode=mode)
    assert r.shape == shape and r.dtype == np.float32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(0, 64), (300, 0)])
def test_empty_in_empty_out_tiled(mode, shape):
    r = tiled_exp(np.ones(shape, np.float32), mode=mode)
    assert r.shape == shape


@pytest.mark.parametrize("mode", MODES)
def test_empty_rows_reduce_to_empty(mode):
    assert row_sum(np.ones((0, 5), np.float32), mode=mode).shape == (0, 1)


@pytest.mark.parametrize("mode", MODES)
def test_reduction_over_an_empty_axis_is_one_clear_error(mode):
    with pytest.raises(errors.NkiLiteError) as ei:
        row_sum(np.ones((128, 0), np.float32), mode=mode)
    assert ei.value.code == "NL-E103" and "zero elements" in str(ei.value)
    assert f"{HERE}:{line_of(HERE, 'MARK-EMPTY-SUM')}:" in str(ei.value)


def test_empty_kernel_estimates():
    est = nki.estimate(scale, np.ones((0, 8), np.float32), 2.0)
    assert est.total_time >= 0


# ---------------------------------------------------------------- DLPack-only CPU tensors

class _DLPackOnly:
    """A CPU tensor that speaks only DLPack (no __array__), like some framework tensors."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device_tuple = a, device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device_tuple


@pytest.mark.parametrize("mode", MODES)
def test_dlpack_only_cpu_tensor_is_accepted(mode):
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(scale(_DLPackOnly(a), 2.0, mode=mode), 2 * a)


def test_dlpack_tensor_on_a_device_is_refused():
    with pytest.raises(errors.NkiLiteError, match="GPU/accelerator"):
        scale(_DLPackOnly(np.ones((2, 2), np.float32), device=(2, 0)), 2.0)
