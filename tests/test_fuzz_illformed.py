"""Fuzzing ill-formed kernels (tests/kernelgen_bad.py): every kernel with one mistake raises an
nki_lite error with a code that diagnoses it, in both modes — never another exception, a crash or a
hang. The examples run in two subprocesses (python -X faulthandler) so a segfault or a hang fails this
test instead of killing pytest; each example has a faulthandler timeout. 2,000 examples by default,
20,000 with NKI_LITE_SLOW_TESTS=1."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from . import kernelgen_bad as KB

SLOW = os.environ.get("NKI_LITE_SLOW_TESTS") == "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _batch(start: int, count: int) -> subprocess.Popen:
    env = dict(os.environ)
    for k in ("NKI_LITE_SHUFFLE", "NKI_LITE_DEBUG_NANS", "NKI_LITE_DEBUG_UNINIT"):
        env.pop(k, None)                     # each case sets the knobs its mistake needs
    return subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "tests.kernelgen_bad", str(start),
                             str(count), "60"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_ill_formed_kernels_raise_nki_lite_errors_in_both_modes():
    total = 20_000 if SLOW else 2_000
    half = total // 2
    procs = [_batch(0, half), _batch(half, total - half)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        assert p.returncode == 0, f"fuzz batch crashed or hung (status {p.returncode}):\n{err[-4000:]}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["cases"] for r in results) == total
    kinds = {}
    for r in results:
        for k, n in r["kinds"].items():
            kinds[k] = kinds.get(k, 0) + n
    assert set(kinds) == set(KB.KINDS) and min(kinds.values()) >= total // len(KB.KINDS) - 1
    problems = [p for r in results for p in r["problems"]]
    assert not problems, f"{len(problems)} problems, first ones:\n" + "\n\n".join(problems[:5])


def test_every_kind_builds_and_is_diagnosed_in_process():
    """One case per kind, in this process: the expected codes really are what is raised."""
    for seed in range(len(KB.KINDS)):
        c = KB.case(seed)
        assert KB.check(c) == [], repr(c)


def test_checker_flags_accepted_kernels_and_foreign_exceptions():
    """The property can fail: a well-formed kernel is reported as accepted, and a kernel that raises a
    non-nki_lite exception is reported as such."""
    src, R, F = KB._frame(__import__("random").Random(0), rows=128, cols=8)
    ok = KB.Bad("none", src, (np.ones((R, F), np.float32),), frozenset({"NL-E101"}), fname="<kb test ok>")
    assert KB.check(ok) == ["interpret: accepted without an error", "jit: accepted without an error"]
    boom = KB.Bad("none", "@nki.jit\ndef k(a):\n    return 1 // 0\n", (np.ones((2, 2), np.float32),),
                  frozenset({"NL-E101"}), fname="<kb test boom>")
    got = KB.check(boom)
    assert len(got) == 2 and all("ZeroDivisionError (not an NkiLiteError)" in g for g in got), got


@pytest.mark.parametrize("seed", [3, 4])
def test_cases_are_reproducible_from_their_seed(seed):
    a, b = KB.case(seed), KB.case(seed)
    assert a.src == b.src and a.kind == b.kind and a.env == b.env
