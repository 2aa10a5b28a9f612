"""The verifier on legal kernels (no false positives), under `python -O`, and its range solver."""
import ast
import glob
import itertools
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import nki_lite.language as nl
from nki_lite.core.affine import Affine, Cmp
from nki_lite.lower.analysis.ranges import EMPTY, Range, enumerate_points, solve_range
from nki_lite.runtime.kernel import Kernel
from tests.kernels import matmul_tutorial as MT
from tests.kernels import tutorial_style as T
from tests.markers import spec

TARGETS = ("trn1", "trn2", "trn3")
LOWER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nki_lite", "lower")


# every kernel of tests/kernels/tutorial_style.py, with argument sets (several shapes where ragged)
TUTORIAL_ARGS = {
    "spmd_add": [((spec((256, 1024)), spec((256, 1024))), (2, 2))],
    "tiled_matmul": [((spec((256, 256)), spec((256, 1024))), ())],
    "nl_matmul": [((spec((128, 256)), spec((256, 512))), ())],
    "row_softmax": [((spec((300, 64)),), ()), ((spec((130, 33)),), ()), ((spec((256, 512)),), ())],
    "rmsnorm": [((spec((300, 64)), spec((64,))), ()), ((spec((1000, 512), nl.bfloat16), spec((512,), nl.bfloat16)),
                                                        ())],
}
MATMUL_ARGS = {
    "mm_tiled": ((spec((256, 256)), spec((256, 1024))), {}),
    "mm_hoisted": ((spec((256, 256)), spec((256, 1024))), {}),
    "mm_block_free": ((spec((256, 512)), spec((256, 2048))), {}),
    "mm_optimized": ((spec((8192, 4096), nl.bfloat16), spec((8192, 8192), nl.bfloat16)), {}),
}


def _kernels(mod):
    return {name: k for name, k in vars(mod).items() if isinstance(k, Kernel)}


def test_every_tutorial_kernel_has_arguments_here():
    assert set(_kernels(T)) <= set(TUTORIAL_ARGS), set(_kernels(T)) - set(TUTORIAL_ARGS)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(TUTORIAL_ARGS))
def test_tutorial_kernels_verify_on_every_target(name, target):
    k = _kernels(T)[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no partial-coverage warning either
        for args, grid in TUTORIAL_ARGS[name]:
            (k[grid] if grid else k).trace(*args, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(MATMUL_ARGS))
def test_matmul_tutorial_kernels_verify_on_every_target(name, target):
    args, kw = MATMUL_ARGS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MT.KERNELS[name.replace("mm_", "")].trace(*args, target=target, **kw)


def test_tutorial_kernels_still_run():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((130, 33)).astype(np.float32)
    np.testing.assert_allclose(T.row_softmax(x), T.row_softmax_ref(x), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ python -O

def test_no_assert_statements_in_the_verifier():
    files = sorted(glob.glob(os.path.join(LOWER, "verify*.py")))
    assert len(files) >= 2
    for f in files:
        tree = ast.parse(open(f).read(), f)
        asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert not asserts, (f, asserts)


def test_verifier_raises_under_python_O(tmp_path):
    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""
        import math, sys
        import nki_lite as nki, nki_lite.language as nl, nki_lite.typing as nt
        from nki_lite import errors

        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            ip = nl.arange(128)[:, None]
            iy = nl.arange(64)[None, :]
            for i in nl.affine_range(math.ceil(x.shape[0] / 128)):
                nl.store(out[i * 128 + ip, iy], value=nl.load(x[i * 128 + ip, iy]))
            return out

        if sys.flags.optimize != 1:
            sys.exit(4)
        try:
            k.trace(nt.tensor[[1000, 64], nl.float32])
        except errors.IndexOutOfBoundsError as e:
            print(e.code, e.loc.line)
            sys.exit(0)
        sys.exit(3)
    """))
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["NL-E502", "12"], r.stdout


# ------------------------------------------------------------------------------ the range solver

def _brute(e, ext, cons):
    vs = sorted(ext)
    vals = []
    for pt in itertools.product(*[range(ext[v]) for v in vs]):
        env = dict(zip(vs, pt))
        ok = all({"<": lambda a: a < 0, "<=": lambda a: a <= 0, ">": lambda a: a > 0, ">=": lambda a: a >= 0,
                  "==": lambda a: a == 0, "!=": lambda a: a != 0}[c.op](
            c.expr.const + sum(k * env[v] for v, k in c.expr.terms)) for c in cons)
        if ok:
            vals.append(e.const + sum(k * env[v] for v, k in e.terms))
    return (min(vals), max(vals)) if vals else None


def test_solve_range_matches_brute_force():
    rng = np.random.default_rng(7)
    names = ["i0", "i1", "@0", "@1"]
    for _ in range(400):
        ext = {v: int(rng.integers(1, 6)) for v in names}
        def rand_aff():
            return Affine.make(int(rng.integers(-6, 7)),
                               {v: int(rng.integers(-3, 4)) for v in names if rng.random() < 0.6})
        e = rand_aff()
        cons = [Cmp(rand_aff(), str(rng.choice(["<", "<=", ">", ">=", "==", "!="]))) for _ in range(rng.integers(0, 3))]
        want = _brute(e, ext, cons)
        got = solve_range(e, ext, cons)
        if want is None:
            assert got is EMPTY, (e, cons, ext, got)
        else:
            assert isinstance(got, Range) and (got.lo, got.hi) == want, (e, cons, ext, got, want)
            # the witnesses are real points
            for pt, val in ((got.at_lo, want[0]), (got.at_hi, want[1])):
                full = {v: pt.get(v, 0) for v in names}
                assert e.const + sum(k * full[v] for v, k in e.terms) == val


def test_solve_range_gives_up_instead_of_guessing():
    ext = {"a": 4096, "b": 4096, "c": 4096}
    e = Affine.make(0, {"a": 1, "b": 1, "c": 1})
    other = Cmp(Affine.make(-5, {"a": 1, "b": 2, "c": 1}), "<")
    r = solve_range(e, ext, [other], budget=1000)          # over budget: only the box, flagged inexact
    assert isinstance(r, Range) and not r.exact and (r.lo, r.hi) == (0, 3 * 4095)
    assert solve_range(None, ext, [other], budget=1000) is None
    assert enumerate_points([e], ext, (), budget=1000) is None
    # a constraint proportional to the expression still bounds it (sound, not exact)
    r = solve_range(e, ext, [other, Cmp(Affine.make(-5, {"a": 2, "b": 2, "c": 2}), "<=")], budget=1000)
    assert isinstance(r, Range) and not r.exact and (r.lo, r.hi) == (0, 2)
