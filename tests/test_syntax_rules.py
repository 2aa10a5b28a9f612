"""Python constructs a kernel may not use (NL-E803, lang/syntax.py) and the ones it may.

Each case is a small kernel written to a real file (the checker reads source), traced in both modes
(the check runs before either backend). Rejected: what NKI's compiler front end rejects and no
public kernel uses; accepted: NKI's own `with` form, inner helpers, raise/import, comprehensions.
"""
import importlib.util
import textwrap
import warnings

import numpy as np
import pytest

import nki_lite as nki
from nki_lite import errors

HEADER = """\
import numpy as np
import nki_lite as nki
import nki_lite.language as nl
import nki_lite.compiler as ncc
"""

COPY = """\
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
"""


def load(tmp_path, body: str, name="k", helpers: str = ""):
    """Module with `@nki.jit def k(x)` whose body is COPY + body; returns (kernel, path)."""
    src = HEADER + textwrap.dedent(helpers) + "\n@nki.jit\ndef k(x):\n" + COPY + textwrap.indent(
        textwrap.dedent(body), "    ") + "    nl.store(out, t)\n    return out\n"
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k, path


def marked_line(path, marker="# BAD") -> int:
    lines = path.read_text().splitlines()
    hits = [i + 1 for i, s in enumerate(lines) if s.rstrip().endswith(marker)]
    assert len(hits) == 1
    return hits[0]


X = np.linspace(-1, 1, 128 * 4, dtype=np.float32).reshape(128, 4)

REJECTED = {
    "try": ("try:  # BAD\n    t = nl.exp(t)\nexcept Exception:\n    pass\n", "`try`"),
    "global": ("global COUNT  # BAD\nCOUNT = 1\n", "`global`"),
    "class": ("class Box:  # BAD\n    pass\n", "class definition"),
    "async def": ("async def helper():  # BAD\n    pass\n", "`async def`"),
    "genexp": ("ts = (nl.exp(t) for _ in range(2))  # BAD\nt = next(ts)\n", "generator expression"),
    "genexp to helper": ("t = nl.add(*(nl.exp(t) for _ in range(2)))  # BAD\n", "generator expression"),
    "yield": ("yield t  # BAD\n", "`yield`"),
    "with as": ("with ncc.no_reorder() as r:  # BAD\n    t = nl.exp(t)\n", "`with ... as name`"),
    "with args": ("with open('f') :  # BAD\n    pass\n", "called with arguments"),
    "with two": ("with ncc.no_reorder(), ncc.allocation_scope():  # BAD\n    pass\n", "several"),
}


@pytest.mark.parametrize("mode", ("interpret", "jit"))
@pytest.mark.parametrize("case", sorted(REJECTED))
def test_rejected_construct(tmp_path, case, mode):
    body, what = REJECTED[case]
    k, path = load(tmp_path, body, name="k_" + case.replace(" ", "_"))
    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(X, mode=mode)
    e = ei.value
    assert e.code == "NL-E803" and what in e.message, str(e)
    assert f"{path}:{marked_line(path)}:" in str(e), str(e)


def test_rejected_in_a_helper(tmp_path):
    helpers = """
    def helper(t):
        try:  # BAD
            return nl.exp(t)
        finally:
            pass
    """
    k, path = load(tmp_path, "t = helper(t)\n", name="k_helper", helpers=helpers)
    with pytest.raises(errors.KernelSyntaxError) as ei:
        k(X)
    assert ei.value.code == "NL-E803" and "'helper'" in ei.value.message
    assert f"{path}:{marked_line(path)}:" in str(ei.value)


def test_rejected_before_anything_runs(tmp_path):
    # the check runs on the source before the body: a side effect above the bad line never happens
    helpers = "CALLS = []\n"
    k, path = load(tmp_path, "CALLS.append(1)\nts = (nl.exp(t) for _ in range(2))  # BAD\n", name="k_early",
                   helpers=helpers)
    with pytest.raises(errors.KernelSyntaxError):
        k(X)
    assert k.fn.__globals__["CALLS"] == []


ACCEPTED = {
    "nki with": "with ncc.no_reorder():\n    t = nl.exp(t)\n",
    "inner def": "def inner(u):\n    return nl.exp(u)\nt = inner(t)\n",
    "raise": "if x.shape[0] > 128:\n    raise ValueError('too big')\n",
    "import": "import math\nt = nl.multiply(t, float(math.sqrt(4.0)))\n",
    "list comprehension": "ts = [nl.exp(t) for _ in range(2)]\nt = ts[1]\n",
    "lambda": "f = lambda u: nl.exp(u)\nt = f(t)\n",
    "print of a value": "print('shape', x.shape)\n",
    "generator consumed at once": "n = sum(d for d in x.shape)\nshape = tuple(s for s in x.shape)\n",
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted_construct(tmp_path, case, capsys):
    k, _ = load(tmp_path, ACCEPTED[case], name="ok_" + case.replace(" ", "_"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = k(X, mode="interpret")
    want = {"nki with": np.exp(X), "inner def": np.exp(X), "list comprehension": np.exp(X), "lambda": np.exp(X),
            "import": X * 2}.get(case, X)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_print_of_a_tile_warns_and_points_to_device_print(tmp_path, capsys):
    k, path = load(tmp_path, "print(t)  # BAD\n", name="k_print")
    with pytest.warns(nki.TilePrintWarning, match="nl.device_print") as rec:
        k(X, mode="interpret")
    w = [r for r in rec if "device_print" in str(r.message)][0]
    assert (w.filename, w.lineno) == (str(path), marked_line(path))
