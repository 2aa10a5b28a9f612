"""Patterns of public legacy-dialect kernels that nki_lite used to reject, re-created in our own code.

Each test runs on both backends (the `backend` fixture) and compares with numpy.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compat
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers

HERE, line_of, _ = marker_helpers(__file__)
RNG = np.random.default_rng(7)


@pytest.fixture(params=("interpret", "jit"))
def mode(request):
    return request.param


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------ nki.trace / mode="trace"

def test_trace_is_importable_from_the_legacy_package():
    nki_lite.compat.install()
    from neuronxcc.nki import trace     # noqa: F401 - NKIBench kernels import it, unused
    import neuronxcc.nki as legacy
    assert legacy.trace is nki.trace


@nki.jit(mode="trace")
def scaled_exp_helper(t, s):
    """A helper traced into its caller: works on the caller's tiles."""
    return nl.multiply(nl.exp(t), s)


@nki.trace
def add_into(dst_hbm, a, b):
    nl.store(dst_hbm, value=nl.add(nl.load(a), nl.load(b)))


@nki.jit
def uses_helpers(x, y):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    add_into(tmp, x, y)
    for i in nl.affine_range(1):
        nl.store(out, value=scaled_exp_helper(nl.load(tmp), 0.5))
    return out


def test_trace_helpers_run_inline_inside_a_kernel(mode):
    x, y = f32(128, 64), f32(128, 64)
    got = uses_helpers(x, y, mode=mode)
    np.testing.assert_allclose(got, np.exp(x + y) * 0.5, rtol=2e-6)


@nki.jit
def inner_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.negative(nl.load(a)))
    return out


@nki.jit
def calls_a_kernel(a):
    return inner_kernel(a)


def test_a_jitted_kernel_called_inside_a_kernel_is_traced_into_it(mode):
    a = f32(128, 32)
    np.testing.assert_array_equal(calls_a_kernel(a, mode=mode), -a)
    np.testing.assert_array_equal(inner_kernel(a, mode=mode), -a)      # still a kernel on its own


def test_trace_decorated_function_is_a_kernel_when_called_with_arrays(mode):
    @nki.trace
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out
    a = f32(16, 8)
    np.testing.assert_array_equal(k(a, mode=mode), a)


# ------------------------------------------------------------------------------ nc_matmul(is_transpose=True)

@nki.jit
def transpose_by_matmul(a):
    """The NKIBench idiom: stationary = data, moving = identity, is_transpose=True."""
    P, F = a.shape
    out = nl.ndarray((F, P), a.dtype, buffer=nl.shared_hbm)
    ident = nl.shared_constant(np.identity(P, dtype=np.float32))
    eye = nl.load(ident)
    t = nl.load(a)
    ps = nl.ndarray((F, P), nl.float32, buffer=nl.psum)
    ps[...] = nisa.nc_matmul(t, eye, is_moving_onezero=True, is_transpose=True)
    nl.store(out, value=nl.copy(ps, dtype=a.dtype))
    return out


def test_is_transpose_with_identity_moving_transposes(mode):
    a = f32(128, 96)
    np.testing.assert_array_equal(transpose_by_matmul(a, mode=mode), a.T)


def test_is_transpose_is_a_hint_the_product_is_unchanged(mode):
    @nki.jit
    def k(s, m, hint):
        out = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.shared_hbm)
        r = nisa.nc_matmul(nl.load(s), nl.load(m), is_transpose=hint)
        nl.store(out, value=nl.copy(r))
        return out
    s, m = f32(64, 32), f32(64, 48)
    np.testing.assert_array_equal(k(s, m, True, mode=mode), k(s, m, False, mode=mode))


# ------------------------------------------------------------------------------ mask= on nc_matmul

@nki.jit
def masked_matmul(s, m, ncols, acc_steps):
    """Output columns >= ncols are masked: never written (they keep the PSUM's earlier value)."""
    K, M = s.shape
    N = m.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    ps = nl.full((M, N), 3.0, nl.float32, buffer=nl.psum)
    i_n = nl.arange(N)[None, :]
    for k in nl.sequential_range(acc_steps):
        ps[...] += nisa.nc_matmul(nl.load(s), nl.load(m), mask=(i_n < ncols))
    nl.store(out, value=nl.copy(ps))
    return out


def test_nc_matmul_mask_leaves_masked_outputs_unwritten(mode):
    s, m = f32(32, 16), f32(32, 40)
    got = masked_matmul(s, m, 25, 2, mode=mode)
    prod = s.astype(np.float64).T @ m.astype(np.float64)
    want = np.full((16, 40), 3.0)
    want[:, :25] += 2 * prod[:, :25]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.all(got[:, 25:] == 3.0)


def test_nc_matmul_mask_on_assignment(mode):
    @nki.jit
    def k(s, m):
        out = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((s.shape[1], m.shape[1]), nl.float32, buffer=nl.psum, lazy_initialization=True)
        i_p = nl.arange(s.shape[1])[:, None]
        ps[...] = nisa.nc_matmul(nl.load(s), nl.load(m), mask=(i_p < 5))
        nl.store(out, value=nl.copy(ps))
        return out
    s, m = f32(16, 8), f32(16, 24)
    got = k(s, m, mode=mode)
    np.testing.assert_allclose(got[:5], (s.astype(np.float64).T @ m)[:5], rtol=1e-5, atol=1e-5)
    assert np.all(got[5:] == 0.0)                      # the zeros the tile started with


def test_nc_matmul_mask_that_does_not_fit_the_output_is_an_error():
    @nki.jit
    def k(s, m):
        out = nl.ndarray((8, 24), nl.float32, buffer=nl.shared_hbm)
        r = nisa.nc_matmul(nl.load(s), nl.load(m), mask=(nl.arange(16)[None, :] < 3))  # MARK-BADMASK
        nl.store(out, value=nl.copy(r))
        return out
    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(f32(16, 8), f32(16, 24))
    assert f"test_corpus_patterns.py:{line_of('MARK-BADMASK')}" in str(ei.value)


# ------------------------------------------------------------------------------ nl.loop_reduce

@nki.jit
def row_sums_by_loop_reduce(x, op):
    """acc = op(x_block, acc) over the blocks of x, through loop_reduce assigned into a view."""
    n = x.shape[1] // 128
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 1), nl.float32, buffer=nl.sbuf)
    acc[1, :, :] = nl.full((128, 1), 0.0 if op is np.add else -np.inf, nl.float32)
    for i in nl.sequential_range(n):
        part = nl.max(nl.load(x[:, nl.ds(i * 128, 128)]), axis=1, keepdims=True) if op is np.maximum else \
            nl.sum(nl.load(x[:, nl.ds(i * 128, 128)]), axis=1, keepdims=True)
        acc[1, :, :] = nl.loop_reduce(part, op=op, loop_indices=[i], mask=None, dtype=np.float32)
    nl.store(out, value=acc[1, :, :])
    return out


@pytest.mark.parametrize("op", (np.add, np.maximum))
def test_loop_reduce_accumulates_into_its_destination(mode, op):
    x = f32(128, 512)
    got = row_sums_by_loop_reduce(x, op, mode=mode)
    blocks = x.reshape(128, 4, 128)
    if op is np.add:
        parts = blocks.sum(axis=2, dtype=np.float64)
        np.testing.assert_allclose(got[:, 0], parts.sum(axis=1), rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(got[:, 0], x.max(axis=1))


def test_loop_reduce_result_used_as_a_value_is_an_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        r = nl.loop_reduce(nl.load(x), op=np.add, loop_indices=[])
        nl.store(out, value=nl.exp(r))
        return out
    with pytest.raises(errors.NkiLiteError, match="LoopReduce"):
        k(f32(8, 8))


def test_loop_reduce_dtype_must_match_the_destination():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros(x.shape, nl.bfloat16)
        acc[...] = nl.loop_reduce(nl.load(x), op=np.add, loop_indices=[], dtype=nl.float32)
        nl.store(out, value=acc)
        return out
    with pytest.raises(errors.KernelDTypeError, match="loop_reduce"):
        k(f32(8, 8))


# ------------------------------------------------------------------------------ block tensors over SBUF

def test_block_tensors_declared_over_sbuf_size_run(mode):
    """The NKIBench shape of a kernel: every block tensor declared for the whole problem (here 4 MiB
    per partition), each block written and read within one iteration."""
    @nki.jit
    def k(x):
        nb = x.shape[1] // 1024
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((nb, nl.par_dim(128), 1024), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((nb, 2, nl.par_dim(128), 512), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(nb):
            a[i, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(
                x[nl.arange(128)[:, None], 1024 * i + nl.arange(1024)[None, :]])
            for h in nl.affine_range(2):
                b[i, h, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(
                    op=nl.exp, data=a[i, nl.arange(128)[:, None], 512 * h + nl.arange(512)[None, :]], scale=-1.0)
                a[i, nl.arange(128)[:, None], 512 * h + nl.arange(512)[None, :]] = nl.multiply(
                    a[i, nl.arange(128)[:, None], 512 * h + nl.arange(512)[None, :]],
                    b[i, h, nl.arange(128)[:, None], nl.arange(512)[None, :]])
            nl.store(out[nl.arange(128)[:, None], 1024 * i + nl.arange(1024)[None, :]],
                     value=a[i, nl.arange(128)[:, None], nl.arange(1024)[None, :]])
        return out
    x = f32(128, 1024 * 1024 // 1024 * 4)[:, :4096].copy()
    import warnings
    from nki_lite.lower.verify_memory import CapacityWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        k.trace(np.zeros((128, 1024 * 1024), np.float32), target="trn1")   # 1024 blocks: 4 MiB declared
        got = k(x, mode=mode)
    np.testing.assert_allclose(got, x * np.exp(-x), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ nisa.dma_copy

def test_dma_copy_hbm_to_hbm_and_through_sbuf(mode):
    @nki.jit
    def k(a):
        b = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        c = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=b, src=a)                                  # HBM -> HBM
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, oob_mode=nisa.oob_mode.error)    # HBM -> SBUF
        nisa.dma_copy(dst=c[:, 0:16], src=t[:, 16:32])               # SBUF -> HBM, views
        nisa.dma_copy(dst=c[:, 16:32], src=t[:, 0:16])
        return b, c
    a = f32(64, 32)
    b, c = k(a, mode=mode)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, np.concatenate([a[:, 16:], a[:, :16]], axis=1))


def test_dma_copy_shape_mismatch_and_an_undocumented_rmw_op_are_errors():
    @nki.jit
    def k(a, rmw):
        b = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if rmw:
            nisa.dma_copy(dst=b, src=a, dst_rmw_op=np.multiply)     # NKI documents np.add only
        else:
            nisa.dma_copy(dst=b[:, 0:8], src=a)
        return b
    with pytest.raises(errors.ShapeError):
        k(f32(8, 16), False)
    with pytest.raises(errors.UnsupportedError, match="np.add only"):
        k(f32(8, 16), True)


# ------------------------------------------------------------------------------ numpy scalars, 0-d arrays

@nki.jit
def add_scalar(a, s):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), s))
    return out


@pytest.mark.parametrize("s", (np.float32(2.5), np.array(2.5, np.float32), np.array(-0.0)))
def test_numpy_scalars_and_0d_arrays_are_trace_time_constants(mode, s):
    a = f32(8, 4)
    np.testing.assert_array_equal(add_scalar(a, s, mode=mode), a + np.float32(s))


def test_signed_zero_constants_are_distinct_traces():
    a = np.zeros((8, 4), np.float32)
    neg = add_scalar(-a, np.float32(-0.0))
    pos = add_scalar(-a, np.float32(0.0))
    assert np.all(np.signbit(neg)) and not np.any(np.signbit(pos))


# ------------------------------------------------------------------------------ i % n of a loop variable

def test_remainder_of_a_loop_variable_is_accepted_as_a_pe_tiling_hint(mode):
    @nki.jit
    def k(g, h):
        out = nl.ndarray((4, 64, 128), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            r = nisa.nc_matmul(nl.load(g[i]), nl.load(h[i]), tile_position=((i % 2) * 64, 0), tile_size=(64, 64))
            nl.store(out[i], value=nl.copy(r))
        return out
    g, h = f32(4, 64, 64), f32(4, 64, 128)
    want = np.einsum("bkm,bkn->bmn", g.astype(np.float64), h.astype(np.float64))
    np.testing.assert_allclose(k(g, h, mode=mode), want, rtol=1e-5, atol=1e-5)


def test_remainder_and_quotient_of_a_loop_variable_unroll_the_loop(mode):
    """`buf[i % 2]` (double buffering) and `i // 2` of loop variables: the loop is traced unrolled, so
    each is a constant per iteration (as NKI's simulator runs the loop in Python)."""
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 8), a.dtype, buffer=nl.shared_hbm)
        halves = nl.ndarray((2, 8), a.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(4):
            nl.store(out[i % 2], value=nl.load(a[i]))
        for i in nl.sequential_range(4):
            nl.store(halves[i // 2], value=nl.load(a[i]))
        return out, halves
    a = f32(4, 8)
    out, halves = k(a, mode=mode)
    np.testing.assert_array_equal(out, a[2:4])
    np.testing.assert_array_equal(halves, a[[1, 3]])


def test_remainder_of_a_loop_variable_as_an_index_unrolls_the_loop(mode):
    """`t[i % 2]` (nki-samples' double-buffered attention tutorial): i's loop is traced unrolled, so the remainder
    is an int (lang/index.py NonAffine); a remainder of an nl.arange index stays NL-E807 (below)."""
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 8), a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out[(i + 1) % 2], value=nl.load(a[i]))
        return out
    a = f32(2, 8)
    np.testing.assert_array_equal(k(a, mode=mode), a[::-1])


def test_remainder_of_an_arange_index_is_an_error():
    @nki.jit
    def k(a):
        ip = nl.arange(8)[:, None]
        return nl.load(a[ip % 4, 0])  # MARK-MOD
    with pytest.raises(errors.KernelSyntaxError, match="remainder") as ei:
        k(f32(8, 8))
    assert f"test_corpus_patterns.py:{line_of('MARK-MOD')}" in str(ei.value)


# ------------------------------------------------------------------------------ nki.trace kernels: outputs passed in

@nki.trace
def transpose_into(a, out):
    """Legacy trace-style kernel: no return, the output is a parameter it writes."""
    nl.store(out, value=nl.transpose(nl.load(a)))


def test_trace_kernel_writes_its_output_parameter(mode):
    a = f32(32, 16)
    a_before = a.copy()
    out = np.zeros((16, 32), np.float32)
    assert transpose_into(a, out, mode=mode) is None
    np.testing.assert_array_equal(out, a_before.T)
    a.setflags(write=False)                              # the unwritten parameter stays a read-only input
    transpose_into(a, out, mode=mode)
    np.testing.assert_array_equal(a, a_before)


def test_jit_kernel_writing_a_parameter_is_still_an_error():
    @nki.jit
    def k(a, out):
        nl.store(out, value=nl.load(a))
    with pytest.raises(errors.ImmutableParameterError):
        k(f32(8, 8), np.zeros((8, 8), np.float32))


# ------------------------------------------------------------------------------ return inside affine_range

@nki.jit
def exp_returning_inside_loop(a):
    """As two documented legacy examples do: `return out` as the last statement of the loop body."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(a.shape[0] // 128):
        for q in nl.affine_range(1):
            t = nl.load(a[p * 128 + nl.arange(128)[:, None], nl.arange(a.shape[1])[None, :]])
            nl.store(out[p * 128 + nl.arange(128)[:, None], nl.arange(a.shape[1])[None, :]], value=nl.exp(t))
            return out


def test_return_at_the_end_of_a_loop_body_returns_after_the_loop(mode):
    a = RNG.random((384, 16)).astype(np.float32)
    np.testing.assert_allclose(exp_returning_inside_loop(a, mode=mode), np.exp(a), rtol=2e-6)


def test_break_inside_affine_range_is_still_an_error():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for p in nl.affine_range(2):
            nl.store(out, value=nl.load(a))
            break
        return out
    with pytest.raises(errors.KernelSyntaxError, match="NL-E808"):
        k(f32(8, 8))


@nki.jit
def flattened_view_copy(x):
    """A 4-D HBM tensor viewed as 3-D with the keyword spelling reshape(shape=...)."""
    n, c, h, w = x.shape
    out = nl.ndarray((n * c, h, w), dtype=x.dtype, buffer=nl.shared_hbm)
    flat = x.reshape(shape=(n * c, h, w))
    for i in nl.affine_range(n * c):
        nl.store(out[i], value=nl.load(flat[i]))
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_reshape_with_the_shape_keyword(mode):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    assert np.array_equal(flattened_view_copy(x, mode=mode), x.reshape(6, 4, 5))


def test_reshape_shape_given_twice_is_an_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        x.reshape((4, 5), shape=(4, 5))
        return out
    with pytest.raises(errors.NkiLiteError, match="positionally or as shape="):
        k(np.ones((4, 5), np.float32))


@nki.jit
def column_means_into_view(x):
    """A [P, 1] result assigned into `t[:, j, k]` (integer-indexed free axes: a [P] view)."""
    p, h, w = x.shape
    out = nl.ndarray((p, 2, 3), dtype=x.dtype, buffer=nl.shared_hbm)
    res = nl.zeros((p, 2, 3), dtype=x.dtype, buffer=nl.sbuf)
    t = nl.load(x)
    for j in nl.static_range(2):
        for k in nl.static_range(3):
            res[:, j, k] = nl.divide(nl.sum(t[:, j, k * 4:(k + 1) * 4], axis=[1], keepdims=True), 4.0)
    nl.store(out, value=res)
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_a_p_by_1_value_fills_an_integer_indexed_view(mode):
    x = np.random.default_rng(3).standard_normal((64, 2, 12)).astype(np.float32)
    ref = x.reshape(64, 2, 3, 4).mean(-1)
    assert np.allclose(column_means_into_view(x, mode=mode), ref, rtol=1e-6, atol=1e-6)


@nki.jit
def early_exit_tiles(x):
    """A tile-level early exit on loop variables only (the samples' causal flash-attention backward):
    traced with the loops unrolled, each iteration's branch decided at trace time."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        for j in nl.affine_range(x.shape[1] // 64):
            t = nl.load(x[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64])
            if (i + 1) * 128 - 1 >= j * 64:            # at or below the diagonal: keep
                nl.store(out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], value=nl.exp(t))
            else:
                nl.store(out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], value=nl.multiply(t, 0.0))
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_control_flow_on_loop_variables_unrolls_those_loops(mode):
    x = np.random.default_rng(5).standard_normal((256, 512)).astype(np.float32)
    ref = np.zeros_like(x)
    for i in range(2):
        for j in range(8):
            blk = (slice(i * 128, (i + 1) * 128), slice(j * 64, (j + 1) * 64))
            ref[blk] = np.exp(x[blk]) if (i + 1) * 128 - 1 >= j * 64 else 0.0
    got = early_exit_tiles(x, mode=mode)
    assert np.allclose(got, ref, rtol=1e-6) and np.array_equal(got == 0, ref == 0)
    kernel = early_exit_tiles.trace(x)
    from nki_lite.core import ir
    assert not any(isinstance(n, ir.Loop) for n in kernel.body)      # both loops were unrolled


@nki.jit
def branches_on_an_axis_index(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    if ip < 64:                                              # an axis index: still NL-E802
        nl.store(out, value=nl.load(x))
    return out


def test_control_flow_on_an_axis_index_stays_an_error():
    with pytest.raises(errors.KernelSyntaxError) as ei:
        branches_on_an_axis_index(np.ones((128, 8), np.float32))
    assert ei.value.code == "NL-E802"


@nki.jit
def fill_with_dtype_min(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.full(x.shape, nl.finfo(x.dtype).min, dtype=x.dtype))
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
@pytest.mark.parametrize("dt", [np.float32, "bfloat16", np.float16])
def test_finfo_gives_the_dtypes_limits(mode, dt):
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dt == "bfloat16" else dt
    x = np.zeros((4, 8), dt)
    r = fill_with_dtype_min(x, mode=mode)
    assert r.dtype == np.dtype(dt) and (r == ml_dtypes.finfo(dt).min).all()


def test_finfo_of_an_integer_dtype_is_an_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.finfo(nl.int32)
        return out
    with pytest.raises(errors.NkiLiteError, match="floating-point dtype"):
        k(np.zeros((4, 8), np.float32))


# ------------------------------------------------------------------------------ compiler backend names

def test_compiler_backend_annotation_types_resolve_to_nki_lite_classes():
    """nki-samples' utilities annotate with `local_tile` and `TileIndex` from the compiler's backend."""
    nki_lite.compat.install()
    from neuronxcc.nki.compiler.backends.neuron.indexing import TileIndex
    from neuronxcc.nki.compiler.backends.neuron.tensor import local_tile
    from nki_lite.lang.index import Index
    from nki_lite.lang.tile import Tile
    assert local_tile is Tile and TileIndex is Index

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        assert isinstance(t, local_tile) and isinstance(nl.arange(x.shape[1])[None, :], TileIndex)
        nl.store(out, value=t)
        return out
    x = f32(8, 16)
    np.testing.assert_array_equal(k(x), x)


# ------------------------------------------------------------------------------ a single element load

@nki.jit
def scale_by_first(seed, x):
    """`nl.load(seed[0])` of a 1-D tensor is a [1, 1] tile (a dropout seed, a scale)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    s = nl.load(seed[1])
    assert s.shape == (1, 1)
    nl.store(out, value=nl.multiply(nl.load(x), nl.broadcast_to(s, shape=(x.shape[0], 1))))
    return out


def test_load_of_one_element_of_a_vector_is_a_1x1_tile(mode):
    seed, x = np.array([2.0, -3.0, 5.0], np.float32), f32(64, 8)
    np.testing.assert_array_equal(scale_by_first(seed, x, mode=mode), x * np.float32(-3.0))


def test_load_of_one_element_past_the_end_is_out_of_bounds(mode):
    @nki.jit
    def k(seed):
        out = nl.ndarray((1, 1), seed.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(seed[3]))
        return out
    with pytest.raises(errors.NkiLiteError) as e:
        k(np.zeros(3, np.float32), mode=mode)
    assert e.value.code == "NL-E501"


# ------------------------------------------------------------------------------ tensor.view(dtype)

@nki.jit
def bit_views(x):
    """Load fp32 bits as int32 through a view, and store int32 bits into an fp32 output's view."""
    mag = nl.ndarray(x.shape, nl.int32, buffer=nl.shared_hbm)
    same = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    bits = nl.load(x.view(nl.int32))
    nl.store(mag, value=nl.bitwise_and(bits, 0x7FFFFFFF))
    nl.store(same.view(nl.int32), value=bits)
    return mag, same


def test_view_reinterprets_the_same_bytes(mode):
    x = f32(128, 32)
    x[0, :4] = [np.nan, -np.inf, -0.0, 1e-45]
    mag, same = bit_views(x, mode=mode)
    np.testing.assert_array_equal(mag, x.view(np.int32) & 0x7FFFFFFF)
    np.testing.assert_array_equal(same.view(np.uint32), x.view(np.uint32))


@pytest.mark.parametrize("body", [
    "nl.store(out, value=nl.load(x.view(nl.float16)))",          # a different element size
    "nl.store(out, value=nl.load(x).view(nl.int32))",             # an on-chip tile
])
def test_view_cases_not_built_are_nl_e904(body):
    ns = {"nl": nl}
    src = f"def k(x):\n    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n    {body}\n    return out\n"
    exec(compile(src, "<view>", "exec"), ns)
    with pytest.raises(errors.NkiLiteError) as e:
        nki.jit(ns["k"])(f32(8, 8))
    assert e.value.code == "NL-E904"


def test_mgrid_names_axes_y_and_z(mode):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:x.shape[0], 0:x.shape[1], 0:x.shape[2], 0:x.shape[3]]
        nl.store(out[g.p, g.x, g.y, g.z], value=nl.load(x[g.p, g.x, g.y, g.z]))
        return out
    x = f32(4, 3, 2, 5)
    np.testing.assert_array_equal(k(x, mode=mode), x)
    with pytest.raises(errors.NkiLiteError):
        nl.mgrid[0:4, 0:3].y


# ------------------------------------------------------------------------------ masks & Python bools

@nki.jit
def gated_rows(x, causal, windowed):
    """`if (i < n) & causal_mask & sliding_mask:` with either mask a plain Python True when its feature
    is off; and mask= terms combined with a trace-time bool."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    n_tiles = x.shape[0] // 32
    ip, jf = nl.mgrid[0:32, 0:x.shape[1]]
    for i in nl.affine_range(n_tiles + 1):
        causal_mask = (i >= 1) if causal else True
        sliding_mask = (i < 3) if windowed else True
        if (i < n_tiles) & causal_mask & sliding_mask:
            t = nl.load(x[i * 32 + ip, jf])
            nl.store(out[i * 32 + ip, jf], value=nl.negative(t))
        else:
            if i < n_tiles:
                nl.store(out[i * 32 + ip, jf], value=nl.zeros((32, x.shape[1]), x.dtype))
    return out


@pytest.mark.parametrize("causal,windowed", [(False, False), (True, False), (True, True)])
def test_index_conditions_combine_with_python_bools(mode, causal, windowed):
    x = f32(128, 16)
    keep = [i for i in range(4) if (not causal or i >= 1) and (not windowed or i < 3)]
    want = np.zeros_like(x)
    for i in keep:
        want[i * 32:(i + 1) * 32] = -x[i * 32:(i + 1) * 32]
    np.testing.assert_array_equal(gated_rows(x, causal, windowed, mode=mode), want)


@pytest.mark.parametrize("flag", [True, False])
def test_mask_term_and_a_python_bool(mode, flag):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        t = nl.load(x)
        r = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)
        r[ip, jf] = nl.exp(t, mask=(jf < 5) & flag)
        nl.store(out, value=r)
        return out
    x = f32(16, 8)
    want = np.zeros_like(x)
    if flag:
        want[:, :5] = k(x, mode="interpret")[:, :5]      # the definition, which the JIT matches bit for bit
        np.testing.assert_allclose(want[:, :5], np.exp(x[:, :5]), rtol=2e-6)
    np.testing.assert_array_equal(k(x, mode=mode), want)


# ------------------------------------------------------------------------------ the corpus harness

def test_corpus_plugin_does_not_collect_test_named_kernels(monkeypatch):
    """The public test files run under unittest, which collects only TestCase methods; a module-level
    `@nki.jit def test_nl_broadcast(in_tensor)` is a kernel, so nki_lite/tools/corpus_plugin.py
    tells pytest not to collect it (it would otherwise fail for a missing `in_tensor` fixture)."""
    import importlib
    from nki_lite.runtime import kernel as _k
    # the plugin rebinds these on import: restore them after the test
    monkeypatch.setattr(nki, "simulate_kernel", nki.simulate_kernel)
    monkeypatch.setattr(_k, "simulate_kernel", _k.simulate_kernel)
    monkeypatch.setitem(_k._LEGACY_MODES, "simulation", _k._LEGACY_MODES["simulation"])
    plugin = importlib.import_module("nki_lite.tools.corpus_plugin")

    @nki.jit
    def test_like_kernel(in_tensor):
        return in_tensor

    def test_plain():
        pass
    assert plugin.pytest_pycollect_makeitem(None, "test_like_kernel", test_like_kernel) == []
    assert plugin.pytest_pycollect_makeitem(None, "test_plain", test_plain) is None

def test_corpus_collection_error_names_the_missing_module():
    """A corpus test file that fails to import is reported with the exception that stopped it (the
    missing module), not pytest's generic "ImportError while importing test module" first line."""
    from nki_lite.tools.checkdir import collection_error
    text = ("ImportError while importing test module '/x/test_attn.py'.\n"
            "Traceback:\n"
            "test_attn.py:10: in <module>\n"
            "    from scipy.special import softmax\n"
            "E   ModuleNotFoundError: No module named 'scipy'\n")
    assert collection_error(text) == "ModuleNotFoundError: No module named 'scipy'"
    assert collection_error("plain failure\nmore") == "plain failure"
