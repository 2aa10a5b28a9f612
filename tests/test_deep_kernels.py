"""Deep Python recursion while tracing and deep loop nests (issue 10, "Crashes and hangs")."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers

HERE, line, _ = marker_helpers(__file__)
MODES = ["interpret", "jit"]


def _forever(t, n):
    return _forever(t + 1.0, n - 1)  # MARK-RECURSE


@nki.jit
def unbounded(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, _forever(nl.load(a), 3))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_unbounded_helper_recursion_is_a_coded_error_at_the_call(mode):
    with pytest.raises(errors.KernelSyntaxError) as ei:
        unbounded(np.zeros((128, 64), np.float32), mode=mode)
    e = ei.value
    assert e.code == "NL-E809" and e.loc.file == HERE and e.loc.line == line("MARK-RECURSE")
    assert "_forever" in str(e) and "recursion" in str(e) and e.hint


def _nest(depth):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)

        def go(d):
            if d == 0:
                t[...] = t * 1.5 + 1.0
                return
            for _ in nl.sequential_range(2 if d % 100 == 0 else 1):
                go(d - 1)
        go(depth)
        nl.store(out, t)
        return out
    return k


def test_300_nested_loops_run_in_the_jit_like_the_interpreter():
    """The JIT failed with RecursionError (deep dataclass comparison of the loop nest)."""
    a = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)
    k = _nest(300)
    want = k(a, mode="interpret")
    got = k(a, mode="jit")
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert not np.array_equal(want, a)
