"""Call signatures of the public nl / nisa APIs: one checker, applied with one decorator line.

Contract:
- `@api("nl.load")` (or `@isa("nisa.tensor_tensor")` for ISA instructions) declares a public API.
  The function's own Python signature is the one NKI documents (no `**kwargs`: the decorator
  refuses such a function, since swallowing keywords is exactly the bug this module exists for).
  Before the body runs, a call with
  - a keyword the signature does not name → NL-E906 unknown_keyword at the kernel's line, with a
    did-you-mean hint (difflib) and the keywords the API accepts;
  - a keyword listed in `ignored=` → accepted and dropped: NKI or real public kernels pass it and
    it does not change results in nki_lite; each has its reason in IGNORED (a parameter of the
    signature may be listed too: it is then accepted, documented as having no effect);
  - a keyword listed in `unsupported=` → NL-E904: NKI has it, nki_lite has not built it;
  - too many / too few positional arguments, a missing or a doubled argument → NL-E907 naming the
    API and its signature (never Python's `fn() takes 1 positional argument...`).
  The checks do not need a kernel: they hold for host-side APIs (nl.static_cast) too.
- `isa(...)` is `api(...)` with `name=` ignored: every NKI ISA instruction takes an instruction name.
- A class (nl.par_dim, nl.nc, ...) can be declared too: its constructor is checked.
- REGISTRY maps each API name to its ApiSpec (filled as the op modules are imported);
  lang/api_docs.py renders it as docs/api_keywords.md, checked by tests/test_api_keywords.py,
  which also asserts that every public callable of nki_lite.language / nki_lite.isa is declared.
"""
from __future__ import annotations

import difflib
import enum
import functools
import inspect
from dataclasses import dataclass, field

from .. import errors
from ..loc import capture_loc

# Why each ignored keyword may be dropped: it must not change what the kernel computes.
IGNORED = {
    "name": "an instruction name for the compiler's listings; nki_lite names instructions by their source line",
    "precise_schedule": "a scheduling hint to NKI's compiler (public kernels pass it); iterations and results "
                        "do not change",
    "directives": "scheduling directives such as nki.compiler.no_reorder() (public kernels pass them); nki_lite "
                  "keeps program order anyway",
    "lazy_initialization": "an allocation hint to NKI's compiler (public kernels pass it); the tensor's values "
                           "are the same",
    "address": "a fixed on-chip address; nki_lite allocates automatically, as for the nki.compiler allocators",
    "max_free_vec_size": "a vectorisation hint to NKI's tensorizer (public kernels pass it); results are the same",
    "is_stationary_onezero": "a performance hint that the operand holds only 0 and 1; the product is the same",
    "is_moving_onezero": "a performance hint that the operand holds only 0 and 1; the product is the same",
    "tile_position": "where a small matmul sits in the PE array (trn2+); the product is the same",
    "tile_size": "the PE-array tile a small matmul occupies (trn2+); the product is the same",
    "buffer": "(nisa.activation) the memory of the result (public kernels pass buffer=nl.psum); nki_lite keeps "
              "the result in SBUF, with the same values",
}


@dataclass(frozen=True)
class ApiSpec:
    name: str                              # "nl.load"
    signature: str                         # "(src, *, mask=None, dtype=None)"
    keywords: frozenset                    # keyword names the function itself takes
    positional: tuple                      # names that may be passed by position, in order
    n_required: int                        # how many of `positional` have no default
    kw_required: tuple                     # keyword-only parameters without a default
    var_positional: bool                   # takes *args
    ignored: dict = field(default_factory=dict)       # keyword -> reason
    unsupported: dict = field(default_factory=dict)   # keyword -> message

    def call_text(self) -> str:
        return f"{self.name}{self.signature}"


REGISTRY: dict[str, ApiSpec] = {}


def spec_of(obj) -> ApiSpec | None:
    """The ApiSpec of a declared API (function or class), else None."""
    return getattr(obj, "__nki_api__", None)


# ---------------------------------------------------------------- declaring

def api(name: str, *, ignored: tuple = (), unsupported: dict | None = None):
    """Decorator declaring the public API `name` (see the module docstring)."""
    def deco(obj):
        if isinstance(obj, type):
            return _declare_class(obj, name, ignored, unsupported or {})
        spec = _make_spec(obj, name, ignored, unsupported or {}, skip_first=False)
        wrapper = _wrap(obj, spec, skip_first=False)
        wrapper.__name__ = name.split(".")[-1]
        wrapper.__qualname__ = wrapper.__name__
        return wrapper
    return deco


def isa(name: str, *, ignored: tuple = (), unsupported: dict | None = None):
    """`api` for an NKI ISA instruction: `name=` (the instruction's name) is accepted and ignored."""
    return api(name, ignored=("name",) + tuple(ignored), unsupported=unsupported)


def _declare_class(cls: type, name: str, ignored, unsupported):
    attr = "__new__" if "__new__" in vars(cls) else "__init__"
    raw = vars(cls)[attr]
    fn = raw.__func__ if isinstance(raw, staticmethod) else raw
    spec = _make_spec(fn, name, ignored, unsupported, skip_first=True)
    wrapper = _wrap(fn, spec, skip_first=True)
    setattr(cls, attr, staticmethod(wrapper) if attr == "__new__" else wrapper)
    cls.__nki_api__ = spec
    return cls


def _make_spec(fn, name: str, ignored, unsupported, skip_first: bool) -> ApiSpec:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1 if skip_first else 0:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        raise TypeError(f"{name}: an API declared with nki_lite.lang.api takes no **kwargs; list the keywords NKI "
                        "documents as parameters, and the ones it ignores in ignored=")
    for kw in ignored:
        if kw not in IGNORED:
            raise TypeError(f"{name}: ignored keyword {kw!r} needs its reason in nki_lite.lang.api.IGNORED")
    positional = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    keywords = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    spec = ApiSpec(
        name=name, signature=_render(params), keywords=keywords, positional=positional,
        n_required=sum(1 for p in params if p.name in positional and p.default is p.empty),
        kw_required=tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty),
        var_positional=any(p.kind is p.VAR_POSITIONAL for p in params),
        ignored={kw: IGNORED[kw] for kw in ignored},
        unsupported=dict(unsupported))
    REGISTRY[name] = spec
    return spec


def _wrap(fn, spec: ApiSpec, skip_first: bool):
    # Tracing calls these wrappers once per instruction: the common, valid call costs a few set
    # operations; the slow paths only run to raise (or, for n < n_required, to accept keywords).
    keywords, n_req = spec.keywords, spec.n_required
    max_pos = 1 << 30 if spec.var_positional else len(spec.positional)
    kw_req = frozenset(spec.kw_required)
    # given_by_position[n]: the parameters that n positional arguments fill (past the end: all of them)
    given_by_position = tuple(frozenset(spec.positional[:n]) for n in range(len(spec.positional) + 1))
    last = len(given_by_position) - 1

    def check(args, kwargs):
        n = len(args)
        if kwargs:
            if not kwargs.keys() <= keywords:
                kwargs = _drop_or_reject(spec, kwargs)
            if n and n <= max_pos and not given_by_position[n if n < last else last].isdisjoint(kwargs):
                _check_arity(spec, n, kwargs)
        if n > max_pos or n < n_req or (kw_req and not kw_req <= kwargs.keys()):
            _check_arity(spec, n, kwargs)
        return kwargs

    if skip_first:
        @functools.wraps(fn)
        def wrapper(first, *args, **kwargs):
            return fn(first, *args, **check(args, kwargs))
    else:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **check(args, kwargs))
    wrapper.__nki_api__ = spec
    return wrapper


# ---------------------------------------------------------------- checking

def _drop_or_reject(spec: ApiSpec, kwargs: dict) -> dict:
    extra = [k for k in kwargs if k not in spec.keywords]
    for k in extra:
        if k in spec.unsupported:
            raise errors.make("unsupported", f"{spec.name}(): {spec.unsupported[k]}", loc=capture_loc())
        if k not in spec.ignored:
            raise errors.make("unknown_keyword", f"{spec.name}() got an unexpected keyword argument '{k}'",
                              loc=capture_loc(), hint=_keyword_hint(spec, k))
    return {k: v for k, v in kwargs.items() if k in spec.keywords}


def suggest(word: str, candidates) -> str | None:
    """The closest candidate to a misspelt `word` (difflib), or None."""
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def _keyword_hint(spec: ApiSpec, word: str) -> str:
    accepted = sorted(spec.keywords | set(spec.ignored))
    near = suggest(word, accepted)
    parts = [f"did you mean '{near}'?"] if near else []
    parts.append(f"{spec.call_text()} accepts " + (", ".join(f"{k}=" for k in accepted) if accepted
                                                   else "no keyword arguments"))
    if spec.ignored:
        parts.append("(ignored: " + ", ".join(sorted(spec.ignored)) + ")")
    if word == "dst" and spec.name.startswith("nisa."):
        parts.append("- the new NKI dialect (nki.isa calls writing into dst=) is not built yet; use the legacy "
                     "form result = nisa.op(...)")
    return " ".join(parts)


def _check_arity(spec: ApiSpec, n: int, kwargs: dict) -> None:
    def fail(msg: str, hint: str):
        raise errors.make("call_signature", f"{spec.name}() {msg}; signature: {spec.call_text()}",
                          loc=capture_loc(), hint=hint)

    if not spec.var_positional and n > len(spec.positional):
        m = len(spec.positional)
        hint = ("the parameters after '*' are keyword-only: pass them by name" if spec.keywords - set(spec.positional)
                else "pass only the arguments of the signature")
        if spec.name.startswith("nisa."):
            hint += "; nisa calls with the output first are the new NKI dialect, which is not built yet"
        fail(f"takes {m} positional argument{'s' if m != 1 else ''} but {n} {'was' if n == 1 else 'were'} given", hint)
    for p in spec.positional[:n]:
        if p in kwargs:
            fail(f"got the argument '{p}' twice (by position and as a keyword)", "pass each argument once")
    missing = [p for p in spec.positional[n:spec.n_required] if p not in kwargs]
    missing += [p for p in spec.kw_required if p not in kwargs]
    if missing:
        fail(f"is missing the argument{'s' if len(missing) > 1 else ''} " + ", ".join(f"'{p}'" for p in missing),
             "pass " + ", ".join(f"{p}=..." for p in missing))


# ---------------------------------------------------------------- rendering

def _default(v) -> str:
    if isinstance(v, type):
        mod = "np." if v.__module__ == "numpy" else ""
        return mod + v.__name__
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    return repr(v)


def _render(params) -> str:
    parts, star = [], False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.default)}")
    return "(" + ", ".join(parts) + ")"
