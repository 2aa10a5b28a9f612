"""Messages that used to mislead (issue #10, section 4): each asserts the diagnosis (code, line, the
facts in the message), in both modes where the error is raised while tracing."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, _ = marker_helpers(__file__)
MODES = ("interpret", "jit")


def raised(call, cls, name, marker):
    with pytest.raises(cls) as ei:
        call()
    e = ei.value
    assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
    return e


@nki.jit
def branch_on_element(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    if t[0, 0] > 0:  # MARK-IF
        nl.store(out, t)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_if_on_a_tile_element_is_control_flow_not_rank(mode):
    e = raised(lambda: branch_on_element(np.ones((128, 64), np.float32), mode=mode),
               errors.KernelSyntaxError, "control_flow_on_tile", "MARK-IF")
    assert "`if`" in e.message and "t[0, 0] > 0" in e.message and "rank" not in e.message
    assert "nl.where" in e.hint or "mask" in e.hint


@nki.jit
def one_too_many(x):
    n = x.shape[0] // 128
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n + 1):
        t = nl.load(x[i * 128:(i + 1) * 128, :])  # MARK-OBO
        nl.store(out[i * 128:(i + 1) * 128, :], value=t)
    return out


def test_a_whole_extra_iteration_is_out_of_bounds_not_a_ragged_tail():
    e = raised(lambda: one_too_many.trace(spec((4096, 64))), errors.IndexOutOfBoundsError, "out_of_bounds", "MARK-OBO")
    assert "not a multiple" not in e.message
    assert "Iteration i=32 lies entirely past the end" in e.message and "runs 33 iterations" in e.message
    assert "32" in e.hint


@nki.jit
def ragged(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((x.shape[0] + 127) // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])  # MARK-RAGGED
        nl.store(out[i * 128:(i + 1) * 128, :], value=t)
    return out


def test_a_real_ragged_tail_is_still_a_ragged_tail():
    e = raised(lambda: ragged.trace(spec((4000, 64))), errors.IndexOutOfBoundsError, "ragged_tail", "MARK-RAGGED")
    assert "4000 is not a multiple of the tile size" in e.message


@nki.jit
def calls_itself(x, depth=0):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    if depth == 0:
        return calls_itself(x, depth + 1)  # MARK-SELF
    nl.store(out, nl.load(x))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_a_kernel_calling_itself_is_reported_as_recursion(mode):
    e = raised(lambda: calls_itself(np.ones((128, 8), np.float32), mode=mode),
               errors.KernelSyntaxError, "recursive_kernel", "MARK-SELF")
    assert "'calls_itself' calls itself" in e.message and "numpy" not in e.message


@nki.jit
def counts_down(x, n=2):
    if n == 0:
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out
    counts_down(np.zeros((1, 1), np.float32), n - 1)  # MARK-SELF-CONST
    return counts_down(x, 0)


def test_a_kernel_calling_itself_with_constants_is_recursion_too():
    e = raised(lambda: counts_down.trace(spec((128, 8))), errors.KernelSyntaxError, "recursive_kernel",
               "MARK-SELF-CONST")
    assert "'counts_down' calls itself" in e.message


@nki.jit
def copy_kernel(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


@nki.jit
def calls_another(x):
    return copy_kernel(x)  # MARK-OTHER


@pytest.mark.parametrize("mode", MODES)
def test_calling_another_kernel_traces_it_inline(mode):
    """NKI traces a jitted kernel called inside a kernel into its caller (legacy mode="trace" helpers)."""
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    assert np.array_equal(calls_another(x, mode=mode), x)


@nki.jit
def uses_loop_var_in_python(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for row in nl.affine_range(2, 10, 2):
        for j in nl.affine_range(row):  # MARK-BOUND
            nl.store(out, nl.load(x))
    return out


@nki.jit
def branches_on_loop_var(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for blk in nl.affine_range(4):
        if blk > 1:  # MARK-BRANCH
            nl.store(out, nl.load(x))
    return out


@nki.jit
def divides_loop_var(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for tile_idx in nl.affine_range(4):
        # with an axis index: loop variables alone would unroll the loop instead of raising
        half = (tile_idx + nl.arange(1)[:, None]) // 2  # MARK-DIV
        nl.store(out[half * 128:(half + 1) * 128, :], nl.load(x[half * 128:(half + 1) * 128, :]))
    return out


def test_loop_variables_carry_the_users_names():
    e = raised(lambda: divides_loop_var.trace(spec((512, 8))), errors.KernelSyntaxError, "bad_index", "MARK-DIV")
    assert "tile_idx" in e.message and "// 2" in e.message and "i0" not in e.message
    e = raised(lambda: uses_loop_var_in_python.trace(spec((128, 8))), errors.KernelSyntaxError, "bad_loop",
               "MARK-BOUND")
    assert "`row`" in e.message and "i0" not in e.message
    kernel = branches_on_loop_var.trace(spec((128, 8)))        # loop variables only: traced unrolled
    from nki_lite.core import ir
    assert sum(1 for i, _ in ir.walk(kernel.body) if i.op == "dma_copy") == 4   # blk = 2, 3: load + store


@nki.jit
def wide_transpose(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.transpose(t))  # MARK-T
    return out


@pytest.mark.parametrize("mode", MODES)
def test_transpose_over_128_is_blamed_on_the_users_tile(mode):
    e = raised(lambda: wide_transpose(np.ones((128, 256), np.float32), mode=mode), errors.ShapeError,
               "free_size_limit", "MARK-T")
    assert "[128, 256]" in e.message and "(256, 128)" not in e.message


@nki.jit
def too_tall(x):
    t = nl.ndarray((256, 64), x.dtype, buffer=nl.sbuf)  # MARK-TALL
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


def test_a_too_tall_tile_is_still_reported_at_its_creation():
    e = raised(lambda: too_tall.trace(spec((128, 64))), errors.ShapeError, "partition_limit", "MARK-TALL")
    assert "256" in e.message


@pytest.mark.parametrize("shape", ((128,), (2, 128, 64)))
@pytest.mark.parametrize("mode", MODES)
def test_stdlib_wrappers_name_the_expected_shape(shape, mode):
    from nki_lite.stdlib import norm_kernels as norms, softmax_kernels as softmax
    for call, kernel, want in (
            (lambda x: softmax.row_softmax(x, mode=mode), "row_softmax", "x to be a 2-D tensor of shape [rows, cols]"),
            (lambda x: norms.rmsnorm_tutorial(x, np.ones((64,), np.float32), mode=mode), "rmsnorm_tutorial",
             "a_tensor to be a 2-D tensor of shape [num_rows, width]")):
        with pytest.raises(errors.ArgumentError) as ei:
            call(np.ones(shape, np.float32))
        e = ei.value
        assert e.code == "NL-E901" and f"'{kernel}' expects {want}" in e.message, str(e)
        assert f"of shape {shape}" in e.message and "stdlib" in e.loc.file
