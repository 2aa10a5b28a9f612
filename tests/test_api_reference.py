"""docs/api_reference.md is generated from the docstrings (docs/gen_api_reference.py) and must be
current: regenerating it gives the committed file, and it covers every public name."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_api_reference", ROOT / "docs" / "gen_api_reference.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def test_committed_reference_is_current():
    committed = (ROOT / "docs" / "api_reference.md").read_text()
    assert gen.render() == committed, \
        "docs/api_reference.md is stale: python docs/gen_api_reference.py > docs/api_reference.md"


def test_every_public_name_has_an_entry():
    page = gen.render()
    for _, prefix, mod in gen.NAMESPACES:
        names = gen.public_names(mod)
        assert names
        for n in names:
            assert f"### `{prefix}.{n}" in page, f"{prefix}.{n} missing from the API reference"


def test_public_names_skip_modules_and_future_imports():
    import nki_lite.testing as t
    names = gen.public_names(t)
    assert "assert_close" in names and "TOLERANCES" in names
    assert "np" not in names and "annotations" not in names


def test_undocumented_names_are_reported():
    def helper(x):
        return x
    lines, undocumented = gen.entry("fake", "helper", helper)
    assert undocumented and "(no docstring)" in lines
    helper.__doc__ = "Does a thing."
    lines, undocumented = gen.entry("fake", "helper", helper)
    assert not undocumented and "Does a thing." in lines
