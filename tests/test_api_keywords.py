"""Call signatures of the public nl/nisa APIs (nki_lite/lang/api.py): every API accepts exactly the
keywords NKI documents for it (honoured, or deliberately ignored and listed in docs/api_keywords.md);
any other keyword is NL-E906 at the kernel's line with a did-you-mean hint, and a wrong number of
positional arguments (or a missing / doubled argument) is NL-E907 naming the API and its signature.

The coverage test walks every public callable of nki_lite.language and nki_lite.isa, so an API added
later without the checker fails here."""
from __future__ import annotations

import enum
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.lang import api, api_docs

from . import markers

HERE, line_of, _expect = markers.marker_helpers(__file__)
F32 = np.float32
MODES = ["interpret", "jit"]


def _raises(kernel, args, name: str, marker: str, mode: str):
    """Run kernel in `mode`; it must raise the registered error `name` at the `# marker` line."""
    with pytest.raises(errors.NkiLiteError) as ei:
        kernel(*args, mode=mode)
    e = ei.value
    assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
    assert f"{HERE}:{line_of(marker)}:" in str(e), str(e)
    return e


# ----------------------------------------------------------------------------- the three cases

@nki.jit
def store_msk(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
    nl.store(out, nl.zeros(x.shape, x.dtype))
    nl.store(out[ip, jf], nl.load(x[ip, jf]), msk=(ip < 2))  # MARK-MSK
    return out


@nki.jit
def load_maks(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
    t = nl.load(x[ip, jf], maks=(ip < 2))  # MARK-MAKS
    nl.store(out[ip, jf], t)
    return out


@nki.jit
def exp_dtyp(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(x), dtyp=nl.bfloat16))  # MARK-DTYP
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,marker,api_name,wrong,right", [
    (store_msk, "MARK-MSK", "nl.store", "msk", "mask"),
    (load_maks, "MARK-MAKS", "nl.load", "maks", "mask"),
    (exp_dtyp, "MARK-DTYP", "nl.exp", "dtyp", "dtype"),
])
def test_misspelt_keyword_is_an_error_at_its_line(kernel, marker, api_name, wrong, right, mode):
    e = _raises(kernel, (np.ones((4, 8), F32),), "unknown_keyword", marker, mode)
    assert isinstance(e, TypeError)
    assert f"{api_name}() got an unexpected keyword argument '{wrong}'" in str(e)
    assert f"did you mean '{right}'" in e.hint


def test_the_correct_spelling_is_honoured():
    """The same three calls spelt right do what they say (the mask stores / loads two rows only,
    dtype gives bf16), so the error above is what stood between the user and a silent wrong result."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        e = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        ip, jf = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1])[None, :]
        nl.store(out, nl.zeros(x.shape, x.dtype))
        nl.store(out[ip, jf], nl.load(x[ip, jf], mask=(ip < 2)), mask=(ip < 2))
        nl.store(e, nl.exp(nl.load(x), dtype=nl.bfloat16))
        return out, e

    x = np.full((4, 8), 2.0, F32)
    out, e = k(x)
    assert (out[:2] == 2.0).all() and (out[2:] == 0.0).all()
    assert e.dtype == nl.bfloat16 or str(e.dtype) == "bfloat16"


def test_no_close_match_lists_the_accepted_keywords():
    with pytest.raises(errors.ArgumentError) as ei:
        nl.exp(None, zzzz=1)
    assert ei.value.code == "NL-E906"
    assert "did you mean" not in ei.value.hint
    assert "dtype" in ei.value.hint and "mask" in ei.value.hint


# ----------------------------------------------------------------------------- arity

@nki.jit
def exp_two_positional(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.exp(t, t))  # MARK-ARITY-MANY
    return out


@nki.jit
def tensor_tensor_without_op(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nisa.tensor_tensor(t, t))  # MARK-ARITY-FEW
    return out


@nki.jit
def max8_without_src(x):
    out = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.max8(nl.load(x)))  # MARK-ARITY-KWONLY
    return out


@nki.jit
def exp_twice(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.exp(t, x=t))  # MARK-ARITY-TWICE
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,marker,words", [
    (exp_two_positional, "MARK-ARITY-MANY", ["nl.exp() takes 1 positional argument but 2 were given",
                                             "nl.exp(x, *, dtype=None, mask=None)"]),
    (tensor_tensor_without_op, "MARK-ARITY-FEW", ["nisa.tensor_tensor() is missing the argument 'op'",
                                                  "nisa.tensor_tensor(data1, data2, op, *"]),
    (max8_without_src, "MARK-ARITY-KWONLY", ["nisa.max8() takes 0 positional arguments but 1 was given",
                                             "nisa.max8(*, src, "]),
    (exp_twice, "MARK-ARITY-TWICE", ["nl.exp() got the argument 'x' twice"]),
])
def test_wrong_arity_is_a_coded_error_naming_the_signature(kernel, marker, words, mode):
    e = _raises(kernel, (np.ones((4, 8), F32),), "call_signature", marker, mode)
    assert isinstance(e, TypeError)
    for w in words:
        assert w in str(e), str(e)
    assert "<locals>" not in str(e)


# ----------------------------------------------------------------------------- every public API

# Callables of nl / nisa that are namespaces of constants or enums, not APIs one calls with arguments.
NAMESPACES = {"nl": {"fp32", "tile_size"}, "nisa": {"dge_mode", "engine", "fp32", "matmul_perf_mode", "nc_version",
                                                    "oob_mode", "reduce_cmd"}}


def _public_callables():
    for prefix, mod in (("nl", nl), ("nisa", nisa)):
        for attr in sorted(dir(mod)):
            obj = getattr(mod, attr)
            if not attr.startswith("_") and callable(obj):
                yield prefix, attr, obj


def _is_namespace(obj) -> bool:
    """A class without a constructor of its own (constants) or an Enum."""
    return isinstance(obj, type) and (issubclass(obj, enum.Enum)
                                      or not ({"__init__", "__new__"} & set(vars(obj))))


def test_namespaces_excluded_below_really_are_namespaces():
    found = {(p, a) for p, a, obj in _public_callables() if _is_namespace(obj)}
    assert found == {(p, a) for p, names in NAMESPACES.items() for a in names}


@pytest.mark.parametrize("prefix,attr,obj", [c for c in _public_callables() if c[1] not in NAMESPACES[c[0]]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_api_rejects_a_bogus_keyword(prefix, attr, obj):
    spec = api.spec_of(obj)
    assert spec is not None, f"{prefix}.{attr} is not declared with nki_lite.lang.api.api"
    assert spec.name in (f"{prefix}.{attr}", f"nl.{attr}", f"nisa.{attr}"), spec.name
    with pytest.raises(errors.ArgumentError) as ei:
        obj(bogus_keyword_xyz=1)
    assert ei.value.code == "NL-E906"
    assert f"{spec.name}() got an unexpected keyword argument 'bogus_keyword_xyz'" in str(ei.value)


def test_every_ignored_keyword_has_a_reason():
    assert api.REGISTRY
    for spec in api.REGISTRY.values():
        for kw, why in spec.ignored.items():
            assert why.strip(), (spec.name, kw)


def test_docs_page_is_generated_from_the_registry():
    doc = open(os.path.join(os.path.dirname(HERE), "..", "docs", "api_keywords.md")).read()
    assert doc.strip() == api_docs.render_docs().strip(), \
        "regenerate: python -m nki_lite.lang.api_docs > docs/api_keywords.md"


# ----------------------------------------------------------------------------- accepted, ignored, unsupported

@nki.jit
def with_ignored_keywords(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    acc = nl.zeros(x.shape, dtype=nl.float32, lazy_initialization=True)
    for i in nl.affine_range(1, precise_schedule=True):
        a = nl.load(x)
        b = nl.load(y)
        s = nisa.tensor_tensor(a, b, op=np.add, name="sum")
        p = nl.multiply(s, 2.0, max_free_vec_size=512)
        c = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        c[...] = nisa.activation(op=nl.copy, data=p, name="act", buffer=nl.psum)
        acc[...] = c
    for j in nl.sequential_range(1, directives=None):
        nl.store(out, acc)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_ignored_keywords_real_kernels_pass_are_accepted(mode):
    """Keywords the public NKI kernels pass that do not change results (name=, precise_schedule=,
    directives=, lazy_initialization=, max_free_vec_size=, address=, activation's buffer=) run, with
    the result of the same kernel without them."""
    x = np.arange(32, dtype=F32).reshape(4, 8)
    y = np.ones((4, 8), F32)
    np.testing.assert_array_equal(with_ignored_keywords(x, y, mode=mode), (x + y) * 2)


def test_ignored_keyword_is_not_honoured_elsewhere():
    """name= is ignored on nisa instructions only: an nl compute function rejects it."""
    with pytest.raises(errors.ArgumentError) as ei:
        nl.exp(None, name="e")
    assert ei.value.code == "NL-E906"


@nki.jit
def load_with_oob_mode(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x, mode=None))  # MARK-OOB
    return out


@pytest.mark.parametrize("mode", MODES)
def test_known_but_unbuilt_keyword_is_unsupported_not_unknown(mode):
    e = _raises(load_with_oob_mode, (np.ones((4, 8), F32),), "unsupported", "MARK-OOB", mode)
    assert "mode=" in str(e)


@nki.jit
def new_dialect_dst(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, dtype=x.dtype)
    nisa.tensor_tensor(dst=r, data1=t, data2=t, op=np.add)  # MARK-DST
    nl.store(out, r)
    return out


def test_new_dialect_dst_keyword_says_the_dialect_is_not_built():
    e = _raises(new_dialect_dst, (np.ones((4, 8), F32),), "unknown_keyword", "MARK-DST", "interpret")
    assert "new NKI dialect" in e.hint


def test_numpy_ufunc_keywords_are_checked_too():
    """np.exp(tile, casting=...) reaches nl.exp through __array_ufunc__: numpy's own keywords are not
    NKI keywords and must not be dropped silently."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, np.exp(nl.load(x), casting="unsafe"))  # MARK-UFUNC
        return out

    _expect(k, (np.ones((4, 8), F32),), errors.ArgumentError, "unknown_keyword", "MARK-UFUNC")


def test_decorating_a_function_with_var_keywords_is_refused():
    """The mechanism cannot be applied to a `**kwargs` function: that would swallow keywords again."""
    def f(x, **kwargs):
        return x
    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        api.api("nl.f")(f)


def test_decorated_function_keeps_working_with_valid_calls():
    @api.api("nl.demo", ignored=("name",))
    def demo(x, y=2, *, z=3):
        return x + y + z

    assert demo(1) == 6 and demo(1, 1, z=1, name="n") == 3
    with pytest.raises(errors.ArgumentError, match="NL-E907"):
        demo()
    with pytest.raises(errors.ArgumentError, match="did you mean 'z'"):
        demo(1, zz=0)
    api.REGISTRY.pop("nl.demo")


# ----------------------------------------------------------------------------- documented but not honoured

@nki.jit
def activation_accumulating(x, cmd):
    out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((x.shape[0], 1), dtype=nl.float32)
    t = nl.load(x)
    command = getattr(nisa.reduce_cmd, cmd)
    nisa.activation(op=nl.exp, data=t, reduce_op=np.add, reduce_res=res, reduce_cmd=command)  # MARK-RCMD
    nl.store(out, res)
    return out


@pytest.mark.parametrize("cmd", ["reduce", "load_reduce", "reset"])
def test_activation_reduce_cmd_that_accumulates_across_calls_is_unsupported(cmd):
    """reduce_cmd=reduce / load_reduce keep the accumulator registers of earlier activations; nki_lite
    reduces each instruction on its own, so it must say so instead of returning this call's sum."""
    e = _raises(activation_accumulating, (np.ones((4, 8), F32), cmd), "unsupported", "MARK-RCMD", "interpret")
    assert "reduce_cmd" in str(e)


@pytest.mark.parametrize("cmd", ["idle", "reset_reduce"])
def test_activation_reduce_cmd_of_one_instruction_is_honoured(cmd):
    x = np.full((4, 8), 0.5, F32)
    got = activation_accumulating(x, cmd)
    np.testing.assert_allclose(got[:, 0], np.exp(x).sum(axis=1), rtol=1e-6)


@nki.jit
def copy_predicated_cast(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.load(x)
    pred = nl.greater(dst, 0.0, dtype=nl.uint8)
    nisa.tensor_copy_predicated(src=1.0, dst=dst, predicate=pred, dtype=nl.bfloat16)  # MARK-CPD
    nl.store(out, dst)
    return out


def test_tensor_copy_predicated_dtype_other_than_dst_is_an_error():
    """dst is written in place, so dtype= can only be dst's own dtype (it used to be dropped)."""
    _expect(copy_predicated_cast, (np.ones((4, 8), F32),), errors.KernelDTypeError, "dtype", "MARK-CPD")


def test_nc_matmul_hints_are_documented_as_ignored():
    spec = api.spec_of(nisa.nc_matmul)
    assert {"is_stationary_onezero", "is_moving_onezero", "tile_position", "tile_size"} <= set(spec.ignored)
