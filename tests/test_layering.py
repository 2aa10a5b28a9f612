"""The layering contract (pyproject.toml, [[tool.nki_lite.layers]]) holds: no module imports a
higher layer or an independent sibling, every module is covered by the contract, and the import
graph (function-local imports included) has no cycles.

Checked per listed component so each can be brought into line on its own; a component still
being refactored is listed in PENDING (strict xfail: it must fail while listed, so the list
cannot go stale)."""
from __future__ import annotations

import pytest

from tests.pending import marked

from tests.layering import component_of, cycles, import_graph, layers

# component -> why it does not hold yet (remove the entry when it does)
PENDING: dict[str, str] = {
}

LAYERS = layers()
GRAPH = import_graph()
COMPONENTS = [p for layer in LAYERS for p in layer["modules"]]



def violations(component: str) -> list[str]:
    out = []
    for mod in sorted(GRAPH):
        where = component_of(mod, LAYERS)
        if where is None or where[1] != component:
            continue
        level = where[0]
        for dep in sorted(GRAPH[mod]):
            dep_level, dep_comp = component_of(dep, LAYERS)
            if dep_level > level:
                out.append(f"{mod} imports {dep} (layer {LAYERS[dep_level]['name']!r} is above "
                           f"{LAYERS[level]['name']!r})")
            elif (dep_level == level and dep_comp != component
                  and LAYERS[level].get("independent", False)):
                out.append(f"{mod} imports its independent sibling {dep}")
    for comp in cycles(GRAPH):
        if any(component_of(m, LAYERS)[1] == component for m in comp):
            out.append("import cycle: " + " -> ".join(comp))
    return out


@pytest.mark.parametrize("component", marked(COMPONENTS, PENDING))
def test_component_respects_the_layering(component):
    found = violations(component)
    assert not found, "\n".join(found)


def test_every_module_is_in_a_layer():
    assert [m for m in GRAPH if component_of(m, LAYERS) is None] == []


def test_pending_names_real_components():
    assert set(PENDING) <= set(COMPONENTS)


# ---------------------------------------------------------------- the checker itself

def test_cycle_finder_finds_a_cycle_and_only_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_longest_prefix_decides_the_component():
    contract = [{"name": "low", "modules": ["p.x"]}, {"name": "high", "modules": ["p", "p.x.y"]}]
    assert component_of("p.x.z", contract) == (0, "p.x")
    assert component_of("p.x.y.w", contract) == (1, "p.x.y")
    assert component_of("q", contract) is None


def test_function_local_imports_count(tmp_path, monkeypatch):
    import tests.layering as L
    pkg = tmp_path / "nki_lite"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from .a import f\nfrom .. import sub\n")
    monkeypatch.setattr(L, "ROOT", str(tmp_path))
    graph = L.import_graph()
    assert graph["nki_lite.sub.a"] == {"nki_lite.sub.b"}
    assert graph["nki_lite.sub.b"] == {"nki_lite.sub"}
