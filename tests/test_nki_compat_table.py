"""docs/compat_nki.md stays true: regenerating it gives the committed page, and every name it calls
supported (or partial) really runs: each nisa instruction is exercised in tests/test_nki_dialect.py,
each nl function here, in a kernel, in both backends."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import nki_lite.nki as nki
import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl
from nki_lite.nki import compat_table
from nki_lite.nki.reference import REFERENCE

ROOT = Path(__file__).resolve().parents[1]
ROWS = compat_table.rows()
BUILT = [(name, kind) for name, kind, status, _ in ROWS if status != "not supported"]
MODES = ["interpret", "jit"]


def test_committed_table_is_what_the_generator_prints():
    assert (ROOT / "docs" / "compat_nki.md").read_text() == compat_table.render(), \
        "regenerate: python -m nki_lite.nki.compat_table > docs/compat_nki.md"


def test_every_reference_name_resolves_and_none_is_an_attribute_error():
    for name in REFERENCE:
        module, short = name.rsplit(".", 1)
        if module == "nki.language.NkiTensor":
            continue
        obj = getattr(__import__(compat_table.MODULES[module], fromlist=["_"]), short)
        assert obj is not None, name


def test_a_not_built_stub_is_classified_not_supported():
    assert compat_table.classify("nki.collectives.all_reduce")[0] == "not supported"
    assert compat_table.classify("nki.language.NkiTensor.indirect") == (
        "not supported", "tensor method not built (docs/nki_dialect.md, tensor views)")
    status, note = compat_table.classify("nki.language.NkiTensor.ap")       # __nki_partial__ of a tensor method
    assert status == "partial" and "dtype: on-chip: read-only" in note
    status, note = compat_table.classify("nki.isa.nc_matmul")
    assert status == "partial" and note.startswith("accumulate:")


def test_every_built_instruction_is_exercised_by_the_dialect_tests():
    files = sorted((ROOT / "tests").glob("test_nki_*.py")) + sorted((ROOT / "tests").glob("test_lnc*.py"))  # LNC=2 ops
    files += sorted((ROOT / "tests").glob("test_mx*.py"))                                         # MX instructions
    source = "".join(p.read_text() for p in files)
    called = set(re.findall(r"\bnisa\.([a-z_0-9]+)\(", source))
    for name, kind in BUILT:
        if name.startswith("nki.isa.") and kind == "function":
            assert name.rsplit(".", 1)[1] in called, f"{name} is marked supported but no test runs it"


# ------------------------------------------------------------------ nl functions, by parameter list

INT_OPS = {"invert", "left_shift", "right_shift", "bitwise_and", "bitwise_or", "bitwise_xor"}


def _data(fn_name: str, shape=(128, 8)):
    if fn_name in INT_OPS:
        return np.arange(np.prod(shape), dtype=np.int32).reshape(shape) % 7 + 1
    return np.random.default_rng(1).uniform(0.1, 0.9, shape).astype(np.float32)


def _run(body, *arrays, mode):
    """Run body(tiles...) -> tile as a kernel over the arrays; return the stored result."""
    def finish(r):
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    def one(a):
        return finish(body(nl.load(a)))

    def two(a, b):
        return finish(body(nl.load(a), nl.load(b)))
    return nki.jit(one if len(arrays) == 1 else two)(*arrays, mode=mode)


def _smoke_explicit():
    """Functions whose parameter lists need their own call; each returns a tile or None."""
    x = np.random.default_rng(2).uniform(0.1, 0.9, (128, 8)).astype(np.float32)
    return {
        "ndarray": lambda t: nl.ndarray(t.shape, t.dtype),
        "zeros": lambda t: nl.zeros(t.shape, nl.float32),
        "ones": lambda t: nl.ones(t.shape, nl.float32),
        "full": lambda t: nl.full(t.shape, 2.0, nl.float32),
        "zeros_like": lambda t: nl.zeros_like(t),
        "empty_like": lambda t: nl.empty_like(t),
        "load_transpose2d": None,           # needs the HBM tensor: run below
        "where": lambda t: nl.where(t > 0.5, t, 0.0),
        "gather_flattened": lambda t: nl.gather_flattened(t, nl.zeros((t.shape[0], 3), dtype=nl.uint32)),
        "matmul": lambda t: nl.matmul(t, t, transpose_x=True),
        "broadcast_to": lambda t: nl.broadcast_to(t[:, 0:1], t.shape),
        "shared_identity_matrix": lambda t: nl.shared_identity_matrix(8, nl.float32),   # an SBUF tensor
        "all": lambda t: nl.all(t > 0, axis=1),
        "device_print": lambda t: (nl.device_print("t", t), t)[1],
        "ds": lambda t: t[:, nl.ds(2, 4)],
        "program_id": lambda t: (nl.program_id(0), t)[1],
        "num_programs": lambda t: nl.full(t.shape, nl.num_programs(), nl.float32),
        "program_ndim": lambda t: nl.full(t.shape, nl.program_ndim(), nl.float32),
        "affine_range": lambda t: [t for _ in nl.affine_range(1)][0],
        "sequential_range": lambda t: [t for _ in nl.sequential_range(1)][0],
        "static_range": lambda t: [t for _ in nl.static_range(1)][0],
        "shared_constant": lambda t: nl.load(nl.shared_constant(np.ones((128, 2), np.float32))),
        "no_reorder": lambda t: _with(nl.no_reorder(), t),
        "is_hbm": lambda t: t if nl.is_hbm(nl.shared_hbm) else None,
        "is_on_chip": lambda t: t if nl.is_on_chip(nl.sbuf) else None,
        "is_psum": lambda t: t if nl.is_psum(nl.psum) else None,
        "is_sbuf": lambda t: t if nl.is_sbuf(nl.sbuf) else None,
        "dropout": lambda t: nl.dropout(t, 0.0),                  # rate 0 keeps every element
        "random_seed": lambda t: (nl.random_seed(3), t)[1],
        "rand": lambda t: nl.rand(t.shape),
        "dynamic_range": lambda t: [t for _ in nl.dynamic_range(1)][0],      # tests/test_nki_dynamic_loops.py
        "fori_loop": lambda t: (nl.fori_loop(0, 1, lambda i: None), t)[1],
        "while_loop": lambda t: (nl.while_loop(nisa.register_alloc(0), lambda r: r), t)[1],
    }, x


def _with(ctx, t):
    with ctx:
        return t


def _nl_functions():
    return [n.rsplit(".", 1)[1] for n, kind in BUILT if n.startswith("nki.language.") and kind == "function"
            and n.count(".") == 2]


@pytest.mark.parametrize("mode", MODES)
def test_every_supported_nl_function_runs_in_a_kernel(mode):
    explicit, x = _smoke_explicit()
    ran = set()
    for short in _nl_functions():
        params = REFERENCE[f"nki.language.{short}"][1]
        fn = getattr(nl, short)
        if short in explicit and explicit[short] is not None:
            r = _run(explicit[short], x, mode=mode)
        elif short == "load_transpose2d":
            def k(src):
                t = nl.load_transpose2d(src)
                out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
                nl.store(out, t)
                return out
            r = nki.jit(k)(x[:8, :], mode=mode)
            assert np.array_equal(r, x[:8, :].T)
        elif short in ("load", "store"):
            r = _run(lambda t: t, x, mode=mode)          # _run itself loads and stores
            assert np.array_equal(r, x)
        elif params == ("x", "dtype"):
            r = _run(lambda t, f=fn: f(t), _data(short), mode=mode)
        elif params == ("x", "y", "dtype"):
            r = _run(lambda t, u, f=fn: f(t, u), _data(short), _data(short), mode=mode)
        elif params[:2] == ("x", "axis"):
            r = _run(lambda t, f=fn: f(t, axis=1), _data(short), mode=mode)
        else:
            raise AssertionError(f"nl.{short}{params}: supported, but this test has no way to run it")
        assert r is not None and r.size > 0, short
        ran.add(short)
    assert ran == set(_nl_functions())


def test_entry_point_functions_are_the_tested_ones():
    """nki.jit / nki.simulate and the isa helpers are exercised in tests/test_nki_dialect.py."""
    source = "".join(p.read_text() for p in sorted((ROOT / "tests").glob("test_nki_*.py")))
    for name, kind in BUILT:
        if name.count(".") == 1 and kind == "function":
            assert f"nki.{name.rsplit('.', 1)[1]}(" in source, name
    assert "nisa.get_nc_version()" in source
    assert inspect.signature(nisa.dma_copy).parameters.keys() >= {"dst", "src", "oob_mode", "dge_mode"}


DTYPES = ["bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
          "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"]


def test_every_supported_dtype_value_holds_a_tile():
    built_values = {n.rsplit(".", 1)[1] for n, kind in BUILT if n.startswith("nki.language.") and kind == "value"}
    assert set(DTYPES) <= built_values
    # the MX containers hold codes, not values (no converting copy): tests/test_mx.py runs them
    mx = {"float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"}
    assert built_values - set(DTYPES) - mx == {"sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "tile_size"}

    def k(x, dt):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        c = nl.ndarray(x.shape, dtype=dt, buffer=nl.sbuf)
        nisa.tensor_copy(c, t)
        out = nl.ndarray(x.shape, dtype=dt, buffer=nl.shared_hbm)
        nisa.dma_copy(out, c)
        return out
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4) % 3
    for name in DTYPES:
        r = nki.jit(k)(x, getattr(nl, name))
        assert np.array_equal(r.astype(np.float32), x != 0 if name == "bool_" else x), name
    for space in ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm"):
        assert getattr(nl, space).name == space
    assert nl.tile_size.pmax == 128


def test_keyword_only_parameters_make_a_name_partial(monkeypatch):
    """A function taking by keyword only what the reference lists positionally is not 'supported'."""
    import nki_lite.language as legacy
    monkeypatch.setattr(nl, "exp", legacy.exp)          # the legacy form: dtype is keyword-only
    status, note = compat_table.classify("nki.language.exp")
    assert status == "partial" and note == "keyword-only here (positional in the reference): dtype"
