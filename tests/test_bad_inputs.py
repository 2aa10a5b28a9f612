"""One regression test per row of shared/BAD_INPUTS.md, in both modes: the mistake raises the row's
error class and code, at the kernel line marked `# MARK-Rn` (or, for call-site mistakes, at the
kernel's definition). Rows whose behaviour is a warning or a result assert that instead."""
from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from tests.markers import line_of

HERE = __file__
MODES = ("interpret", "jit")
F32 = np.float32


def _out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


# ---------------------------------------------------------------- the kernels, one mistake each

@nki.jit
def r1_partition_limit(a):
    t = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)  # MARK-R1
    out = _out(a.shape)
    nl.store(out, t)
    return out


@nki.jit
def r2_free_limit(a):
    out = _out((512, 128))
    t = nl.load(a)
    nl.store(out[0:128, 0:128], nisa.nc_transpose(t)[0:128, 0:128])  # MARK-R2
    return out


@nki.jit
def r3_sbuf_capacity(a):
    out = _out(a.shape)
    t1 = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)  # MARK-R3
    t2 = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(out, nl.add(t1[:, 0:8], t2[:, 0:8]))
    return out


@nki.jit
def r4_psum_bank(a):
    out = _out((128, 1024))
    p = nl.zeros((128, 1024), dtype=nl.float32, buffer=nl.psum)  # MARK-R4
    nl.store(out, nl.copy(p))
    return out


@nki.jit
def r5_matmul_shape(a, b):
    out = _out((128, 512))
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, nisa.nc_matmul(x, y))  # MARK-R5
    return out


@nki.jit
def r6_matmul_dtype(a, b):
    out = _out((128, 512), nl.int32)
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, nisa.nc_matmul(x, y))  # MARK-R6
    return out


@nki.jit
def r7_memory_space(a):
    out = _out(a.shape)
    nl.store(out, nl.exp(a))  # MARK-R7
    return out


@nki.jit
def copy_kernel(a):
    out = _out(a.shape, a.dtype)
    nl.store(out, nl.load(a))
    return out


@nki.jit
def r9_declared(a: nt.tensor[[8, 16], nl.bfloat16]):
    out = _out(a.shape, a.dtype)
    nl.store(out, nl.load(a))
    return out


@nki.jit
def r12_static_oob(a):
    out = _out((128, 512))
    t = nl.load(a[nl.arange(128)[:, None], 3600 + nl.arange(512)[None, :]])  # MARK-R12
    nl.store(out, t)
    return out


@nki.jit
def r13_indirect_index(a, idx):
    out = _out((128, 64))
    ix = nl.load(idx)
    nl.store(out, nl.load(a[ix, nl.arange(64)[None, :]]))  # MARK-R13
    return out


@nki.jit
def r14_ragged_tail(a):
    out = _out(a.shape)
    for i in nl.affine_range(math.ceil(a.shape[0] / 128)):
        t = nl.load(a[i * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])  # MARK-R14
        nl.store(out[i * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]], t)
    return out


@nki.jit
def r15_loop_dependency(a):
    out = _out((128, 64))
    for i in nl.affine_range(4):
        nl.store(out, nl.load(a[i * 128:(i + 1) * 128, :]))  # MARK-R15
    return out


@nki.jit
def r16_write_input(a):
    nl.store(a, nl.load(a))  # MARK-R16
    return a


@nki.jit
def r18_output_not_written(a):
    out = _out(a.shape)
    for i in nl.affine_range(a.shape[0] // 256):  # MARK-R18
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(a[i * 128:(i + 1) * 128, :]))
    return out


@nki.jit
def r19_control_flow_on_tile(a):
    out = _out(a.shape)
    t = nl.load(a)
    if t[0, 0] > 0:  # MARK-R19
        t = nl.exp(t)
    nl.store(out, t)
    return out


@nki.jit
def r20_control_flow_on_index(a):
    out = _out(a.shape)
    ip = nl.arange(128)[:, None]
    if ip < 64:  # MARK-R20
        nl.store(out, nl.load(a))
    return out


@nki.jit
def r25_empty(a):
    out = _out(a.shape)
    for i in nl.affine_range(math.ceil(a.shape[0] / 128)):
        ip = nl.arange(128)[:, None]
        jf = nl.arange(a.shape[1])[None, :]
        nl.store(out[i * 128 + ip, jf], nl.load(a[i * 128 + ip, jf], mask=(i * 128 + ip < a.shape[0])),
                 mask=(i * 128 + ip < a.shape[0]))
    return out


@nki.jit
def r28_rank(a):
    out = _out((128, 1))
    t = nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf)  # MARK-R28
    nl.store(out, t)
    return out


@nki.jit
def r29_mixed_indexing(a):
    out = _out((128, 64))
    i = nl.arange(128)[:, None]
    nl.store(out, nl.load(a[i, :]))  # MARK-R29
    return out


@nki.jit
def r15_programs_race(a):
    out = _out((128, 64))
    nl.store(out, nl.load(a[nl.program_id(0) * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]]))  # MARK-R15P
    return out


@nki.jit
def r17_uninitialised_read(a):
    out = _out((128, 64))
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(out, nl.exp(t))  # MARK-R17
    return out


@nki.jit
def r21_try(a):
    out = _out(a.shape)
    try:  # MARK-R21
        nl.store(out, nl.load(a))
    except ValueError:
        pass
    return out


@nki.jit
def r22_self_call(a):
    out = _out(a.shape)
    r22_self_call(a)  # MARK-R22
    nl.store(out, nl.load(a))
    return out


@nki.jit
def r23_creates_nan(a):
    out = _out(a.shape)
    nl.store(out, nl.log(nl.load(a)))  # MARK-R23
    return out


@nki.jit
def r24_fp8_overflow(a):
    out = _out(a.shape, nl.float8_e5m2)
    nl.store(out, nl.copy(nl.load(a), dtype=nl.float8_e5m2))  # MARK-R24
    return out


@nki.jit
def r27_operator_partition_broadcast(a, b):
    out = _out((128, 64))
    nl.store(out, nl.load(a) + nl.load(b))  # MARK-R27
    return out


# ---------------------------------------------------------------- the table

ONES = np.ones((128, 512), F32)
SPEC = [
    # row, kernel, args, error class, code name, where ("marker" or "def")
    (1, r1_partition_limit, (ONES,), errors.ShapeError, "partition_limit", "MARK-R1"),
    (2, r2_free_limit, (np.ones((128, 512), F32),), errors.ShapeError, "free_size_limit", "MARK-R2"),
    (4, r4_psum_bank, (ONES,), errors.MemoryCapacityError, "psum_bank", "MARK-R4"),
    (5, r5_matmul_shape, (np.ones((64, 128), F32), np.ones((128, 512), F32)), errors.ShapeError,
     "matmul_shape", "MARK-R5"),
    (6, r6_matmul_dtype, (np.ones((128, 128), np.int32), np.ones((128, 512), np.int32)),
     errors.KernelDTypeError, "dtype", "MARK-R6"),
    (7, r7_memory_space, (ONES,), errors.MemorySpaceError, "memory_space", "MARK-R7"),
    (9, r9_declared, (np.ones((8, 16), np.uint16),), errors.ArgumentError, "argument", "def"),
    (10, copy_kernel, (ONES, ONES), errors.ArgumentError, "argument", "def"),
    (11, copy_kernel, ([[1.0, 2.0]],), errors.ArgumentError, "argument", "def"),
    (12, r12_static_oob, (np.ones((128, 4000), F32),), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-R12"),
    (13, r13_indirect_index, (np.ones((256, 64), F32), np.full((128, 1), 300, np.int32)),
     errors.IndexOutOfBoundsError, "indirect_out_of_bounds", "MARK-R13"),
    (14, r14_ragged_tail, (np.ones((300, 64), F32),), errors.IndexOutOfBoundsError, "ragged_tail", "MARK-R14"),
    (15, r15_loop_dependency, (np.ones((512, 64), F32),), errors.DependencyError, "loop_dependency", "MARK-R15"),
    (16, r16_write_input, (np.ones((128, 64), F32),), errors.ImmutableParameterError, "immutable_parameter",
     "MARK-R16"),
    (18, r18_output_not_written, (np.ones((128, 64), F32),), errors.OutputNotWrittenError, "output_not_written",
     "MARK-R18"),
    (19, r19_control_flow_on_tile, (np.ones((128, 64), F32),), errors.KernelSyntaxError, "control_flow_on_tile",
     "MARK-R19"),
    (20, r20_control_flow_on_index, (np.ones((128, 64), F32),), errors.KernelSyntaxError,
     "control_flow_on_index", "MARK-R20"),
    (21, r21_try, (np.ones((128, 64), F32),), errors.KernelSyntaxError, "unsupported_syntax", "MARK-R21"),
    (22, r22_self_call, (np.ones((128, 64), F32),), errors.KernelSyntaxError, "recursive_kernel", "MARK-R22"),
    (27, r27_operator_partition_broadcast, (np.ones((128, 64), F32), np.ones((1, 64), F32)), errors.ShapeError,
     "shape_mismatch", "MARK-R27"),
    (28, r28_rank, (ONES,), errors.ShapeError, "rank", "MARK-R28"),
    (29, r29_mixed_indexing, (np.ones((128, 64), F32),), errors.KernelSyntaxError, "mixed_indexing", "MARK-R29"),
]


def _def_line(kernel) -> int:
    return kernel.fn.__code__.co_firstlineno


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row, kernel, args, cls, name, where", SPEC, ids=[f"row{r[0]}" for r in SPEC])
def test_row_raises_its_error_at_its_line(mode, row, kernel, args, cls, name, where):
    with pytest.raises(cls) as ei:
        kernel(*args, mode=mode)
    e = ei.value
    assert isinstance(e, errors.NkiLiteError)
    assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
    line = _def_line(kernel) if where == "def" else line_of(HERE, where)
    assert f"{HERE}:{line}:" in str(e), str(e)
    assert "hint:" in str(e) or e.hint is None or e.hint           # the rendering carries the hint


@pytest.mark.parametrize("mode", MODES)
def test_row8_strided_argument_is_copied_with_one_warning(mode, monkeypatch):
    monkeypatch.setattr("nki_lite.runtime.notices._WARNED", set())
    a = np.arange(64 * 128, dtype=F32).reshape(64, 128).T            # (128, 64), Fortran order
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = copy_kernel(a, mode=mode)
    assert np.array_equal(r, a)                                       # never read with the wrong strides
    if mode == "jit":
        assert any("copies it" in str(x.message) for x in w)
    with pytest.raises(errors.ArgumentError, match="strict=True"):
        nki.jit(strict=True)(copy_kernel.fn)(a, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_row9_bf16_bits_as_uint16_are_not_reinterpreted(mode):
    bits = np.ones((8, 16), ml_dtypes.bfloat16).view(np.uint16)
    r = copy_kernel(bits, mode=mode)                                  # no declaration: specialise on uint16
    assert r.dtype == np.uint16 and np.array_equal(r, bits)


@pytest.mark.parametrize("mode", MODES)
def test_row11_read_only_output_buffer_is_refused(mode):
    ro = np.zeros((128, 512), F32)
    ro.flags.writeable = False
    with pytest.raises(errors.ArgumentError, match="read-only"):
        copy_kernel(ONES, out=ro, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(0, 64), (300, 0), (0, 0)])
def test_row25_empty_in_empty_out(mode, shape):
    r = r25_empty(np.ones(shape, F32), mode=mode)
    assert r.shape == shape and r.dtype == F32


@pytest.mark.parametrize("mode", MODES)
def test_row15_programs_race_found_by_shuffled_interpretation(mode, monkeypatch):
    """Two SPMD programs store the same rows: the dynamic half of the race check (NKI_LITE_SHUFFLE)."""
    monkeypatch.setenv("NKI_LITE_SHUFFLE", "1")
    with pytest.raises(errors.DependencyError) as ei:
        r15_programs_race[2](np.ones((256, 64), F32), mode=mode)
    assert ei.value.code in ("NL-E601", "NL-E602") and f"{HERE}:{line_of(HERE, 'MARK-R15P')}:" in str(ei.value)


@pytest.mark.parametrize("mode", MODES)
def test_row17_uninitialised_read_in_debug_mode(mode, monkeypatch):
    monkeypatch.setenv("NKI_LITE_DEBUG_UNINIT", "1")
    with pytest.raises(errors.UninitializedReadError) as ei:
        r17_uninitialised_read(np.ones((128, 64), F32), mode=mode)
    assert ei.value.code == "NL-E902" and f"{HERE}:{line_of(HERE, 'MARK-R17')}:" in str(ei.value)
    monkeypatch.delenv("NKI_LITE_DEBUG_UNINIT")
    assert np.isnan(r17_uninitialised_read(np.ones((128, 64), F32), mode=mode)).all()   # sentinel NaN


@pytest.mark.parametrize("mode", MODES)
def test_row23_nan_inputs_propagate_and_created_nans_raise_on_request(mode, monkeypatch):
    a = np.ones((128, 64), F32)
    a[0, 0] = np.nan
    r = r23_creates_nan(a, mode=mode)
    assert np.isnan(r[0, 0]) and (r.ravel()[1:] == 0).all()          # propagated like numpy
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    r23_creates_nan(a, mode=mode)                                     # an input NaN is not created
    a[0, 0] = -1.0
    with pytest.raises(errors.KernelFloatingPointError) as ei:
        r23_creates_nan(a, mode=mode)
    assert ei.value.code == "NL-E903" and f"{HERE}:{line_of(HERE, 'MARK-R23')}:" in str(ei.value)


def test_row30_knob_changed_after_the_first_call_warns_once(monkeypatch):
    monkeypatch.setattr("nki_lite.runtime.notices._WARNED", set())
    monkeypatch.setenv("NKI_LITE_MODE", "jit")
    k = nki.jit(copy_kernel.fn)
    a = np.ones((128, 64), F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(a)
        k(a)                                                          # same knobs: silent
    monkeypatch.setenv("NKI_LITE_MODE", "interpret")
    with pytest.warns(UserWarning, match="NKI_LITE_MODE changed from 'jit' to 'interpret'"):
        r = k(a)
    assert np.array_equal(r, a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(a)                                                          # once per kernel and knob


@pytest.mark.parametrize("mode", MODES)
def test_row24_fp8_overflow_follows_ml_dtypes_and_is_counted_in_debug_mode(mode, monkeypatch):
    a = np.full((128, 64), 1.0, F32)
    a[0, :5] = 1e6                                                    # beyond e5m2's 57344
    a[1, 0] = np.inf                                                  # already infinite: not counted
    r = r24_fp8_overflow(a, mode=mode)
    assert r.tobytes() == a.astype(ml_dtypes.float8_e5m2).tobytes()  # ml_dtypes' behaviour, bit for bit
    monkeypatch.setenv("NKI_LITE_DEBUG_NANS", "1")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r24_fp8_overflow(a, mode=mode)
    msgs = [x for x in w if "overflowed" in str(x.message)]
    assert len(msgs) == 1 and "5 finite value(s)" in str(msgs[0].message) and "float8_e5m2" in str(msgs[0].message)
    assert msgs[0].filename == HERE and msgs[0].lineno == line_of(HERE, "MARK-R24")


@pytest.mark.parametrize("mode", MODES)
def test_row3_sbuf_over_capacity_warns_or_raises_under_the_strict_knob(mode, monkeypatch):
    """Automatic allocation (the hardware compiler's) may spill: a CapacityWarning at the line; under
    NKI_LITE_STRICT_CAPACITY=1 (or direct allocation) the same finding is NL-E401."""
    a = np.ones((128, 8), F32)
    k = nki.jit(r3_sbuf_capacity.fn)                                  # a fresh trace cache: verification runs
    with pytest.warns(UserWarning, match="SBUF over capacity") as w:
        k(a, mode=mode)
    assert any(f"test_bad_inputs.py:{line_of(HERE, 'MARK-R3')}" in str(x.message) for x in w)
    monkeypatch.setenv("NKI_LITE_STRICT_CAPACITY", "1")
    with pytest.raises(errors.MemoryCapacityError) as ei:
        k(a, mode=mode)
    assert ei.value.code == "NL-E401" and "bytes per partition" in str(ei.value)


@pytest.mark.parametrize("mode", MODES)
def test_row26_huge_shapes_raise_the_host_memory_error(mode, monkeypatch):
    monkeypatch.setenv("NKI_LITE_MAX_ALLOC_BYTES", str(1 << 20))
    with pytest.raises(errors.MemoryCapacityError) as ei:
        copy_kernel(np.ones((1024, 512), F32), mode=mode)            # 2 MiB output > the 1 MiB limit
    assert ei.value.code == "NL-E403" and "NKI_LITE_MAX_ALLOC_BYTES" in str(ei.value)
