"""nki_lite.autotune: the model's choice equals independent estimate() calls, skips carry their reason,
choices persist across processes, mistakes are coded errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import nki_lite
import nki_lite.language as nl
from nki_lite.lower.verify_memory import CapacityWarning
from tests.kernels.tunable import matmul_tiles, softmax_tiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MATMUL_CONFIGS = [{"TILE_M": m, "TILE_N": n} for m in (64, 128) for n in (128, 256, 512, 1024)]
SOFTMAX_CONFIGS = [{"TILE_P": p} for p in (32, 64, 128, 256)]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_LITE_CACHE_DIR", str(tmp_path / "cache"))   # hermetic, but persisting
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "1")
    monkeypatch.setenv("NKI_LITE_PROGRESS", "off")


def independent(kernel, args, configs, target):
    """Each config's estimate by a separate nki_lite.estimate() call (None where it fails)."""
    out = []
    for c in configs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", CapacityWarning)
                out.append(nki_lite.estimate(kernel, *args, target=target, **c).total_time_ns)
        except (nki_lite.NkiLiteError, CapacityWarning):
            out.append(None)
    return out


CASES = {
    "matmul": (matmul_tiles, MATMUL_CONFIGS, ["lhsT", "rhs"],
               lambda rng: (rng.standard_normal((256, 256)).astype(np.float32),
                            rng.standard_normal((256, 1024)).astype(np.float32)), "NL-E404"),
    "softmax": (softmax_tiles, SOFTMAX_CONFIGS, ["x"],
                lambda rng: (rng.standard_normal((300, 256)).astype(np.float32),), "NL-E101"),
}


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_model_choice_is_the_lowest_independent_estimate(case, target):
    kernel, configs, key, make, skip_code = CASES[case]
    args = make(np.random.default_rng(1))
    want = independent(kernel, args, configs, target)
    ok = [i for i, t in enumerate(want) if t is not None]
    assert ok and len(ok) < len(configs)          # the case has both candidates and a failing config
    best = min(ok, key=lambda i: (want[i], i))
    tuned = nki_lite.autotune(configs=configs, key=key, target=target, workers=1)(kernel)
    got = tuned(*args)
    rep = tuned.autotune_report()
    assert rep.choice == best and rep.best == configs[best] and rep.source == "tuned"
    assert [r.time_ns for r in rep.rows] == want
    for r in rep.rows:
        if r.time_ns is None:
            assert skip_code in r.reason
    direct = kernel(*args, **configs[best])
    assert np.array_equal(got.view(np.uint8), direct.view(np.uint8))
    assert f"{best:3d} {str(configs[best])}" in str(rep) and "chosen" in str(rep)


def test_process_sweep_equals_in_process_sweep():
    kernel, configs, key, make, _ = CASES["matmul"]
    args = make(np.random.default_rng(2))
    serial = nki_lite.autotune(configs=configs, key=key, workers=1)(kernel)
    pooled = nki_lite.autotune(configs=configs, key=key, workers=2)(kernel)
    a, b = serial.choose(*args), pooled.choose(*args)
    assert a == b
    assert [r.time_ns for r in serial.autotune_report().rows] == [r.time_ns for r in pooled.autotune_report().rows]


def test_over_capacity_config_is_skipped_with_the_reason():
    @nki_lite.jit
    def held(x, BUFS=1):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tiles = [nl.load(x) for _ in range(BUFS)]          # all live at once
        acc = tiles[0]
        for t in tiles[1:]:
            acc = nl.add(acc, t)
        nl.store(out, value=acc)
        return out

    x = np.ones((128, 16384), np.float32)                    # 64 KiB per partition per tile
    tuned = nki_lite.autotune(configs=[{"BUFS": 8}, {"BUFS": 1}], target="trn2", workers=1)(held)
    tuned.choose(x)
    rows = tuned.autotune_report().rows
    assert rows[0].time_ns is None and "NL-W401" in rows[0].reason
    assert rows[1].ok and tuned.autotune_report().choice == 1


def test_every_config_failing_is_nl_e911_listing_each():
    tuned = nki_lite.autotune(configs=[{"TILE_P": 256}, {"TILE_P": 512}], workers=1)(softmax_tiles)
    with pytest.raises(nki_lite.NkiLiteError) as e:
        tuned(np.zeros((300, 64), np.float32))
    assert e.value.code == "NL-E911"
    assert "{'TILE_P': 256}" in str(e.value) and "{'TILE_P': 512}" in str(e.value)


def test_config_and_key_mistakes_are_nl_e910():
    with pytest.raises(nki_lite.NkiLiteError, match="NL-E910.*TILE_Q"):
        nki_lite.autotune(configs=[{"TILE_Q": 1}])(softmax_tiles)
    with pytest.raises(nki_lite.NkiLiteError, match="NL-E910.*'y'"):
        nki_lite.autotune(configs=[{"TILE_P": 64}], key=["y"])(softmax_tiles)
    with pytest.raises(nki_lite.NkiLiteError, match="NL-E910"):
        nki_lite.autotune(configs=[])(softmax_tiles)
    tuned = nki_lite.autotune(configs=[{"TILE_P": 64}])(softmax_tiles)
    with pytest.raises(nki_lite.NkiLiteError, match="NL-E910.*TILE_P"):
        tuned(np.zeros((128, 64), np.float32), TILE_P=128)


def test_a_new_key_sweeps_again_and_a_known_one_does_not():
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:3], key=["x"], workers=1)(softmax_tiles)
    a = np.zeros((128, 64), np.float32)
    tuned(a)
    tuned(a + 1)                                   # same shape and dtype: remembered
    assert tuned.stats["sweeps"] == 1 and tuned.autotune_report().source == "memory"
    tuned(np.zeros((256, 64), np.float32))
    assert tuned.stats["sweeps"] == 2 and len(tuned.autotune_reports()) == 2


def test_by_cpu_times_every_config_and_picks_the_fastest_measured():
    tuned = nki_lite.autotune(configs=[{"TILE_P": 64}, {"TILE_P": 128}, {"TILE_P": 256}], by="cpu", reps=1)(
        softmax_tiles)
    x = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
    out = tuned(x)
    rep = tuned.autotune_report()
    assert tuned.stats["timings"] == 3 and tuned.stats["estimates"] == 0
    assert rep.rows[2].time_ns is None and "NL-E101" in rep.rows[2].reason
    ok = [r for r in rep.rows if r.ok]
    assert rep.choice == min(ok, key=lambda r: (r.time_ns, r.index)).index
    assert np.array_equal(out, softmax_tiles(x, **rep.best))


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    import nki_lite
    from tests.kernels.tunable import softmax_tiles
    tuned = nki_lite.autotune(configs=[{{"TILE_P": 32}}, {{"TILE_P": 64}}, {{"TILE_P": 128}}, {{"TILE_P": 256}}],
                              key=["x"], target="trn2")(softmax_tiles)
    out = tuned(np.ones((300, 128), np.float32))
    rep = tuned.autotune_report()
    print(json.dumps({{"stats": tuned.stats, "source": rep.source, "choice": rep.choice,
                      "times": [r.time_ns for r in rep.rows], "sum": float(out.sum())}}))
""")


def test_a_second_process_reuses_the_choice_without_estimating(tmp_path):
    env = dict(os.environ, NKI_LITE_CACHE_DIR=str(tmp_path / "shared"), NKI_LITE_PROGRESS="off")
    script = SCRIPT.format(root=ROOT)
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    first, second = runs
    assert first["source"] == "tuned" and first["stats"]["estimates"] == 4
    assert second["source"] == "disk" and second["stats"]["estimates"] == 0 and second["stats"]["disk_hits"] == 1
    assert second["choice"] == first["choice"] and second["times"] == first["times"]
    assert second["sum"] == first["sum"]
    assert len(os.listdir(tmp_path / "shared" / "autotune")) == 1


def test_disabled_disk_cache_keeps_choices_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:2], workers=1)(softmax_tiles)
    tuned(np.zeros((128, 64), np.float32))
    assert not (tmp_path / "cache" / "autotune").exists()


def test_a_corrupt_record_is_a_miss(tmp_path):
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:2], workers=1)(softmax_tiles)
    x = np.zeros((128, 64), np.float32)
    tuned(x)
    d = tmp_path / "cache" / "autotune"
    (rec,) = list(d.iterdir())
    rec.write_text("{not json")
    again = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:2], workers=1)(softmax_tiles)
    again(x)
    assert again.stats["sweeps"] == 1 and again.stats["disk_hits"] == 0


def test_report_before_any_call_is_an_error():
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:1])(softmax_tiles)
    with pytest.raises(nki_lite.NkiLiteError, match="not been called"):
        tuned.autotune_report()


def test_estimate_and_grid_use_the_chosen_config():
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[:3], workers=1, target="trn2")(softmax_tiles)
    x = np.zeros((256, 64), np.float32)
    est = tuned.estimate(x)
    best = tuned.autotune_report().best
    assert est.total_time_ns == nki_lite.estimate(softmax_tiles, x, target="trn2", **best).total_time_ns
    assert isinstance(tuned[1], nki_lite.Autotuned) and tuned[1].stats is tuned.stats


def test_call_options_pass_through_to_the_kernel():
    tuned = nki_lite.autotune(configs=SOFTMAX_CONFIGS[1:3], workers=1)(softmax_tiles)
    x = np.random.default_rng(4).standard_normal((128, 64)).astype(np.float32)
    out = np.empty_like(x)
    r = tuned(x, mode="interpret", out=out)
    assert r is out
    assert np.array_equal(out.view(np.uint32), tuned(x, mode="jit").view(np.uint32))
