"""docs/api_keywords.md, rendered from the API registry of lang/api.py.

Contract: importing this module imports every lang module that declares a public nl / nisa API, so
`render_docs()` sees the whole registry (`python -m nki_lite.lang.api_docs > docs/api_keywords.md`;
tests/test_api_keywords.py checks the page is current).
"""
from __future__ import annotations

from . import (creation, index, isa_common, isa_compute, isa_data, isa_reduce, memory, ops_math, ops_memory,
               ranges)
from .api import IGNORED, REGISTRY

DECLARING_MODULES = (creation, index, isa_common, isa_compute, isa_data, isa_reduce, memory, ops_math, ops_memory,
                     ranges)


def render_docs() -> str:
    lines = ["# Keywords of the nl / nisa APIs", "",
             "Generated from `nki_lite/lang/api_docs.py` "
             "(`python -m nki_lite.lang.api_docs > docs/api_keywords.md`).", "",
             "Each public API accepts exactly the keywords of its signature below (the one NKI documents,",
             "plus the few nki_lite honours as well, e.g. `engine=`), and the keywords listed as *ignored*:",
             "NKI or real public kernels pass them and they do not change results in nki_lite.",
             "Any other keyword is [NL-E906](errors.md#nl-e906) at the kernel's line with a did-you-mean hint;",
             "a wrong number of positional arguments, or a missing or doubled argument, is",
             "[NL-E907](errors.md#nl-e907). Keywords NKI has that nki_lite has not built are",
             "[NL-E904](errors.md#nl-e904).", "",
             "Every nisa instruction ignores `name=` (" + IGNORED["name"] + ").", "",
             "To add an API: give the function NKI's signature without `**kwargs`, decorate it with",
             "`@api(\"nl.name\")` or `@isa(\"nisa.name\")` from `nki_lite/lang/api.py`, list keywords that are",
             "accepted but change nothing in `ignored=` (each with its reason in `IGNORED`) and known but unbuilt",
             "ones in `unsupported=`, then regenerate this page. tests/test_api_keywords.py fails for a public",
             "nl/nisa callable that is not declared.", "",
             "## Ignored keywords", "", "| keyword | ignored because |", "|---|---|"]
    lines += [f"| `{k}=` | {why} |" for k, why in IGNORED.items()]
    lines += ["", "## Signatures", "", "| API | signature | ignored | not built |", "|---|---|---|---|"]
    for name in sorted(REGISTRY, key=lambda n: (not n.startswith("nl."), n)):
        s = REGISTRY[name]
        ign = ", ".join(f"`{k}=`" for k in sorted(s.ignored) if not (k == "name" and name.startswith("nisa.")))
        uns = ", ".join(f"`{k}=`" for k in sorted(s.unsupported))
        lines.append(f"| `{name}` | `{s.signature}` | {ign} | {uns} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_docs(), end="")
