"""The corpus sweep's machinery (tools/budget.py, tools/checkdir.py, tools/corpus_plugin.py) and the false
positives the sweep's warning audit found.

- A case past its wall-clock budget is a FAIL saying so and the sweep goes on; a case on the exclusion
  list is "left out" with its reason, printed after the summary, in process and under pytest; every
  warning a case emits is listed (the audit).
- Capacity (NL-W401) of a directly allocated tensor counts its physical tiles: a PSUM tensor whose
  blocks rotate through one bank (`mod_alloc(num_bank_tiles=(1,))`, the pattern of nki-samples'
  allocated fused RMSNorm-QKV kernel) holds one bank, not one per block.
"""
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite.lower.verify_memory import CapacityWarning
from nki_lite.tools import budget, checkdir

from .markers import spec


@pytest.fixture(params=["interpret", "jit"])
def mode(request):
    return request.param


# ------------------------------------------------------------------------------ budgets

def test_deadline_stops_a_slow_block_and_restores_the_alarm():
    t0 = time.perf_counter()
    with pytest.raises(budget.CaseTimeout, match="per-case budget of 0.2 s"):
        with budget.deadline(0.2):
            while True:
                time.sleep(0.01)
    assert time.perf_counter() - t0 < 5
    with budget.deadline(0.5):               # a block within its budget is untouched
        time.sleep(0.01)
    time.sleep(0.6)                          # and no alarm is left armed after it


def test_record_warnings_sees_warnings_a_filter_would_hide():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with budget.record_warnings() as seen:
            warnings.warn("first line\nsecond", UserWarning)
            warnings.warn("first line\nsecond", UserWarning)
            warnings.warn("other", DeprecationWarning)
    assert seen == ["UserWarning: first line", "DeprecationWarning: other"]


def test_exclusions_match_label_pattern_and_mode():
    table = [budget.Exclusion("src", r"big\[.*-8192-", "too big", ("interpret",))]
    assert budget.excluded(table, "src", "big[1-8192-2]", "interpret") == "too big"
    assert budget.excluded(table, "src", "big[1-8192-2]", "jit") is None
    assert budget.excluded(table, "src", "big[1-4096-2]", "interpret") is None
    assert budget.excluded(table, "other", "big[1-8192-2]", "interpret") is None


def _slow():
    time.sleep(30)


def _warns():
    warnings.warn("looks wrong", UserWarning)


def test_inprocess_sweep_reports_timeouts_exclusions_and_warnings(monkeypatch):
    monkeypatch.setenv("NKI_LITE_MODE", "jit")     # the runner sets the mode per check: restored after the test
    checks = [("fast", lambda: None), ("slow", _slow), ("warns", _warns), ("huge", _slow)]
    table = [budget.Exclusion("mine", "huge", "needs 13 GB")]
    lines = []
    runner = lambda d: [checkdir.inprocess_checks("mine", checks, timeout=0.5, exclusions=table)]  # noqa: E731
    failures, passes = checkdir._run(["d"], ["interpret"], [], lines.append, False, runner)
    assert (failures, passes) == (1, 2)
    text = "\n".join(lines)
    assert "mine (d): interpret: 2 passed, 1 failed, 1 left out" in text
    assert "CaseTimeout: over the per-case budget of 0.5 s" in text
    assert "left out: mine huge (interpret): needs 13 GB" in text
    assert "1  UserWarning: looks wrong  [mine warns (interpret)]" in text


PYTEST_FILE = '''
import time, warnings

def test_quick():
    pass

def test_stuck():
    time.sleep(60)

def test_warns():
    warnings.warn("suspicious", UserWarning)

def test_huge_8192():
    raise MemoryError("should not have run")
'''


def test_pytest_sweep_reports_timeouts_exclusions_and_warnings(tmp_path):
    (tmp_path / "test_cases.py").write_text(textwrap.dedent(PYTEST_FILE))
    table = [budget.Exclusion("t", r"huge_\d+", "reference too large here")]
    _, run = checkdir.pytest_checks("t", tmp_path, [], [], timeout=3, exclusions=table)
    rows = {r[0].split("::")[-1]: r for r in run("interpret", [])}
    assert rows["test_quick"][1] == "pass"
    assert rows["test_stuck"][1] == "FAIL" and "per-case budget of 3 s" in rows["test_stuck"][2]
    assert rows["test_warns"][1] == "pass" and rows["test_warns"][4] == ["UserWarning: suspicious"]
    assert rows["test_huge_8192"][1:3] == ("left out", "reference too large here")
    assert len(rows) == 4


def test_corpus_script_prints_budgets_and_caps_memory(tmp_path):
    """check_corpus.py's --mem-cap is an address-space limit its subprocesses inherit."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, resource; sys.path.insert(0, 'tutorials'); import check_corpus; "
            "check_corpus.cap_memory(6); print(resource.getrlimit(resource.RLIMIT_AS)[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.stdout.split()[-1] == str(6 * 2 ** 30), out.stderr


# ------------------------------------------------------------------------------ capacity of direct allocations

@nki.jit
def rotating_psum(a, w, bank_tiles):
    """Row groups of `a` ([2 * 128, 16 * 512]) transposed 128 columns at a time through a direct PSUM tensor
    of 16 blocks ([16, par_dim(128), 512] fp32: a bank each) in `bank_tiles` physical banks, under a mask on the
    row group (as nki-samples' kernel masks its last tiles), next to an automatically allocated PSUM
    accumulator. The masked writes keep the tensor from being iteration-private, so every block counts."""
    rows = a.shape[0]
    out = nl.ndarray((rows, 16 * 512), a.dtype, buffer=nl.shared_hbm)
    tot = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    ident = nl.shared_constant(np.identity(128, dtype=np.float32), dtype=nl.float32)
    eye = nl.ndarray((128, 128), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    eye[...] = nl.load(ident)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    wt = nl.load(w)
    for r in nl.affine_range(2):
        t = nl.ndarray((16, nl.par_dim(128), 512), nl.float32,
                       buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(bank_tiles,)))
        live = r * 128 < rows
        for m in nl.affine_range(16):
            x = nl.load(a[r * 128:(r + 1) * 128, m * 512:(m + 1) * 512])
            for j in nl.affine_range(4):
                t[m, :, j * 128:(j + 1) * 128] = nisa.nc_matmul(x[:, j * 128:(j + 1) * 128], eye, is_transpose=True,
                                                                mask=live)
            y = nl.copy(t[m], dtype=a.dtype, mask=live)
            nl.store(out[r * 128:(r + 1) * 128, m * 512:(m + 1) * 512], value=y)
            acc += nisa.nc_matmul(wt, y)
    nl.store(tot, value=nl.copy(acc))
    return out, tot


def _blockwise_transpose(a):
    return np.block([[a[r * 128:(r + 1) * 128, k * 128:(k + 1) * 128].T for k in range(64)] for r in range(2)])


def test_a_direct_psum_tensor_rotating_through_one_bank_holds_one_bank(mode):
    a = np.random.default_rng(5).standard_normal((256, 16 * 512)).astype(np.float32)
    w = np.random.default_rng(6).standard_normal((128, 128)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        out, tot = rotating_psum(a, w, 1, mode=mode)
    want = _blockwise_transpose(a)
    np.testing.assert_array_equal(out, want)
    want_tot = sum(w.T.astype(np.float64) @ want[r * 128:(r + 1) * 128, m * 512:(m + 1) * 512]
                   for r in range(2) for m in range(16))
    np.testing.assert_allclose(tot, want_tot, rtol=1e-4, atol=1e-2)


def test_a_direct_psum_tensor_in_eight_banks_plus_an_automatic_tile_is_over():
    """The same kernel with 8 physical banks for the tensor: 8 banks placed + the automatic accumulator
    exceed trn2's 8 PSUM banks (the count is physical tiles, not a blanket pass for direct tensors)."""
    with pytest.warns(CapacityWarning) as rec:
        rotating_psum.trace(spec((256, 16 * 512)), spec((128, 128)), 8, target="trn2")
    msg = str(rec[0].message)
    assert "NL-W401" in msg and "placed in 8 physical tile(s)" in msg and "'t'" in msg


# ------------------------------------------------------------------------------ blocks live at once

@nki.jit
def pipelined_psum(a, b, fill_first):
    """Software pipelining over an automatically allocated PSUM tensor of 16 blocks (one bank each):
    block 0 is computed before the loop (the prologue), block i in iteration i, each read right after
    its matmul (nki-samples' attention v11 pattern), so about two banks hold a value at once. With
    `fill_first`, every block is computed in a first loop and read in a second: all 16 are live."""
    out = nl.ndarray((128, 16 * 512), nl.float32, buffer=nl.shared_hbm)
    qk = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    at = nl.load(a)
    if fill_first:
        for i in nl.affine_range(16):
            qk[i] = nisa.nc_matmul(at, nl.load(b[:, i * 512:(i + 1) * 512]))
        for i in nl.affine_range(16):
            nl.store(out[:, i * 512:(i + 1) * 512], value=nl.copy(qk[i]))
        return out
    qk[0] = nisa.nc_matmul(at, nl.load(b[:, 0:512]))
    nl.store(out[:, 0:512], value=nl.copy(qk[0]))
    for i in nl.sequential_range(15):
        qk[i + 1] = nisa.nc_matmul(at, nl.load(b[:, (i + 1) * 512:(i + 2) * 512]))
        nl.store(out[:, (i + 1) * 512:(i + 2) * 512], value=nl.copy(qk[i + 1]))
    return out


def test_a_pipelined_block_tensor_costs_the_blocks_live_at_once(mode):
    a = np.random.default_rng(7).standard_normal((128, 128)).astype(np.float32)
    b = np.random.default_rng(8).standard_normal((128, 16 * 512)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        got = pipelined_psum(a, b, False, mode=mode)
    np.testing.assert_allclose(got, a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_a_block_tensor_filled_before_it_is_read_still_costs_every_block():
    with pytest.warns(CapacityWarning) as rec:
        pipelined_psum.trace(spec((128, 128)), spec((128, 16 * 512)), True, target="trn2")
    msg = str(rec[0].message)
    assert "NL-W401" in msg and "'qk'" in msg and "16 block(s) of 2048 B" in msg


def test_close_compares_in_chunks_like_at_once(monkeypatch):
    """checkdir.close compares a chunk at a time (bounded float64 temporaries); the verdict and the
    reported error are those of the whole array."""
    monkeypatch.setattr(checkdir, "_CHUNK", 7)
    want = np.linspace(-3, 3, 50, dtype=np.float32).reshape(5, 10)
    checkdir.close(want * (1 + 1e-5), want, 1e-4, 1e-4)
    bad = want.copy()
    bad[4, 9] += 1.0                                   # in the last, partial chunk
    with pytest.raises(AssertionError, match="max scaled error"):
        checkdir.close(bad, want, 1e-4, 1e-4)
    with pytest.raises(AssertionError, match="1 elements differ"):
        checkdir.close(bad, want, 0, 0)
    with pytest.raises(AssertionError, match="shape"):
        checkdir.close(want.T, want)
