"""nki_lite.testing: comparing kernel results with references, with per-dtype tolerances.

Contract: `assert_close(actual, expected, dtype=None, rtol=None, atol=None)` passes when every
element satisfies |a - e| <= atol + rtol * |e| (NaNs must match positions; infinities must match
exactly). Default tolerances come from the *kernel's output dtype* (the dtype of `actual` unless
`dtype=` names a lower-precision compute type): roughly 2-4 ulps of that format. On failure the
AssertionError reports the count and fraction of mismatches, the worst elements with their
indices, and the max absolute / relative errors.
"""
from __future__ import annotations

import numpy as np

from .core import dtypes as D

# (rtol, atol) per output format: a few units in the last place, atol for values near zero.
TOLERANCES = {
    "float32": (1e-5, 1e-6), "tfloat32": (2e-3, 1e-5), "float16": (2e-3, 1e-4), "bfloat16": (1.6e-2, 1e-3),
    "float8_e4m3": (1.3e-1, 1.6e-2), "float8_e4m3fn": (1.3e-1, 1.6e-2), "float8_e5m2": (2.5e-1, 3.2e-2),
}


def tolerance(dtype) -> tuple[float, float]:
    name = D.name_of(dtype)
    return TOLERANCES.get(name, (0.0, 0.0))


def assert_close(actual, expected, *, dtype=None, rtol: float | None = None, atol: float | None = None,
                 max_report: int = 5) -> None:
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: actual {actual.shape} vs expected {expected.shape}")
    name = D.name_of(dtype if dtype is not None else actual.dtype)
    drt, dat = TOLERANCES.get(name, (0.0, 0.0))
    rtol = drt if rtol is None else rtol
    atol = dat if atol is None else atol
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    with np.errstate(invalid="ignore"):
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        inf_mismatch = (np.isinf(a) | np.isinf(e)) & (a != e)
        err = np.abs(a - e)
        bad = (nan_a != nan_e) | inf_mismatch | (~nan_a & ~nan_e & ~np.isinf(e) & (err > atol + rtol * np.abs(e)))
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(np.abs(e) > 0, err / np.abs(e), np.inf)
        finite = ~nan_a & ~nan_e
    idx = np.argwhere(bad)
    order = np.argsort(-np.where(bad, np.nan_to_num(err, nan=np.inf, posinf=np.inf), -1).ravel())[:max_report]
    lines = [f"Not close ({name}: rtol={rtol:g}, atol={atol:g}): {n_bad} of {a.size} elements "
             f"({100.0 * n_bad / max(1, a.size):.3g}%) mismatch",
             f"  max abs error {np.max(err[finite], initial=0):.6g}, max rel error "
             f"{np.max(np.where(finite, rel, 0), initial=0):.6g}",
             "  worst elements (index: actual vs expected):"]
    for flat in order:
        ix = np.unravel_index(flat, a.shape)
        if bad[ix]:
            lines.append(f"    {tuple(int(i) for i in ix)}: {actual[ix]!r} vs {expected[ix]!r}")
    if len(idx) and len(lines) == 3:
        lines.append(f"    first at {tuple(int(i) for i in idx[0])}")
    raise AssertionError("\n".join(lines))
