"""`nki-lite run` and `nki-lite estimate`: call a FILE::KERNEL on random inputs of given shapes.

Contract:
- `parse_shape("256x1024")` (also "256,1024"; "" is a 0-d scalar) and `parse_dtypes(names, n)` (one
  dtype for every input, or one per input; NKI names and aliases such as bf16) build the inputs;
  mistakes are NL-E901 naming the value. `parse_grid("2,2")` is an SPMD grid. `parse_kwargs(["N=4"])`
  gives trace-time constants (Python literals, else strings).
- `random_inputs(shapes, dtypes, seed)`: floats standard normal, integers in [-8, 8), bools fair coins,
  all from one seeded generator (the same command gives the same inputs).
- `run(...)` calls the kernel in `mode`, summarises each result (shape, dtype, min / max / mean,
  non-finite count) and, unless `check=False`, runs the other backend on the same inputs and compares
  bitwise (JIT and interpreter must agree bit for bit). Returns (text, ok).
- `estimate(...)` traces on placeholders (nothing runs) and returns the Estimate; `trace` / `png`
  write the Chrome trace / PNG timeline.
"""
from __future__ import annotations

import ast

import numpy as np

from .. import errors
from ..core import dtypes as D


def parse_shape(text: str) -> tuple[int, ...]:
    t = text.strip().strip("()[]")
    if not t:
        return ()
    try:
        dims = tuple(int(p) for p in t.replace("x", ",").replace("X", ",").split(",") if p.strip())
    except ValueError:
        raise errors.make("argument", f"--shape {text!r} is not a shape", hint="write e.g. 256x1024 or 256,1024") \
            from None
    if any(d < 0 for d in dims):
        raise errors.make("argument", f"--shape {text!r} has a negative dimension")
    return dims


def parse_dtypes(names: list[str] | None, n: int) -> list[str]:
    names = names or ["float32"]
    if len(names) not in (1, n):
        raise errors.make("argument", f"{len(names)} --dtype values for {n} --shape values",
                          hint="give one --dtype for every input, or one per --shape")
    out = []
    for name in names:
        try:
            out.append(D.name_of(name))
        except D.UnknownDType:
            raise errors.make("unknown_dtype", f"--dtype {name!r} is not an NKI dtype",
                              hint=f"one of {', '.join(sorted(D.PUBLIC))}") from None
    return out * n if len(out) == 1 else out


def parse_grid(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    g = parse_shape(text)
    if not g or any(d <= 0 for d in g):
        raise errors.make("argument", f"--grid {text!r} is not a grid of positive sizes", hint="e.g. --grid 2,2")
    return g


def parse_kwargs(items: list[str] | None) -> dict:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise errors.make("argument", f"--kwarg {item!r} is not NAME=VALUE")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def random_inputs(shapes, dtypes, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, name in zip(shapes, parse_dtypes(list(dtypes), len(shapes))):
        kind = D.info(name).kind
        if kind == "f":
            a = rng.standard_normal(shape).astype(np.float32).astype(D.to_numpy(name))
        elif kind in "iu":
            lo = 0 if kind == "u" else -8
            a = rng.integers(lo, 8, size=shape).astype(D.to_numpy(name))
        else:
            a = rng.integers(0, 2, size=shape).astype(bool)
        arrays.append(a)
    return arrays


def _bind_grid(kern, grid):
    return kern[grid] if grid else kern


def summarise(name: str, a) -> str:
    if a is None:
        return f"{name}: None"
    a = np.asarray(a)
    if a.size == 0:
        return f"{name}: shape {a.shape} {a.dtype} (empty)"
    f = a.astype(np.float64)
    bad = int(np.sum(~np.isfinite(f)))
    fin = f[np.isfinite(f)]
    stats = (f"min {fin.min():.6g} max {fin.max():.6g} mean {fin.mean():.6g}" if fin.size else "no finite values")
    return f"{name}: shape {a.shape} {a.dtype}  {stats}  non-finite {bad}"


def _as_list(r) -> list:
    return list(r) if isinstance(r, tuple) else [r]


def _bits_equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def run(kern, shapes, dtypes, grid=(), mode: str = "jit", seed: int = 0, kwargs: dict | None = None,
        check: bool = True) -> tuple[str, bool]:
    kwargs = kwargs or {}
    inputs = random_inputs(shapes, dtypes, seed)
    k = _bind_grid(kern, grid)
    result = _as_list(k(*[a.copy() for a in inputs], mode=mode, **kwargs))
    lines = [summarise(f"result[{i}]" if len(result) > 1 else "result", r) for i, r in enumerate(result)]
    ok = True
    if check:
        other = "interpret" if mode == "jit" else "jit"
        again = _as_list(k(*[a.copy() for a in inputs], mode=other, **kwargs))
        same = len(again) == len(result) and all(_bits_equal(x, y) for x, y in zip(result, again))
        ok = same
        lines.append(f"jit vs interpreter: {'bitwise identical' if same else 'DIFFERENT'}")
    return "\n".join(lines), ok


def estimate(kern, shapes, dtypes, grid=(), target: str | None = None, kwargs: dict | None = None,
             trace: str | None = None, png: str | None = None):
    from ..runtime.profile import estimate as _estimate
    from ..tuning import Autotuned
    from ..typing import TensorSpec
    specs = [TensorSpec(tuple(s), D.to_numpy(d)) for s, d in zip(shapes, dtypes)]
    k = _bind_grid(kern, grid)
    if isinstance(k, Autotuned):
        est = k.estimate(*specs, target=target, **(kwargs or {}))
    else:
        est = _estimate(k, *specs, target=target, record_events=bool(trace or png), **(kwargs or {}))
    if trace:
        est.save_trace(trace)
    if png:
        est.plot(png)
    return est
