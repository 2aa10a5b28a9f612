"""A kernel must be a pure function of its arguments (lang/purity.py): traced code that mutates state
outliving the trace gets a KernelPurityWarning at the mutating line; normal kernels get none."""
import warnings

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import KernelPurityWarning

from .markers import line_of as _line_of

HERE = __file__
X = np.ones((128, 4), np.float32)


def line(marker):
    return _line_of(HERE, marker)


def purity_warnings(call):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in rec if issubclass(w.category, KernelPurityWarning)]


def retrace(k):
    k._cache.clear()
    k._fast.clear()


_SEEN = []


def _scale_by_calls(t):
    _SEEN.append(1)  # MARK-APPEND
    return nl.multiply(t, float(len(_SEEN)))


@nki.jit
def counting(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, _scale_by_calls(nl.load(x)))
    return out


def test_helper_keeping_a_list_warns_at_the_append():
    # the silent wrong result of issue #10: 1.0, 1.0, then 2.0 after a retrace
    _SEEN.clear()
    retrace(counting)
    first, ws = purity_warnings(lambda: counting(X))
    assert first[0, 0] == 1.0
    assert len(ws) == 1 and (ws[0].filename, ws[0].lineno) == (HERE, line("MARK-APPEND"))
    msg = str(ws[0].message)
    assert "_SEEN" in msg and "module-level list" in msg and "pure function" in msg
    retrace(counting)
    second, _ = purity_warnings(lambda: counting(X))
    assert second[0, 0] == 2.0                 # what the warning is about


class _Config:
    pass


CONFIG = _Config()
CONFIG.calls = 0


@nki.jit
def sets_attribute(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    CONFIG.calls += 1  # MARK-ATTR
    nl.store(out, nl.load(x))
    return out


def _remember(t, seen=[]):  # noqa: B006 - the bug under test
    seen.append(t)  # MARK-DEFAULT
    return t


@nki.jit
def mutable_default(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, _remember(nl.load(x)))
    return out


def _make_closure_kernel():
    log = {}

    @nki.jit
    def closure_dict(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        log["traces"] = log.get("traces", 0) + 1  # MARK-CLOSURE
        nl.store(out, nl.load(x))
        return out
    return closure_dict


_REGISTRY = []


def _register(items):
    items.append(len(items))


@nki.jit
def passes_global_to_helper(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    _register(_REGISTRY)  # MARK-PASSED
    nl.store(out, nl.load(x))
    return out


@pytest.mark.parametrize("mode", ("interpret", "jit"))
@pytest.mark.parametrize("kernel,marker,what", [
    (sets_attribute, "MARK-ATTR", "module-level _Config 'CONFIG'"),
    (mutable_default, "MARK-DEFAULT", "default argument list 'seen'"),
    (_make_closure_kernel(), "MARK-CLOSURE", "closure dict 'log'"),
    (passes_global_to_helper, "MARK-PASSED", "module-level list '_REGISTRY'"),
], ids=["attribute", "default", "closure", "passed"])
def test_outside_state_mutation_warns_at_its_line(kernel, marker, what, mode):
    retrace(kernel)
    _, ws = purity_warnings(lambda: kernel(X, mode=mode))
    assert len(ws) == 1, [str(w.message) for w in ws]
    assert (ws[0].filename, ws[0].lineno) == (HERE, line(marker))
    assert what in str(ws[0].message)


TABLE = {"scale": 3.0}


@nki.jit
def pure_patterns(x, factors=(1.0, 2.0)):
    # reading module-level data, local lists/dicts, inner helpers writing kernel-local tiles: all pure
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    tiles = []
    cfg = {"n": 0}

    def fill(t):
        acc[...] = t
        tiles.append(t)
        cfg["n"] += 1

    t = nl.load(x)
    for f in factors:
        t = nl.multiply(t, f * TABLE["scale"])
    fill(t)
    nl.store(out, acc)
    return out


def test_pure_kernels_do_not_warn():
    retrace(pure_patterns)
    got, ws = purity_warnings(lambda: pure_patterns(X))
    assert ws == []
    np.testing.assert_array_equal(got, X * 18.0)


def test_stdlib_kernels_do_not_warn():
    import nki_lite.stdlib as S
    from nki_lite.stdlib import norm_kernels as norms, softmax_kernels as softmax
    x = np.ones((200, 64), np.float32)
    for call in (lambda: softmax.row_softmax(x),
                 lambda: norms.rmsnorm_tutorial(np.ones((128, 64), np.float32), np.ones((64,), np.float32)),
                 lambda: S.softmax(x), lambda: S.rmsnorm(x, x[0]), lambda: S.layernorm(x, x[0], x[0]),
                 lambda: S.matmul(x, x.T), lambda: S.attention(x, x, x, causal=True),
                 lambda: S.quantize_fp8(x, axis=0)):
        _, ws = purity_warnings(call)
        assert ws == []
