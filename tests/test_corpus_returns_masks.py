"""Legacy-corpus patterns, wave 3: returned on-chip tiles, `and` / `or` of index comparisons, FP8
double-row matmul with [K, 2, M] operands, and the corpus harness's exact-type and instance-type
handling. Each pattern is re-created in our own code and runs on both backends against numpy.
"""
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .test_corpus_patterns import RNG, f32, mode  # noqa: F401 - the shared backend fixture and inputs


# ------------------------------------------------------------------------------ returning an SBUF tile

@nki.jit
def returns_a_tile(x):
    """A kernel returning its SBUF result tile next to an HBM tensor (NKI's simulator returns its
    contents: the documented range_select example does this)."""
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    doubled = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    doubled[...] = nl.multiply(nl.load(x), 2.0)
    nl.store(total, value=nl.sum(doubled, axis=1, keepdims=True))
    return doubled, total


def test_a_returned_sbuf_tile_is_an_output_with_its_contents(mode):
    x = f32(64, 96)
    doubled, total = returns_a_tile(x, mode=mode)
    np.testing.assert_array_equal(doubled, x * 2)
    np.testing.assert_allclose(total[:, 0], (x * 2).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_returned_part_of_a_tile_is_still_an_error():
    @nki.jit
    def k(x):
        t = nl.load(x)
        return t[0:8, :]
    with pytest.raises(errors.NkiLiteError) as e:
        k(f32(16, 8))
    assert e.value.code == "NL-E901"


# ------------------------------------------------------------------------------ and / or on index comparisons

@nki.jit
def corner_exp(x, flag):
    """mask=(ip < P/2 and jf < F/2), and the same combined with a trace-time bool through and / or."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    part = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    p, f = x.shape
    ip, jf = nl.mgrid[0:p, 0:f]
    t = nl.load(x)
    r = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)
    r[ip, jf] = nl.negative(t, mask=(ip < p // 2 and jf < f // 2))
    nl.store(out, value=r)
    s = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)
    s[ip, jf] = nl.negative(t, mask=(flag and jf < 3) or False)
    nl.store(part, value=s)
    return out, part


@pytest.mark.parametrize("flag", [True, False])
def test_and_of_index_comparisons_is_their_conjunction(mode, flag):
    x = f32(32, 16)
    out, part = corner_exp(x, flag, mode=mode)
    want = np.zeros_like(x)
    want[:16, :8] = -x[:16, :8]
    np.testing.assert_array_equal(out, want)
    want_part = np.zeros_like(x)
    if flag:
        want_part[:, :3] = -x[:, :3]
    np.testing.assert_array_equal(part, want_part)


def test_or_of_two_index_comparisons_is_a_mask_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        nl.store(out[ip, jf], value=nl.load(x[ip, jf]), mask=(ip < 4 or jf < 2))
        return out
    with pytest.raises(errors.NkiLiteError) as e:
        k(f32(8, 8))
    assert e.value.code == "NL-E806"


def test_and_of_plain_values_keeps_python_meaning(mode):
    @nki.jit
    def k(x, n):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        scale = (n > 1 and n) or 1.0          # Python values: 3 -> 3, 0 -> 1.0
        nl.store(out, value=nl.multiply(nl.load(x), scale))
        return out
    x = f32(8, 8)
    np.testing.assert_array_equal(k(x, 3, mode=mode), x * 3)
    np.testing.assert_array_equal(k(x, 0, mode=mode), x)


def test_an_if_on_an_axis_comparison_is_still_an_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        if ip < 4 and jf < 2:
            nl.store(out, value=nl.load(x))
        return out
    with pytest.raises(errors.NkiLiteError) as e:
        k(f32(8, 8))
    assert e.value.code == "NL-E802"


# ------------------------------------------------------------------------------ double-row FP8 matmul

@nki.jit
def double_row(a, b):
    out = nl.ndarray((a.shape[2], b.shape[2]), nl.float32, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    nl.store(out, value=nisa.nc_matmul(ta, tb, perf_mode="double_row_gen3"))
    return out


def test_double_row_matmul_sums_over_the_pair_axis(mode):
    fp8 = ml_dtypes.float8_e5m2
    a = RNG.integers(-3, 4, (128, 2, 8)).astype(fp8)
    b = RNG.integers(-3, 4, (128, 2, 64)).astype(fp8)
    want = np.einsum("kli,klj->ij", a.astype(np.float64), b.astype(np.float64))   # exact: small integers
    np.testing.assert_array_equal(double_row(a, b, mode=mode), want.astype(np.float32))


def test_double_row_with_a_pair_axis_other_than_two_is_an_error():
    fp8 = ml_dtypes.float8_e5m2
    with pytest.raises(errors.NkiLiteError) as e:
        double_row(np.ones((128, 3, 8), fp8), np.ones((128, 3, 64), fp8))
    assert e.value.code == "NL-E105"


# ------------------------------------------------------------------------------ the corpus harness

HARNESS_FILE = '''
import unittest
import nki_lite.errors as E

def get_target_string():          # reads the host's instance type in the public tests
    return ""

def test_sees_the_simulated_instance_type():
    assert get_target_string() == "trn2"

class TestExactTypes(unittest.TestCase):
    def test_exact_builtin_type(self):
        with self.assertRaises(IndexError) as cm:
            raise E.make("indirect_out_of_bounds", "index 9 is out of bounds")
        self.assertEqual(type(cm.exception), IndexError)

    def test_unrelated_type_still_fails(self):
        with self.assertRaises(IndexError) as cm:
            raise E.make("indirect_out_of_bounds", "index 9 is out of bounds")
        self.assertEqual(type(cm.exception), KeyError)
'''


def test_corpus_plugin_exact_builtin_type_and_instance_type(tmp_path):
    """An exact `type(exc) == IndexError` check passes (noted) when nki_lite raised its IndexError
    subclass; a comparison with an unrelated class still fails; `get_target_string()` answers the
    simulated target."""
    (tmp_path / "test_harness.py").write_text(textwrap.dedent(HARNESS_FILE))
    results = tmp_path / "out.jsonl"
    env = dict(os.environ, NKI_LITE_CORPUS_RESULTS=str(results), NKI_LITE_TARGET="trn2")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "nki_lite.tools.corpus_plugin",
                    str(tmp_path / "test_harness.py")], env=env, cwd=tmp_path, capture_output=True, timeout=300)
    rows = {r["id"].split("::")[-1]: r for r in map(json.loads, results.read_text().splitlines())}
    assert rows["test_sees_the_simulated_instance_type"]["outcome"] == "passed"
    assert rows["test_exact_builtin_type"]["outcome"] == "passed"
    assert "IndexOutOfBoundsError" in rows["test_exact_builtin_type"]["error"]
    assert rows["test_unrelated_type_still_fails"]["outcome"] == "failed"


# ------------------------------------------------------------------------------ Python lists of tiles

@nki.jit
def listed_tiles(x):
    """Tiles collected in a Python list inside one affine_range loop and picked by another loop's
    variable (nki-samples' matmul tutorials): those loops are traced unrolled."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0] // 32
    tiles = []
    for i in nl.affine_range(n):
        t = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.sbuf)
        t[...] = nl.load(x[i * 32:(i + 1) * 32, :])
        tiles.append(t)
    for j in nl.affine_range(n):
        rows = []                                  # fresh per iteration: this loop need not unroll for it
        rows.append(nl.multiply(tiles[n - 1 - j], 2.0))
        nl.store(out[j * 32:(j + 1) * 32, :], value=rows[0])
    return out


def test_a_list_of_tiles_indexed_by_a_loop_variable(mode):
    x = f32(128, 16)
    want = np.concatenate([x[k * 32:(k + 1) * 32] for k in reversed(range(4))]) * 2
    np.testing.assert_array_equal(listed_tiles(x, mode=mode), want)


def test_range_of_an_axis_index_is_still_an_error():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(x.shape[0])[:, None]
        for _ in range(ip):
            pass
        return out
    with pytest.raises(errors.NkiLiteError) as e:
        k(f32(8, 8))
    assert e.value.code == "NL-E802"
