"""The interpreter's strided-view access path (runtime/machine.py `_slices`): accesses that are basic
slices of a buffer read and write without index arrays, and must touch the same elements in the same
order as the general fancy-indexing path. Each kernel here runs twice in interpret mode, once with
the view path switched off, and the bits must agree (and with the JIT)."""
from __future__ import annotations

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite.runtime import machine

from .oracle import assert_bits


def _general_only(monkeypatch):
    monkeypatch.setattr(machine.Machine, "_slices", lambda self, acc, env, mask, for_write: None)


@nki.jit
def _strided(x):
    out = nl.ndarray((4, 64, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        ip, jf = nl.arange(64)[:, None], nl.arange(3)[None, :]
        t = nl.load(x[i, 2 * ip + 1, 10 - 3 * jf])          # strided and reversed (negative step)
        col = nl.load(x[i, ip, 0])                           # an int-indexed dimension (dropped)
        nl.store(out[i, ip, jf], nl.add(t, col))
    return out


@nki.jit
def _broadcast_and_tails(x):
    out = nl.ndarray((128, 10), dtype=nl.float32, buffer=nl.shared_hbm)
    row = nl.load(x[0:1, 0:10])                              # [1, 10], broadcast in the add
    body = nl.load(x[0:128, 0:10])
    nl.store(out[0:128, 0:10], nl.multiply(body, row))
    ip, jf = nl.arange(128)[:, None], nl.arange(4)[None, :]
    nl.store(out[ip, jf + 6], nl.load(x[ip, jf]), mask=(ip < 100))   # masked: the general path
    return out


@pytest.mark.parametrize("case", ["strided", "broadcast_tails"])
def test_view_path_equals_general_path_and_jit(case, monkeypatch):
    rng = np.random.default_rng(11)
    if case == "strided":
        kern, x = _strided, rng.standard_normal((4, 130, 11)).astype(np.float32)
    else:
        kern, x = _broadcast_and_tails, rng.standard_normal((128, 10)).astype(np.float32)
    fast = kern(x, mode="interpret")
    assert_bits(fast, kern(x), f"{case}: interpreter vs JIT")
    _general_only(monkeypatch)
    assert_bits(fast, kern(x, mode="interpret"), f"{case}: view path vs general path")



def test_all_true_mask_takes_the_view_path(monkeypatch):
    """A mask that selects every element at this iteration (a ragged loop's full tiles) evaluates to
    None, so its accesses are views; the ragged last tile keeps its mask and the general path. The
    bits agree with the general path everywhere and the unwritten tail stays NaN."""
    @nki.jit
    def k(x):
        out = nl.ndarray((300, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            ip, jf = nl.arange(128)[:, None], nl.arange(8)[None, :]
            live = (i * 128 + ip < 300)
            t = nl.load(x[i * 128 + ip, jf], mask=live)
            nl.store(out[i * 128 + ip, jf], nl.multiply(t, 2.0, mask=live), mask=live)
        return out

    x = np.random.default_rng(2).standard_normal((300, 8)).astype(np.float32)
    general = []
    real = machine.Machine._indices
    monkeypatch.setattr(machine.Machine, "_indices",
                        lambda self, acc, env, mask, instr: general.append(env.get("i0", env)) or
                        real(self, acc, env, mask, instr))
    got = k(x, mode="interpret")
    assert general and all(i == 2 for i in general), general     # only the ragged tile's accesses
    assert_bits(got, (x * np.float32(2)).astype(np.float32))
    monkeypatch.setattr(machine.Machine, "eval_mask",
                        lambda self, instr, env, shape: None if instr.mask is None else instr.mask.evaluate(env, shape))
    _general_only(monkeypatch)
    assert_bits(k(x, mode="interpret"), got)
