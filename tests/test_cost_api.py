"""`nki_lite.estimate` and NKI's spellings over it (issue 6, point 4).

estimate() works on every tutorial-style kernel on each target, from arrays or placeholders; the
summary uses neuron-profile's field names; the trace is valid Chrome-trace JSON with a track per
engine and DMA queue; the PNG is written (skipped only when matplotlib is absent).
"""
import builtins
import json
import re
import sys

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.errors import NkiLiteError
from tests.kernels import tutorial_style as T

F32 = np.float32

KERNELS = {
    "spmd_add": (lambda: T.spmd_add[2, 2], [((256, 1024), F32), ((256, 1024), F32)]),
    "tiled_matmul": (lambda: T.tiled_matmul, [((256, 256), nl.bfloat16), ((256, 1024), nl.bfloat16)]),
    "nl_matmul": (lambda: T.nl_matmul, [((128, 256), F32), ((256, 512), F32)]),
    "row_softmax": (lambda: T.row_softmax, [((300, 256), F32)]),
    "rmsnorm": (lambda: T.rmsnorm, [((300, 256), F32), ((256,), F32)]),
}

SUMMARY_FIELDS = (
    "total_time", "neuroncore_cycle_count",
    "tensor_engine_active_time_percent", "vector_engine_active_time_percent",
    "scalar_engine_active_time_percent", "gpsimd_engine_active_time_percent",
    "dma_active_time_percent", "hfu_estimated_percent", "mfu_estimated_percent", "mbu_estimated_percent",
    "mm_arithmetic_intensity", "peak_flops_bandwidth_ratio", "hardware_flops", "hbm_read_bytes",
    "hbm_write_bytes", "sbuf_high_water_bytes", "psum_high_water_bytes",
)


def _arrays(specs):
    return [np.zeros(shape, dtype=dt) for shape, dt in specs]


def _placeholders(specs):
    return [nt.tensor[list(shape), dt] for shape, dt in specs]


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_estimate_every_tutorial_kernel(name, target):
    k, specs = KERNELS[name]
    a = nki.estimate(k(), *_arrays(specs), target=target)
    p = nki.estimate(k(), *_placeholders(specs), target=target)
    assert a.total_time == p.total_time > 0
    s = a.summary()
    for f in SUMMARY_FIELDS:
        assert f in s
    assert s["target"] == target
    assert 0 <= s["hfu_estimated_percent"] <= 100
    assert a.bottleneck and a.bottleneck in a.table()
    assert str(a) == a.table()


def _check_chrome_trace(doc, est):
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    names = {}
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M")
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index")
            if ev["name"] == "thread_name":
                names[ev["tid"]] = ev["args"]["name"]
    expected = {"Tensor", "Vector", "Scalar", "GpSimd"} | {f"DMA q{i}" for i in range(16)}
    assert expected <= set(names.values())
    loc = re.compile(r"^[\w.\-]+\.py:\d+$")
    n = 0
    for ev in doc["traceEvents"]:
        if ev["ph"] != "X":
            continue
        n += 1
        assert ev["tid"] in names
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
        for key in ("opcode", "shape", "nki_source_location"):
            assert key in ev["args"]
        assert loc.match(ev["args"]["nki_source_location"])
        assert ev["ts"] + ev["dur"] <= est.total_time * 1e6 * (1 + 1e-9)   # microseconds
    assert n == len(est.events)


def test_trace_is_valid_chrome_json(tmp_path):
    k, specs = KERNELS["nl_matmul"]
    e = nki.estimate(k(), *_placeholders(specs), target="trn2")
    path = e.save_trace(tmp_path / "trace.json")
    doc = json.loads(open(path).read())
    _check_chrome_trace(doc, e)
    tracks = {ev["args"]["name"] for ev in doc["traceEvents"] if ev["name"] == "thread_name"}
    used = {ev["tid"] for ev in doc["traceEvents"] if ev["ph"] == "X"}
    assert used   # the matmul, the transposes, the copy and the DMAs are all there
    assert {"MATMUL", "transpose", "dma_copy"} <= {ev["name"] for ev in doc["traceEvents"] if ev["ph"] == "X"}
    assert "summary" in doc["otherData"] and tracks


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    k, specs = KERNELS["row_softmax"]
    e = nki.estimate(k(), *_placeholders(specs), target="trn1")
    path = e.plot(tmp_path / "timeline.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(tmp_path, monkeypatch):
    k, specs = KERNELS["spmd_add"]
    e = nki.estimate(k(), *_placeholders(specs), target="trn1")
    real_import = builtins.__import__

    def no_mpl(name, *a, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    for m in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, m)
    with pytest.raises(NkiLiteError, match="matplotlib"):
        e.plot(tmp_path / "x.png")


def test_benchmark_shim(capsys):
    k, specs = KERNELS["tiled_matmul"]
    bench = nki.benchmark(warmup=5, iters=10)(k())
    assert bench(*_placeholders(specs)) is None
    lat = bench.benchmark_result.nc_latency
    est = nki.estimate(k(), *_placeholders(specs), target=None)
    for p in (0, 50, 99, 100):
        assert lat.get_latency_percentile(p) == pytest.approx(est.total_time * 1e6)
    assert "NCLatency" in capsys.readouterr().out
    # grid form: benchmark(...)(kernel)[grid](...)
    g = nki.benchmark(warmup=1, iters=1)(T.spmd_add)[2, 2]
    g(*_placeholders(KERNELS["spmd_add"][1]))
    assert g.benchmark_result.nc_latency.get_latency_percentile(50) > 0


def test_benchmark_save_trace_name(tmp_path):
    k, specs = KERNELS["spmd_add"]
    path = tmp_path / "bench_trace.json"
    b = nki.benchmark(warmup=1, iters=1, save_trace_name=str(path))(k())
    b(*_placeholders(specs))
    _check_chrome_trace(json.loads(path.read_text()), b.benchmark_result.estimate)


def test_profile_shim_writes_files(tmp_path):
    k, specs = KERNELS["rmsnorm"]
    est = nki.profile(working_directory=tmp_path)(k())(*_arrays(specs))
    doc = json.loads((tmp_path / "trace.json").read_text())
    _check_chrome_trace(doc, est)
    prof = json.loads((tmp_path / "profile.json").read_text())
    assert prof["summary"][0]["total_time"] == est.total_time
    assert all("nki_source_location" in i and "opcode" in i for i in prof["instruction"])
    assert json.loads((tmp_path / "summary.json").read_text())["total_time"] == est.total_time


def test_target_from_environment(monkeypatch):
    k, specs = KERNELS["spmd_add"]
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    assert nki.estimate(k(), *_placeholders(specs)).target.name == "trn1"
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    assert nki.estimate(k(), *_placeholders(specs)).target.name == "trn3"
    assert nki.estimate(k(), *_placeholders(specs), target="trn2").target.name == "trn2"


def test_estimate_accepts_a_plain_function():
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out
    e = nki.estimate(add, nt.tensor[[128, 512], F32], nt.tensor[[128, 512], F32], target="trn1")
    assert e.total_time > 0
    with pytest.raises(NkiLiteError):
        nki.estimate(42)
