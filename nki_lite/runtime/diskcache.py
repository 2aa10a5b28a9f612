"""A per-user disk cache of JIT object code, so a new process runs a known kernel without LLVM.

Contract (docs/jit_cache.md has the long form):
- Location: `NKI_LITE_CACHE_DIR`, else `$XDG_CACHE_HOME/nki_lite`, else `~/.cache/nki_lite`; created with
  mode 0700. `NKI_LITE_DISK_CACHE=0` turns the cache off. Both knobs are read at every call.
- `entry_key(...)` is the sha256 of everything the machine code depends on: the printed tile IR, the
  const buffers' digests, debug flag, JIT opt level, nki_lite version, a fingerprint of the code
  generator's sources, llvmlite/LLVM versions, target triple, host CPU name and feature string, and
  the caller's extras (the trampoline's PyArrayObject data offset).
- An entry is `<key>.nklobj`: header (magic, format version, payload length, sha256 of the payload),
  then payload = u32 length + JSON metadata + object code. JSON only (never pickle). A short, corrupt
  or foreign entry (metadata naming another key) is reported by `load` as a miss (and counted in
  `STATS["corrupt"]`); the caller recompiles and `store` overwrites it.
- Safety: the directory must be a directory owned by this user and not group/world-writable, else the
  cache is bypassed (no reads, no writes) with one warning per directory. An entry that is not a
  regular file owned by this user with no group/world write bit (symlinks included) is never loaded
  (one warning per entry); a fresh private entry replaces it after the recompile.
- Writes are atomic: a 0600 temp file in the same directory, fsync, `os.replace`. Concurrent writers
  of one key each replace the entry with identical content; readers see a whole old or new file.
- The key includes a fingerprint of the code generator's sources. If one of those files changes
  while the process runs (mtime after the process started), the code in memory may not be what the
  files say: the cache is bypassed for the rest of the process (one warning).
- Size: after the first store of a process and every 64th store after that, the oldest entries (by
  mtime; a hit refreshes it) are deleted until the directory holds at most 80% of
  `NKI_LITE_CACHE_MAX_MB` (0: unbounded).
- Cache failures never fail a kernel call: they warn (once per directory and reason) and fall back.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import struct
import threading
import time
import warnings

from .. import config
from ..version import __version__

log = logging.getLogger("nki_lite")

MAGIC = b"\x89NKLOBJ\n"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sHHQ32s")          # magic, format version, reserved, payload length, sha256
SUFFIX = ".nklobj"
MAX_ENTRY_BYTES = 1 << 30

# Sources whose text decides the LLVM IR generated from a given tile IR (relative to the package).
# Whole packages, so moving code between their modules cannot leave a stale source out.
FINGERPRINT_SOURCES = ("core/", "lower/", "numerics/", "runtime/")

STATS = {"hits": 0, "misses": 0, "corrupt": 0, "refused": 0, "writes": 0, "write_errors": 0}
_STATS_LOCK = threading.Lock()
_WARNED: set = set()
_FINGERPRINT: str | None = None
_SOURCE_FILES: list = []
_SOURCES_CHANGED: str | None = None
_STORES = 0
_IMPORTED_AT = time.time()
PRUNE_EVERY = 64


class NkiLiteCacheWarning(UserWarning):
    """The JIT disk cache was bypassed or an entry was refused (the kernel still runs)."""


class CorruptEntry(ValueError):
    """An entry whose bytes do not pass the header, checksum or metadata checks."""


def _count(name: str) -> None:
    with _STATS_LOCK:
        STATS[name] += 1


def warn_once(kind: str, where: str, message: str) -> None:
    if (kind, where) in _WARNED:
        return
    _WARNED.add((kind, where))
    warnings.warn(message, NkiLiteCacheWarning, stacklevel=2)


# ---------------------------------------------------------------- knobs and location

def enabled() -> bool:
    return bool(config.get("NKI_LITE_DISK_CACHE"))


def cache_dir() -> str:
    d = config.get("NKI_LITE_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nki_lite")


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def _private(st: os.stat_result) -> str | None:
    """Why a stat result fails the ownership/permission rules (None if it passes)."""
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not {uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group/world-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def ready_dir() -> str | None:
    """The cache directory, created 0700 if missing; None (after one warning) if it is unusable."""
    d = cache_dir()
    changed = sources_changed()
    if changed:
        warn_once("sources", "", f"nki_lite JIT disk cache bypassed for this process: {changed} changed after "
                  "the process started, so the code generator in memory may not match the sources on disk")
        return None
    try:
        if not os.path.isdir(d):
            os.makedirs(d, mode=0o700, exist_ok=True)
            try:
                os.chmod(d, 0o700)       # exactly 0700 whatever the umask (we made it, or lost a race to
            except OSError:              # another of our processes making it the same way)
                pass
        st = os.stat(d)
    except OSError as e:
        warn_once("dir", d, f"nki_lite JIT disk cache disabled: cannot create {d}: {e}")
        return None
    why = "not a directory" if not stat.S_ISDIR(st.st_mode) else _private(st)
    if why:
        warn_once("dir", d, f"nki_lite JIT disk cache bypassed: {d} is {why}; kernels are compiled in memory "
                  "only (use a private directory: chmod 700, or set NKI_LITE_CACHE_DIR)")
        return None
    return d


def entry_path(d: str, key: str) -> str:
    return os.path.join(d, key + SUFFIX)


# ---------------------------------------------------------------- keys

def _process_start() -> float:
    """Wall-clock start of this process, never later than the truth (Linux: /proc start ticks after
    boot, boot time from CLOCK_BOOTTIME, minus 20 ms; elsewhere: when this module was imported, which
    is after nki_lite's IR modules were imported)."""
    try:
        with open("/proc/self/stat") as f:
            after_boot = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        if hasattr(time, "CLOCK_BOOTTIME"):
            boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        else:
            with open("/proc/stat") as f:
                boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + after_boot - 0.02
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


def sources_changed() -> str | None:
    """The first fingerprinted source file modified after this process started (None if none)."""
    global _SOURCES_CHANGED
    if _SOURCES_CHANGED is None:
        source_fingerprint()
        start = _process_start_cached()
        for path in _SOURCE_FILES:
            try:
                if os.stat(path).st_mtime > start:
                    _SOURCES_CHANGED = path
                    break
            except OSError:
                _SOURCES_CHANGED = path
                break
    return _SOURCES_CHANGED or None


_START: float | None = None


def _process_start_cached() -> float:
    global _START
    if _START is None:
        _START = _process_start()
    return _START


def source_fingerprint() -> str:
    """sha256 of the code generator's sources (FINGERPRINT_SOURCES), once per process: an edit to
    codegen changes the machine code for the same tile IR, so it must change the key even when
    the version number does not (`sources_changed` covers edits made while a process runs)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256()
        for rel in FINGERPRINT_SOURCES:
            path = os.path.join(root, rel)
            if rel.endswith("/"):
                files = sorted((os.path.relpath(os.path.join(d, n), root), os.path.join(d, n))
                               for d, _, ns in os.walk(path) for n in ns if n.endswith(".py"))
            else:
                files = [(rel, path)]
            for name, p in files:
                _SOURCE_FILES.append(p)
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    data = b"<missing>"
                h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def array_digest(a) -> str:
    """sha256 of an array's dtype, shape and bytes (a const buffer's content)."""
    import numpy as np
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}|{a.dtype}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def entry_key(ir_text: str, const_digests, debug: bool, opt: int, host: dict, *,
              version: str | None = None, fingerprint: str | None = None, extra: dict | None = None) -> str:
    """The hex sha256 naming an entry. `host` is target.host_info() (triple, cpu, features, llvm,
    llvmlite); `const_digests` is [(buffer name, digest)]; `extra` holds caller-specific ABI facts."""
    if version is None:
        version = __version__
    doc = {"format": FORMAT_VERSION, "ir": ir_text, "consts": [list(c) for c in const_digests],
           "debug": bool(debug), "opt": int(opt), "nki_lite": version,
           "sources": source_fingerprint() if fingerprint is None else fingerprint,
           "llvmlite": host["llvmlite"], "llvm": host["llvm"], "triple": host["triple"], "cpu": host["cpu"],
           "features": host["features"], "extra": extra or {}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ---------------------------------------------------------------- entry format

def encode(key: str, meta: dict, obj: bytes) -> bytes:
    meta = dict(meta, key=key, format=FORMAT_VERSION)
    mj = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    payload = struct.pack("<I", len(mj)) + mj + bytes(obj)
    return HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(payload), hashlib.sha256(payload).digest()) + payload


def decode(data: bytes, key: str) -> tuple[dict, bytes]:
    """(metadata, object code) of an entry that must belong to `key`; CorruptEntry otherwise."""
    if len(data) < HEADER.size:
        raise CorruptEntry(f"truncated header ({len(data)} bytes)")
    magic, version, _, n, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptEntry("bad magic")
    if version != FORMAT_VERSION:
        raise CorruptEntry(f"format version {version}, expected {FORMAT_VERSION}")
    payload = data[HEADER.size:]
    if len(payload) != n:
        raise CorruptEntry(f"payload is {len(payload)} bytes, header says {n} (truncated or extended)")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    if n < 4:
        raise CorruptEntry("no metadata")
    (mlen,) = struct.unpack_from("<I", payload)
    if 4 + mlen > n:
        raise CorruptEntry("metadata length past the payload")
    try:
        meta = json.loads(payload[4:4 + mlen].decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptEntry(f"metadata is not JSON: {e}") from None
    if not isinstance(meta, dict):
        raise CorruptEntry("metadata is not an object")
    if meta.get("key") != key:
        raise CorruptEntry(f"foreign entry: metadata names key {str(meta.get('key'))[:16]}...")
    if meta.get("format") != FORMAT_VERSION:
        raise CorruptEntry("metadata format version mismatch")
    return meta, payload[4 + mlen:]


# ---------------------------------------------------------------- load / store

def load(key: str) -> tuple[dict, bytes] | None:
    """The (metadata, object code) stored under key, or None (missing, refused or corrupt)."""
    d = ready_dir()
    if d is None:
        return None
    path = entry_path(d, key)
    # O_NONBLOCK: opening a FIFO planted in the directory must not wait for a writer (the type check
    # below refuses it); O_NOFOLLOW: a symlink fails with ELOOP instead of being followed
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        _count("misses")
        return None
    except OSError as e:                          # ELOOP: a symlink; EACCES: not ours
        _count("refused")
        warn_once("entry", path, f"nki_lite JIT disk cache: not loading {path}: {e}")
        return None
    try:
        st = os.fstat(fd)
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else _private(st)
        if why:
            _count("refused")
            warn_once("entry", path, f"nki_lite JIT disk cache: not loading {path}: it is {why}; it will be "
                      "replaced by a private entry")
            return None
        if st.st_size > MAX_ENTRY_BYTES:
            data = b""
        else:
            chunks = []
            while True:
                c = os.read(fd, 1 << 20)
                if not c:
                    break
                chunks.append(c)
            data = b"".join(chunks)
    except OSError as e:
        warn_once("read", path, f"nki_lite JIT disk cache: cannot read {path}: {e}")
        os.close(fd)
        return None
    try:
        entry = decode(data, key)
    except CorruptEntry as e:
        os.close(fd)
        reject(path, str(e))
        return None
    try:
        os.utime(fd if os.utime in os.supports_fd else path)     # recently used: pruned last
    except OSError:
        pass
    os.close(fd)
    _count("hits")
    return entry


def reject(path_or_key: str, reason: str) -> None:
    """Count and log an unusable entry (the caller recompiles and overwrites it)."""
    _count("corrupt")
    log.warning("nki_lite JIT disk cache: ignoring entry %s (%s); recompiling", os.path.basename(path_or_key),
                reason)


def store(key: str, meta: dict, obj: bytes) -> bool:
    """Write an entry atomically (temp file + fsync + os.replace). False if the cache is unusable."""
    d = ready_dir()
    if d is None:
        return False
    data = encode(key, meta, obj)
    tmp = os.path.join(d, f".{key[:16]}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        fd = os.open(tmp, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, entry_path(d, key))
    except OSError as e:
        _count("write_errors")
        try:
            os.unlink(tmp)
        except OSError:
            pass
        warn_once("write", d, f"nki_lite JIT disk cache: cannot write to {d}: {e}")
        return False
    _count("writes")
    global _STORES
    _STORES += 1
    if _STORES % PRUNE_EVERY == 1:
        prune(d)
    return True


def prune(d: str, max_bytes: int | None = None) -> int:
    """Delete the least recently used entries until the directory holds at most 80% of the limit
    (NKI_LITE_CACHE_MAX_MB); returns how many were deleted. Stray temp files older than an hour go too."""
    if max_bytes is None:
        max_bytes = config.get("NKI_LITE_CACHE_MAX_MB") << 20
    entries, total, now, n = [], 0, time.time(), 0
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.name.endswith(SUFFIX):
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
                elif e.name.startswith(".") and e.name.endswith(".tmp") and now - st.st_mtime > 3600:
                    try:                                   # a crashed writer's leftover
                        os.unlink(e.path)
                        n += 1
                    except OSError:
                        pass
    except OSError:
        return n
    if 0 < max_bytes < total:
        goal = max_bytes * 4 // 5
        for _, size, path in sorted(entries):
            if total <= goal:
                break
            try:
                os.unlink(path)
                n += 1
            except OSError:
                pass
            total -= size
    return n


def clear(d: str | None = None) -> int:
    """Delete every entry (and stray temp file) in the cache directory; returns how many."""
    d = d or cache_dir()
    n = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        if name.endswith(SUFFIX) or (name.startswith(".") and name.endswith(".tmp")):
            try:
                os.unlink(os.path.join(d, name))
                n += 1
            except OSError:
                pass
    return n
