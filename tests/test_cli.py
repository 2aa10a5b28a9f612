"""The `nki-lite` command: every subcommand's --help, and each job run as a user would (subprocess)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nki_lite
from nki_lite import cli
from nki_lite.tools import kernelfile, runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBCOMMANDS = ["demo", "run", "estimate", "check", "bench", "cache", "sysinfo"]

LEGACY_ADD = textwrap.dedent("""
    from neuronxcc import nki
    import neuronxcc.nki.language as nl


    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out


    @nki.jit
    def tiled_copy(x, TILE=64):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[1] // TILE):
            nl.store(out[:, i * TILE:(i + 1) * TILE], value=nl.load(x[:, i * TILE:(i + 1) * TILE]))
        return out


    @nki.jit
    def rows_by_program(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(x[i * 128:(i + 1) * 128, :]))
        return out
""")

CHECKED = LEGACY_ADD + textwrap.dedent("""
    import numpy as np


    def check_add():
        a = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
        np.testing.assert_array_equal(add_kernel(a, a), a + a)
""")

FAILING = textwrap.dedent("""
    import numpy as np
    import nki_lite as nki
    import nki_lite.language as nl


    @nki.jit
    def twice(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(a)))
        return out


    def test_twice_is_three_times():
        a = np.ones((128, 4), np.float32)
        np.testing.assert_array_equal(twice(a), 3 * a)
""")

CURRENT = "import nki\nimport nki.language as nl\n"


def nki_lite_cmd(*args, env=None, cwd=None, script=False):
    exe = [shutil.which("nki-lite", path=os.path.dirname(sys.executable))] if script else \
        [sys.executable, "-m", "nki_lite"]
    e = dict(os.environ, NKI_LITE_PROGRESS="plain", **(env or {}))
    return subprocess.run(exe + list(args), capture_output=True, text=True, env=e, cwd=cwd, timeout=600)


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "add.py"
    p.write_text(LEGACY_ADD)
    return p


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(sub, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([sub, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: nki-lite {sub}")


def test_console_script_and_module_entry_points():
    r = nki_lite_cmd("--help", script=True)
    assert r.returncode == 0, r.stderr
    assert all(s in r.stdout for s in SUBCOMMANDS)
    r = nki_lite_cmd("--version")
    assert r.stdout.strip() == f"nki_lite {nki_lite.__version__}"


def test_run_legacy_file_summarises_the_result_and_checks_jit_against_interpreter(kfile):
    r = nki_lite_cmd("run", f"{kfile}::add_kernel", "--shape", "128x16", "--shape", "128,16", "--seed", "5")
    assert r.returncode == 0, r.stderr
    a, b = runner.random_inputs([(128, 16)] * 2, ["float32"] * 2, 5)
    want = runner.summarise("result", a + b)
    assert r.stdout.splitlines() == [want, "jit vs interpreter: bitwise identical"]


def test_run_passes_kwargs_grid_and_dtypes(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(LEGACY_ADD)
    k = kernelfile.load_kernel(f"{p}::tiled_copy")
    text, ok = runner.run(k, [(128, 256)], ["bf16"], kwargs=runner.parse_kwargs(["TILE=128"]), mode="interpret")
    (x,) = runner.random_inputs([(128, 256)], ["bfloat16"], 0)
    assert ok and text.splitlines()[0] == runner.summarise("result", x)
    g = kernelfile.load_kernel(f"{p}::rows_by_program")
    text, ok = runner.run(g, [(256, 8)], ["float32"], grid=runner.parse_grid("2"), seed=3)
    (x,) = runner.random_inputs([(256, 8)], ["float32"], 3)
    assert ok and text.splitlines()[0] == runner.summarise("result", x)
    with pytest.raises(nki_lite.NkiLiteError, match="positive"):
        runner.parse_grid("0,2")


TUNED = textwrap.dedent("""
    import nki_lite as nki
    import nki_lite.language as nl


    @nki.autotune(configs=[{"TILE": 32}, {"TILE": 64}], key=["x"], workers=1)
    @nki.jit
    def tiled_copy(x, TILE=64):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[1] // TILE):
            nl.store(out[:, i * TILE:(i + 1) * TILE], value=nl.load(x[:, i * TILE:(i + 1) * TILE]))
        return out
""")


def test_autotuned_kernels_run_and_estimate_with_their_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_LITE_PROGRESS", "off")
    p = tmp_path / "tuned.py"
    p.write_text(TUNED)
    k = kernelfile.load_kernel(f"{p}::tiled_copy")
    assert isinstance(k, nki_lite.Autotuned)
    text, ok = runner.run(k, [(128, 256)], ["float32"])
    assert ok
    est = runner.estimate(k, [(128, 256)], ["float32"], target="trn2")
    best = k.autotune_report().best
    want = nki_lite.estimate(k.kernel, np.zeros((128, 256), np.float32), target="trn2", **best)
    assert est.total_time_ns == want.total_time_ns


def test_run_exits_1_when_the_backends_differ():
    class Disagrees:
        def __call__(self, *args, mode=None):
            return np.full((2, 2), 1.0 if mode == "jit" else 2.0, np.float32)

    text, ok = runner.run(Disagrees(), [(2, 2)], ["float32"])
    assert not ok and text.endswith("jit vs interpreter: DIFFERENT")


def test_current_dialect_file_runs(tmp_path):
    p = tmp_path / "new.py"
    p.write_text(CURRENT_ADD)
    r = nki_lite_cmd("run", f"{p}::add_kernel", "--shape", "128x4", "--shape", "128x4")
    assert r.returncode == 0, r.stderr
    assert "jit vs interpreter" in r.stdout and "DIFFERENT" not in r.stdout


CURRENT_ADD = '''import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=z)
    return out
'''


def test_both_dialects_and_a_fallback_import_run_and_a_missing_part_is_named(tmp_path):
    fallback = tmp_path / "fallback.py"
    fallback.write_text("try:\n    import nki\nexcept ImportError:\n    from neuronxcc import nki\n" + LEGACY_ADD)
    k = kernelfile.load_kernel(f"{fallback}::add_kernel")
    assert runner.run(k, [(128, 4)] * 2, ["float32"])[1]
    current = tmp_path / "current.py"
    current.write_text(CURRENT_ADD)
    assert kernelfile.dialect(str(current)) == ("current", 1)
    assert runner.run(kernelfile.load_kernel(f"{current}::add_kernel"), [(128, 4)] * 2, ["float32"])[1]
    needed = tmp_path / "needed.py"
    needed.write_text("from neuronxcc import nki\nimport nki.no_such_part\n")
    with pytest.raises(nki_lite.NkiLiteError, match="NL-E904.*does not provide") as e:
        kernelfile.load_kernel(f"{needed}::k")
    assert e.value.loc.line == 2


def test_bad_references_name_what_exists(kfile, capsys):
    assert cli.main(["run", f"{kfile}::nope", "--shape", "1x1"]) == 2
    err = capsys.readouterr().err
    assert "NL-E908" in err and "add_kernel, rows_by_program, tiled_copy" in err
    assert cli.main(["run", str(kfile), "--shape", "1x1"]) == 2
    assert "is not FILE::KERNEL" in capsys.readouterr().err
    assert cli.main(["run", f"{kfile}::add_kernel", "--shape", "2y2"]) == 2
    assert "not a shape" in capsys.readouterr().err
    assert cli.main(["run", f"{kfile}::add_kernel", "--shape", "2x2", "--dtype", "float64"]) == 2
    assert "NL-E202" in capsys.readouterr().err


def test_estimate_prints_the_model_and_writes_trace_and_png(kfile, tmp_path, capsys):
    trace, png = tmp_path / "t.json", tmp_path / "t.png"
    r = nki_lite_cmd("estimate", f"{kfile}::add_kernel", "--shape", "128x512", "--shape", "128x512",
                     "--target", "trn1", "--trace", str(trace), "--png", str(png), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    k = kernelfile.load_kernel(f"{kfile}::add_kernel")
    import nki_lite.typing as nt
    want = nki_lite.estimate(k, nt.tensor[[128, 512], np.float32], nt.tensor[[128, 512], np.float32],
                             target="trn1").summary()
    assert got == json.loads(json.dumps(want))
    assert json.loads(trace.read_text())["traceEvents"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["estimate", f"{kfile}::add_kernel", "--shape", "128x512", "--shape", "128x512"]) == 0
    assert capsys.readouterr().out.startswith("nki_lite estimate: add_kernel on trn2")


def test_check_runs_every_kernel_file_and_fails_ci_on_a_mismatch(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(CHECKED)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.py").write_text(FAILING)
    (tmp_path / "nocheck.py").write_text(LEGACY_ADD)
    (tmp_path / "new.py").write_text(CURRENT)
    (tmp_path / "notes.py").write_text("x = 1\n")                 # not a kernel file: not listed
    r = nki_lite_cmd("check", str(tmp_path), "--mode", "jit,interpret")
    assert r.returncode == 1
    rows = {(line.split()[1], line.split()[2]): line.split()[3] for line in r.stdout.splitlines()
            if line.startswith("files ")}
    for mode in ("jit", "interpret"):
        assert rows[("ok.py", mode)] == "pass"
        assert rows[("sub/bad.py", mode)] == "FAIL"
        assert rows[("nocheck.py", mode)] == "skip"
        assert rows[("new.py", mode)] == "skip"           # current dialect, no numpy check
    assert "notes.py" not in r.stdout
    assert "AssertionError" in r.stdout
    assert f"files ({tmp_path}): jit: 1 passed, 1 failed, 2 skipped; interpret: 1 passed, 1 failed, 2 skipped" \
        in r.stdout
    assert "check files (jit): 4/4" in r.stderr                 # the progress bar (plain fallback)
    (tmp_path / "sub" / "bad.py").unlink()
    (tmp_path / "new.py").unlink()
    mode = os.environ.get("NKI_LITE_MODE")
    assert cli.main(["check", str(tmp_path), "--mode", "interpret"]) == 0
    assert os.environ.get("NKI_LITE_MODE") == mode          # restored after the per-mode runs
    (tmp_path / "ok.py").unlink()                             # only a kernel without a check is left
    assert cli.main(["check", str(tmp_path), "--mode", "interpret"]) == 1
    assert "no kernel file with a numpy check ran" in capsys.readouterr().err


NKIBENCH_KERNEL = textwrap.dedent("""
    from neuronxcc import nki
    import neuronxcc.nki.language as nl


    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(nl.load(a)))
        return out
""")

NKIBENCH_REF = textwrap.dedent("""
    import numpy as np


    def get_inputs():
        return [np.random.rand(128, 32).astype(np.float32)]


    def forward(a):
        return np.exp(a)


    def transform_to_nki_inputs(inputs):
        return inputs


    def transform_nki_outputs(out, want):
        return (out,)
""")


def test_check_corpus_script_and_cli_share_the_engine(tmp_path, capsys):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "reference").mkdir()
    (tmp_path / "kernels" / "exp_1.py").write_text(NKIBENCH_KERNEL)
    (tmp_path / "reference" / "exp_numpy_1.py").write_text(NKIBENCH_REF)
    script = subprocess.run([sys.executable, os.path.join(ROOT, "tutorials", "check_corpus.py"), str(tmp_path),
                             "--mode=interpret"], capture_output=True, text=True, timeout=600)
    assert script.returncode == 0, script.stderr
    budgets, *lines = script.stdout.splitlines()
    assert budgets.startswith("budgets: 1800 s wall clock per case, 10 GiB address space")
    assert lines[0].split()[:4] == ["NKIBench", "exp", "interpret", "pass"]
    assert lines[-1] == f"NKIBench ({tmp_path}): interpret: 1 passed, 0 failed"
    assert cli.main(["check", str(tmp_path), "--mode", "interpret"]) == 0
    mine = capsys.readouterr().out.splitlines()
    assert [m.split()[:4] for m in mine[:-2]] == [x.split()[:4] for x in lines[:-2]]   # all but the seconds
    assert mine[-2:] == lines[-2:]


def test_bench_prints_the_table(tmp_path):
    r = nki_lite_cmd("bench", "--reps", "1", "--only", "softmax")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("softmax")]
    assert len(rows) == 1 and rows[0].endswith("x")
    assert "bench: 1/1" in r.stderr


def test_cache_dir_info_clear(tmp_path, monkeypatch, capsys):
    env = {"NKI_LITE_CACHE_DIR": str(tmp_path / "c"), "NKI_LITE_DISK_CACHE": "1"}
    r = nki_lite_cmd("cache", "dir", env=env)
    assert r.stdout.strip() == str(tmp_path / "c")
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    def cache(action):
        assert cli.main(["cache", action]) == 0
        return capsys.readouterr().out
    (tmp_path / "c" / "autotune").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "c", 0o700)
    (tmp_path / "c" / ("0" * 64 + ".nklobj")).write_bytes(b"x" * 10)
    (tmp_path / "c" / "autotune" / ("1" * 64 + ".json")).write_text("{}")
    info = cache("info")
    assert "JIT entries: 1 (10 bytes)" in info and "autotune choices: 1" in info
    assert cache("clear").startswith("removed 1 JIT entries and 1 autotune choices")
    assert "JIT entries: 0" in cache("info")


def test_sysinfo_reports_versions_and_active_knobs(capsys):
    r = nki_lite_cmd("sysinfo", "--json", env={"NKI_LITE_NUM_THREADS": "1", "NKI_LITE_JIT_OPT": "2"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["numpy"] == np.__version__ and d["nki_lite"] == nki_lite.__version__
    assert d["knobs"]["NKI_LITE_NUM_THREADS"] == ["1", 1] and d["knobs"]["NKI_LITE_JIT_OPT"] == ["2", 2]
    assert d["cpu"]["cores"] == os.cpu_count()
    assert cli.main(["sysinfo"]) == 0
    text = capsys.readouterr().out
    assert "JIT disk cache:" in text and "vector features:" in text


def test_demo_runs_the_readme_job():
    r = nki_lite_cmd("demo", env={"NKI_LITE_DEBUG": "0"})
    assert r.returncode == 0, r.stderr
    assert "engine profile: tiled_matmul" in r.stdout
    assert r.stdout.count("  ok") >= 5 and "MISMATCH" not in r.stdout
