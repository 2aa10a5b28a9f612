"""The JIT disk cache (nki_lite/runtime/diskcache.py, docs/jit_cache.md): keys, entry format, safety
rules, the disable switch, and cross-process behaviour (subprocesses with a fresh NKI_LITE_CACHE_DIR).
conftest.py turns the cache off for the rest of the suite; the `cache` fixture turns it on here."""
import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.runtime import diskcache as DC
from nki_lite.runtime import jit

pytestmark = pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")

IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0


def enable(monkeypatch, d):
    monkeypatch.setenv("NKI_LITE_CACHE_DIR", str(d))
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "1")
    # sources edited while this worker runs would bypass the cache: ignore that here (see the sources test)
    monkeypatch.setattr(DC, "_START", float("inf"))
    monkeypatch.setattr(DC, "_SOURCES_CHANGED", None)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "nkl_cache"
    enable(monkeypatch, d)
    jit.CACHE.clear()
    yield d
    jit.CACHE.clear()


def _scale_add(x, y):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(x)) * 0.5 + nl.load(y))
    return out


def _other(x, y):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x) - nl.load(y))
    return out


X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
Y = np.arange(24, dtype=np.float32).reshape(4, 6)


def fresh_call(fn, *args):
    """Call fn as a new process would: a new Kernel object and an empty in-memory JIT cache."""
    jit.CACHE.clear()
    k = nki.jit(fn)
    out = k(*args)
    return k.cache_info(), out


def entries(d):
    return sorted(p for p in os.listdir(d) if p.endswith(DC.SUFFIX)) if os.path.isdir(d) else []


def bits(a):
    return a.view(np.uint8).tobytes()


# ---------------------------------------------------------------- keys

HOST = {"triple": "x86_64-unknown-linux-gnu", "cpu": "znver4", "features": "+avx,+avx2,+avx512f",
        "llvm": "22.1.0", "llvmlite": "0.50.0"}


def _key(ir_text="kernel k()", consts=(("c", "ab"),), debug=True, opt=0, version="0.1.0", fingerprint="f" * 64,
         extra=None, **host):
    return DC.entry_key(ir_text, list(consts), debug, opt, dict(HOST, **host), version=version,
                        fingerprint=fingerprint, extra=extra)


def test_key_covers_everything_the_code_depends_on():
    base = _key()
    assert base == _key() and len(base) == 64 and int(base, 16) >= 0
    variants = [_key(opt=2), _key(debug=False), _key(ir_text="kernel k2()"), _key(consts=(("c", "cd"),)),
                _key(features="+avx,+avx2,-avx512f"), _key(cpu="skylake-avx512"),
                _key(triple="aarch64-unknown-linux-gnu"), _key(llvm="21.1.0"), _key(llvmlite="0.49.0"),
                _key(version="0.2.0"), _key(fingerprint="0" * 64), _key(extra={"data_offset": None})]
    assert len({base, *variants}) == len(variants) + 1


def test_key_reads_debug_and_opt_knobs_at_call_time(cache, monkeypatch):
    for debug, opt in (("1", "0"), ("0", "0"), ("1", "2")):
        monkeypatch.setenv("NKI_LITE_DEBUG", debug)
        monkeypatch.setenv("NKI_LITE_JIT_OPT", opt)
        info, _ = fresh_call(_scale_add, X, Y)
        assert info["compiles"] == 1
    assert len(entries(cache)) == 3


def test_source_fingerprint_is_stable():
    assert DC.source_fingerprint() == DC.source_fingerprint() and len(DC.source_fingerprint()) == 64
    assert any(p.endswith("codegen.py") for p in DC._SOURCE_FILES)


def test_sources_edited_while_running_bypass_the_cache(cache, monkeypatch):
    fresh_call(_scale_add, X, Y)
    monkeypatch.setattr(DC, "_START", 0.0)               # as if every source changed after the start
    monkeypatch.setattr(DC, "_SOURCES_CHANGED", None)
    info = {}
    w = _count_cache_warnings(lambda: info.update(fresh_call(_scale_add, X, Y)[0]))
    assert (info["compiles"], info["disk_hits"]) == (1, 0)
    assert len(w) == 1 and "changed after the process started" in str(w[0].message)


# ---------------------------------------------------------------- the happy path, in process

def test_entry_roundtrip_in_process(cache):
    info, ref = fresh_call(_scale_add, X, Y)
    assert (info["compiles"], info["disk_hits"]) == (1, 0)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    (name,) = entries(cache)
    path = cache / name
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]
    meta, obj = DC.decode(path.read_bytes(), name[:-len(DC.SUFFIX)])
    assert meta["kernel"] == "_scale_add" and meta["arg_buffers"] and obj[:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe")
    json.dumps(meta)                                       # plain JSON metadata
    before = (jit.CACHE.compiles, jit.CACHE.disk_hits)
    info, out = fresh_call(_scale_add, X, Y)
    assert (info["compiles"], info["disk_hits"]) == (0, 1)
    assert (jit.CACHE.compiles, jit.CACHE.disk_hits) == (before[0], before[1] + 1)
    assert bits(out) == bits(ref)
    k = nki.jit(_scale_add)
    k(X, Y)                                                # in-memory hit now: neither counter moves
    assert (k.cache_info()["compiles"], k.cache_info()["disk_hits"]) == (0, 0)


def test_directory_is_created_0700_with_parents(tmp_path, monkeypatch):
    d = tmp_path / "a" / "b" / "cache"
    enable(monkeypatch, d)
    old = os.umask(0o000)                                  # even with a permissive umask
    try:
        fresh_call(_scale_add, X, Y)
    finally:
        os.umask(old)
        jit.CACHE.clear()
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(d / n).st_mode) == 0o600 for n in entries(d))


def test_default_location_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("NKI_LITE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert DC.cache_dir() == str(tmp_path / "xdg" / "nki_lite")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert DC.cache_dir() == str(tmp_path / "home" / ".cache" / "nki_lite")


def test_errors_and_prints_from_a_loaded_kernel_name_the_same_lines(cache, capsys):
    """Error sites and print sites are stored as instruction indices: a loaded kernel reports the same
    line and loop values. The verifier would reject this kernel, so the unverified IR is launched."""
    from nki_lite.lang.trace import trace
    from nki_lite.lower.passes.pipeline import run_shared

    def oob(a):
        out = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            x = nl.load(a[nl.ds(i * 3, 4), :])
            nl.device_print("x=", x)
            nl.store(out[nl.ds(i * 4, 4), :], value=x)
        return out

    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    k = nki.jit(oob)
    kern = run_shared(trace(k.fn, k.bind((a,), {}), (), "trn2"))
    msgs, sources = [], []
    for _ in range(2):
        jit.CACHE.clear()
        ck, source = jit.lookup(kern, debug=True)
        sources.append(source)
        with pytest.raises(errors.IndexOutOfBoundsError) as ei:
            ck.launch({"a": a})
        msgs.append(str(ei.value))
    printed = capsys.readouterr().out
    assert sources == ["compile", "disk"]
    assert msgs[0] == msgs[1] and "i0=1" in msgs[1] and "test_diskcache.py" in msgs[1]
    assert printed.count("x=") == 2 and printed[:len(printed) // 2] == printed[len(printed) // 2:]


def test_inspect_llvm_of_a_loaded_kernel(cache):
    fresh_call(_scale_add, X, Y)
    jit.CACHE.clear()
    k = nki.jit(_scale_add)
    text = k.inspect_llvm(X, Y)
    assert k.cache_info()["disk_hits"] == 1 and "nkl_kernel" in text


# ---------------------------------------------------------------- damaged entries are rebuilt

def _flip(data, key, other):
    b = bytearray(data)
    b[len(b) // 2] ^= 0x40
    return bytes(b)


def _reencode(change):
    def f(data, key, other):
        meta, obj = DC.decode(data, key)
        meta, obj = change(dict(meta), obj)
        return DC.encode(key, meta, obj)
    return f


DAMAGE = {
    "flipped byte": _flip,
    "truncated": lambda data, key, other: data[:len(data) - 100],
    "truncated header": lambda data, key, other: data[:20],
    "empty": lambda data, key, other: b"",
    "foreign entry": lambda data, key, other: other,                   # another kernel's (valid) entry
    "foreign metadata": _reencode(lambda m, o: ({**m, "n_instrs": m["n_instrs"] + 1}, o)),
    "site out of range": _reencode(lambda m, o: ({**m, "sites": [999] * len(m["sites"])}, o)),
    "not JSON types": _reencode(lambda m, o: ({**m, "arg_buffers": "x"}, o)),
    "not object code": _reencode(lambda m, o: (m, b"garbage that LLVM must never see")),
    # well-formed metadata that disagrees with what this kernel's code generator lays out (issue 10):
    # run anyway, a too-small arena or swapped argument pointers could crash the process
    "arena too small": _reencode(lambda m, o: ({**m, "arena_bytes": 64}, o)),
    "arguments reordered": _reencode(lambda m, o: ({**m, "arg_buffers": m["arg_buffers"][::-1]}, o)),
    "status layout": _reencode(lambda m, o: ({**m, "status_words": m["status_words"] - 1}, o)),
    "print flag": _reencode(lambda m, o: ({**m, "needs_print": not m["needs_print"]}, o)),
    "regions": _reencode(lambda m, o: ({**m, "region_trips": m["region_trips"] + [4]}, o)),
    # the launch plan stored with the code (lower/llvm/launch_plan.py, checked by plan_check.py)
    "program count": _reencode(lambda m, o: ({**m, "n_programs": m["n_programs"] + 1}, o)),
    "prefill names no output": _reencode(lambda m, o: ({**m, "prefill": m["prefill"] + ["x"]}, o)),
    "plan flag mistyped": _reencode(lambda m, o: ({**m, "parallel": "yes"}, o)),
    "plan field missing": _reencode(lambda m, o: ({k: v for k, v in m.items() if k != "long_running"}, o)),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_detected_and_rebuilt(cache, damage):
    _, ref = fresh_call(_scale_add, X, Y)
    (name,) = entries(cache)
    fresh_call(_other, X, Y)
    other = next(cache / n for n in entries(cache) if n != name).read_bytes()
    path = cache / name
    path.write_bytes(DAMAGE[damage](path.read_bytes(), name[:-len(DC.SUFFIX)], other))
    corrupt = DC.STATS["corrupt"]
    info, out = fresh_call(_scale_add, X, Y)
    assert (info["compiles"], info["disk_hits"]) == (1, 0)
    assert DC.STATS["corrupt"] == corrupt + 1
    assert bits(out) == bits(ref)
    DC.decode(path.read_bytes(), name[:-len(DC.SUFFIX)])   # overwritten with a good entry
    info, out = fresh_call(_scale_add, X, Y)
    assert (info["compiles"], info["disk_hits"]) == (0, 1) and bits(out) == bits(ref)


# ---------------------------------------------------------------- safety rules

def _count_cache_warnings(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fn()
    return [w for w in rec if issubclass(w.category, DC.NkiLiteCacheWarning)]


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_group_or_world_writable_directory_is_bypassed_with_one_warning(cache, mode):
    cache.mkdir()
    os.chmod(cache, mode)
    w1 = _count_cache_warnings(lambda: fresh_call(_scale_add, X, Y))
    info = {}
    w2 = _count_cache_warnings(lambda: info.update(fresh_call(_other, X, Y)[0]))
    assert len(w1) == 1 and "bypassed" in str(w1[0].message) and w2 == []
    assert info["compiles"] == 1 and entries(cache) == []             # no reads, no writes
    assert stat.S_IMODE(os.stat(cache).st_mode) == mode               # and the user's choice is left alone


@pytest.mark.skipif(not IS_ROOT, reason="needs root to chown")
def test_directory_of_another_user_is_bypassed(cache):
    cache.mkdir(mode=0o700)
    os.chown(cache, 12345, -1)
    w = _count_cache_warnings(lambda: fresh_call(_scale_add, X, Y))
    assert len(w) == 1 and "owned by uid 12345" in str(w[0].message) and entries(cache) == []


def _entry_refused(cache, tamper):
    _, ref = fresh_call(_scale_add, X, Y)
    (name,) = entries(cache)
    tamper(cache / name)
    info = {}
    w = _count_cache_warnings(lambda: info.update(fresh_call(_scale_add, X, Y)[0]))
    assert len(w) == 1 and "not loading" in str(w[0].message)
    assert (info["compiles"], info["disk_hits"]) == (1, 0)            # never loaded
    st = os.lstat(cache / name)                                       # replaced by a private entry
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    info, out = fresh_call(_scale_add, X, Y)
    assert info["disk_hits"] == 1 and bits(out) == bits(ref)


def _replace_with(make):
    def tamper(p):
        os.unlink(p)
        make(str(p))
    return tamper


def _bound_socket(path):
    import socket
    s = socket.socket(socket.AF_UNIX)
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))              # AF_UNIX paths are short: bind a relative name
    try:
        s.bind(os.path.basename(path))
    finally:
        os.chdir(cwd)
    _SOCKETS.append(s)


_SOCKETS: list = []


class _Hung(BaseException):
    """Raised by the alarm: not an OSError/Exception, which the cache's fallbacks would swallow."""


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink to /dev/zero", "socket"])
def test_non_regular_entry_is_a_miss_and_never_blocks(cache, kind):
    """A FIFO in the cache directory hung the process (opened blocking before the type check); other
    non-regular files must not be read either. Each is refused with a warning and replaced."""
    import signal
    make = {"fifo": os.mkfifo, "directory": os.mkdir, "symlink to /dev/zero": lambda p: os.symlink("/dev/zero", p),
            "socket": _bound_socket}[kind]

    def hung(*_):
        raise _Hung("the disk cache blocked on a non-regular entry")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        if kind == "directory":
            _, ref = fresh_call(_scale_add, X, Y)
            (name,) = entries(cache)
            os.unlink(cache / name)
            os.mkdir(cache / name)
            info = {}
            w = _count_cache_warnings(lambda: info.update(fresh_call(_scale_add, X, Y)[0]))
            assert any("not loading" in str(x.message) for x in w)      # (and: cannot store over it)
            assert (info["compiles"], info["disk_hits"]) == (1, 0)   # a directory cannot be replaced: a miss
            assert (cache / name).is_dir()
        else:
            _entry_refused(cache, _replace_with(make))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        for s in _SOCKETS:
            s.close()
        _SOCKETS.clear()


def test_world_writable_entry_is_never_loaded(cache):
    _entry_refused(cache, lambda p: os.chmod(p, 0o666))


def test_group_writable_entry_is_never_loaded(cache):
    _entry_refused(cache, lambda p: os.chmod(p, 0o620))


def test_symlinked_entry_is_never_loaded(cache, tmp_path):
    def tamper(p):
        target = tmp_path / "elsewhere"
        target.write_bytes(p.read_bytes())
        os.chmod(target, 0o600)
        p.unlink()
        os.symlink(target, p)
    _entry_refused(cache, tamper)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to chown")
def test_entry_of_another_user_is_never_loaded(cache):
    _entry_refused(cache, lambda p: os.chown(p, 12345, -1))


def test_disable_switch_is_read_at_call_time(cache, monkeypatch):
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")
    for _ in range(2):
        info, _ = fresh_call(_scale_add, X, Y)
        assert (info["compiles"], info["disk_hits"]) == (1, 0)
    assert not cache.exists()                                         # not even created
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "1")
    fresh_call(_scale_add, X, Y)
    assert len(entries(cache)) == 1


def test_prune_drops_least_recently_used_entries(cache, monkeypatch):
    fresh_call(_scale_add, X, Y)
    (first,) = entries(cache)
    fresh_call(_other, X, Y)
    a = cache / first                                     # _scale_add's entry
    b = next(cache / n for n in entries(cache) if n != first)
    os.utime(a, (1000, 1000))
    os.utime(b, (2000, 2000))
    stray = cache / ".0123.456.abc.tmp"
    stray.write_bytes(b"x")
    os.utime(stray, (0, 0))
    fresh_call(_scale_add, X, Y)                          # a hit refreshes the entry's mtime
    assert os.stat(a).st_mtime > 2000
    size = os.stat(a).st_size + os.stat(b).st_size
    assert DC.prune(str(cache), max_bytes=size + 10) == 1 and not stray.exists()   # only the stray file
    assert DC.prune(str(cache), max_bytes=size - 1) == 1 and a.exists() and not b.exists()
    monkeypatch.setenv("NKI_LITE_CACHE_MAX_MB", "0")
    assert DC.prune(str(cache)) == 0


def test_unwritable_location_warns_and_still_runs(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    enable(monkeypatch, blocker / "cache")
    info = {}
    try:
        w = _count_cache_warnings(lambda: info.update(fresh_call(_scale_add, X, Y)[0]))
    finally:
        jit.CACHE.clear()
    assert len(w) == 1 and info["compiles"] == 1


# ---------------------------------------------------------------- other processes

SCRIPT = textwrap.dedent('''
    import hashlib, json, os, sys, time
    import numpy as np
    from nki_lite.stdlib.matmul_kernels import tiled_matmul
    from nki_lite.runtime import diskcache, jit
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 512)).astype(np.float32)
    go = os.environ.get("GO_FILE")
    if go:
        tiled_matmul.trace(a, b)                 # trace before the barrier, so the processes race on LLVM/disk
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.002)
    out = tiled_matmul(a, b)
    print(json.dumps({"info": tiled_matmul.cache_info(), "digest": hashlib.sha256(out.tobytes()).hexdigest(),
                      "cache": [jit.CACHE.compiles, jit.CACHE.disk_hits], "stats": diskcache.STATS}))
''')


def _env(cache_dir, **extra):
    return dict(os.environ, NKI_LITE_CACHE_DIR=str(cache_dir), NKI_LITE_DISK_CACHE="1", **extra)


def _run(script, cache_dir):
    r = subprocess.run([sys.executable, str(script)], env=_env(cache_dir), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing_and_matches_bitwise(tmp_path):
    script = tmp_path / "run_matmul.py"
    script.write_text(SCRIPT)
    d = tmp_path / "cache"
    first = _run(script, d)
    second = _run(script, d)
    assert first["info"]["compiles"] == 1 and first["info"]["disk_hits"] == 0
    assert second["info"]["compiles"] == 0 and second["info"]["disk_hits"] == 1
    assert second["cache"] == [0, 1] and second["stats"]["hits"] == 1
    assert first["digest"] == second["digest"]


def test_eight_concurrent_processes_share_one_empty_directory(tmp_path):
    script = tmp_path / "run_matmul.py"
    script.write_text(SCRIPT)
    d = tmp_path / "fresh" / "cache"                 # does not exist yet: 8 processes create it at once
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(script)], env=_env(d, GO_FILE=str(go)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        go.write_text("go")
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert len({r["digest"] for r in results}) == 1
    assert all(r["info"]["compiles"] + r["info"]["disk_hits"] == 1 for r in results)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    names = os.listdir(d)
    assert len(entries(d)) == 1 and len(names) == 1                   # one entry, no temp files left
    late = _run(script, d)
    assert late["info"]["compiles"] == 0 and late["digest"] == results[0]["digest"]
