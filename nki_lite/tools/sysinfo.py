"""`nki-lite sysinfo`: what a bug report needs about this machine and this install.

Contract: `info()` returns a dict (versions of nki_lite, Python, numpy, ml_dtypes, llvmlite / LLVM and
the optional extras; CPU model, core count and the vector features the JIT uses; numpy's BLAS; the
JIT disk cache directory and its state; every NKI_LITE_* knob set in the environment, with the
value it parses to). `render(info)` is the text form. Reading it never fails: a part that cannot be
read says why.
"""
from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

from .. import config

OPTIONAL = ("matplotlib", "tqdm", "threadpoolctl", "torch", "jax", "mypy")
FEATURES = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512bf16", "avx512fp16", "neon")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; else what the platform module knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host() -> dict:
    try:
        from ..lower.llvm.target import host_info
        h = host_info()
        feats = set(f[1:] for f in h["features"].split(",") if f.startswith("+"))
        return {"llvm": h["llvm"], "triple": h["triple"], "cpu": h["cpu"],
                "features": " ".join(f for f in FEATURES if f in feats) or "none of " + " ".join(FEATURES)}
    except Exception as e:      # the JIT cannot start here: say why
        return {"llvm": f"unavailable ({type(e).__name__}: {e})"}


def _blas() -> str:
    try:
        import numpy as np
        cfg = np.show_config(mode="dicts")  # type: ignore[call-arg]
        b = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{b.get('name', '?')} {b.get('version', '')}".strip()
    except Exception as e:
        return f"unknown ({type(e).__name__})"


def _cache() -> dict:
    from ..runtime import diskcache
    from ..tuning import store
    d = diskcache.cache_dir()
    n = size = 0
    try:
        for name in os.listdir(d):
            if name.endswith(diskcache.SUFFIX):
                n += 1
                size += os.path.getsize(os.path.join(d, name))
    except OSError:
        pass
    return {"dir": d, "enabled": diskcache.enabled(), "entries": n, "bytes": size,
            "autotune_records": len(store.entries())}


def knobs() -> dict:
    """Every registered knob set in the environment: (raw, parsed or the error)."""
    out = {}
    for name in config.KNOBS:
        if name in os.environ:
            try:
                out[name] = (os.environ[name], config.get(name))
            except Exception as e:
                out[name] = (os.environ[name], f"invalid: {type(e).__name__}")
    return out


def info() -> dict:
    from ..version import __version__
    return {
        "nki_lite": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
        "numpy": _version("numpy"), "ml_dtypes": _version("ml_dtypes"), "llvmlite": _version("llvmlite"),
        "optional": {d: _version(d) for d in OPTIONAL},
        "cpu": {"model": cpu_model(), "cores": os.cpu_count(), **_host()},
        "blas": _blas(), "cache": _cache(), "knobs": knobs(), "default_target": config.default_target(),
    }


def render(d: dict) -> str:
    lines = [f"nki_lite {d['nki_lite']} on Python {d['python']} ({d['platform']})",
             f"numpy {d['numpy']}, ml_dtypes {d['ml_dtypes']}, llvmlite {d['llvmlite']}, "
             f"LLVM {d['cpu'].get('llvm', '?')}",
             "optional: " + ", ".join(f"{k} {v}" for k, v in d["optional"].items()),
             f"CPU: {d['cpu']['model']} ({d['cpu']['cores']} logical cores; LLVM cpu {d['cpu'].get('cpu', '?')}, "
             f"{d['cpu'].get('triple', '?')})",
             f"vector features: {d['cpu'].get('features', '?')}",
             f"BLAS (numpy): {d['blas']}",
             f"JIT disk cache: {d['cache']['dir']} ({'enabled' if d['cache']['enabled'] else 'disabled'}; "
             f"{d['cache']['entries']} entries, {d['cache']['bytes'] / 1e6:.1f} MB; "
             f"{d['cache']['autotune_records']} autotune choices)",
             f"default target: {d['default_target']}"]
    if d["knobs"]:
        lines.append("knobs set:")
        lines += [f"  {k}={raw!r} -> {parsed!r}" for k, (raw, parsed) in d["knobs"].items()]
    else:
        lines.append("knobs set: none (docs/configuration.md lists them)")
    return "\n".join(lines)
