"""Test-suite defaults. The JIT is the default backend, so every kernel test doubles as a check of
the JIT against the numerics contract:
- NKI_LITE_DEBUG=1: new tiles are NaN-filled like in the interpreter (uninitialised reads agree);
- NKI_LITE_JIT_OPT=0: LLVM compiles in ~5 ms instead of ~60 ms; results are identical at every
  level (no fast-math), and tests/test_jit_differential.py covers the optimised levels.
- NKI_LITE_DISK_CACHE=0: compile counts do not depend on earlier runs (test_diskcache.py enables it).
Tests that need other settings set them explicitly (monkeypatch)."""
import os

os.environ.setdefault("NKI_LITE_DEBUG", "1")
os.environ.setdefault("NKI_LITE_JIT_OPT", "0")
os.environ.setdefault("NKI_LITE_DISK_CACHE", "0")   # hermetic: no reuse across runs, no ~/.cache writes
                                                     # (tests/test_diskcache.py turns it on in tmp dirs)
