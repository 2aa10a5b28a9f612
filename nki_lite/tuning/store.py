"""Autotune choices on disk, next to the JIT cache, so a later process reuses them without re-tuning.

Contract:
- Location: `<JIT cache dir>/autotune/` (docs/jit_cache.md: NKI_LITE_CACHE_DIR, else the XDG cache),
  created 0700; used only when the JIT disk cache is enabled (NKI_LITE_DISK_CACHE) and the directory
  passes the JIT cache's ownership rules; otherwise choices live in memory only.
- `record_key(doc)` is the sha256 of a JSON document (kernel identity and source digest, configs,
  key values, target, grid, method, nki_lite version); `load(key)` returns the stored JSON record or
  None (a missing, unreadable, foreign or malformed file is a miss); `save(key, record)` writes
  atomically (0600 temp file, os.replace). JSON only, never pickle. Failures never fail a call.
- `clear()` deletes every record and returns how many.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat

from ..runtime import diskcache

SUFFIX = ".json"


def record_key(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr).encode()).hexdigest()


def directory(create: bool = True) -> str | None:
    if not diskcache.enabled():
        return None
    base = diskcache.ready_dir() if create else diskcache.cache_dir()
    if base is None:
        return None
    d = os.path.join(base, "autotune")
    try:
        if create:
            os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    uid = os.getuid() if hasattr(os, "getuid") else None
    if not stat.S_ISDIR(st.st_mode) or (uid is not None and st.st_uid != uid) or \
            st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return d


def load(key: str) -> dict | None:
    d = directory(create=False)
    if d is None:
        return None
    path = os.path.join(d, key + SUFFIX)
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("key") != key or not isinstance(rec.get("choice"), int):
        return None
    return rec


def save(key: str, record: dict) -> bool:
    d = directory()
    if d is None:
        return False
    tmp = os.path.join(d, f".{key[:16]}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(dict(record, key=key), f, indent=1, default=repr)
        os.replace(tmp, os.path.join(d, key + SUFFIX))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


def entries() -> list[str]:
    d = directory(create=False)
    if d is None:
        return []
    try:
        return [os.path.join(d, n) for n in os.listdir(d) if n.endswith(SUFFIX)]
    except OSError:
        return []


def clear() -> int:
    n = 0
    for p in entries():
        try:
            os.unlink(p)
            n += 1
        except OSError:
            pass
    return n
