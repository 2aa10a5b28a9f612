"""The tutorial notebooks (tutorials/NN_*.ipynb): each pair stays in sync with its jupytext .py, and
each notebook executes top to bottom in a Jupyter kernel running this venv's Python (one test per
notebook, so `pytest -n 2` spreads them), ending in its own assertions and showing its pictures.

Needs the `notebooks` extra (nbclient, nbformat, jupytext, ipykernel, matplotlib), which `make test`
installs. Regenerate the .ipynb files from the .py sources with `make notebooks`."""
import re

import jupytext
import nbformat
import pytest

from tests.notebooks import TUTORIALS, cell_sources, execute, pairs

PAIRS = pairs()
IDS = [nb.stem for nb, _ in PAIRS]
BUILT = [f"{n:02d}" for n in range(1, 10)]
PICTURE = re.compile(r"^\s*(show\(|display\(Image\()", re.M)   # the notebooks' two ways to show a PNG


def test_every_built_tutorial_has_a_pair():
    """Notebooks 01-09 exist as .ipynb + .py, and no stray half of a pair is lying around."""
    assert [nb.name[:2] for nb, _ in PAIRS] == BUILT
    assert all(py.exists() for _, py in PAIRS)
    py_only = {p.stem for p in TUTORIALS.glob("[0-9][0-9]_*.py")} - {nb.stem for nb, _ in PAIRS}
    assert not py_only, f"jupytext sources without a notebook: {sorted(py_only)} (run make notebooks)"


@pytest.mark.parametrize("nb_path,py_path", PAIRS, ids=IDS)
def test_notebook_matches_its_py(nb_path, py_path):
    """The .ipynb holds exactly the cells of the percent-format .py (reviews read the .py)."""
    from_py = jupytext.read(py_path)
    nb = nbformat.read(nb_path, as_version=4)
    assert cell_sources(nb) == cell_sources(from_py), f"{nb_path.name} is out of sync: run make notebooks"
    # committed notebooks carry no outputs (CI produces them; diffs stay readable)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{nb_path.name} has outputs"


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.parametrize("nb_path", [nb for nb, _ in PAIRS], ids=IDS)
def test_notebook_executes(nb_path, tmp_path):
    nb = execute(nb_path, tmp_path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # it reached its last cell and that cell's assertions passed
    number = nb_path.name[:2]
    assert f"notebook {number}: all assertions passed" in _text(nb.cells[-1])
    # every cell that shows a picture rendered at least one PNG, and the notebook shows at least one
    drawing = [c for c in nb.cells if c.cell_type == "code" and PICTURE.search(c.source) and "def show(" not in c.source]
    assert drawing, f"{nb_path.name} draws no picture"
    for c in drawing:
        pngs = [o for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        assert pngs, f"no PNG rendered by the cell starting {c.source[:60]!r}"
        assert all(o["data"]["image/png"].startswith("iVBORw0KGgo") for o in pngs)   # base64 PNG signature
