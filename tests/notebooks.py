"""Executing the tutorial notebooks (tutorials/NN_*.ipynb) for tests/test_notebooks.py.

Contract: `execute(ipynb_path, workdir)` runs a notebook top to bottom with nbclient in a Jupyter
kernel whose interpreter is *this* process's Python (the project's venv; a kernelspec written into
a temporary directory, so no installed "python3" spec can substitute another interpreter), with
`workdir` as the kernel's working directory (pictures and traces the notebook writes land there).
It returns the executed notebook; a failing cell raises nbclient's CellExecutionError naming the
cell. `pairs()` lists (ipynb, py) for every numbered tutorial; `cell_sources(nb)` gives the
(cell_type, source) pairs the jupytext sync test compares.

`python tests/notebooks.py [NN ...]` executes the named (default: all) notebooks and prints each
one's wall time.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
KERNEL_NAME = "nki_lite_venv"
CELL_TIMEOUT_S = 300


def pairs() -> list[tuple[Path, Path]]:
    return [(nb, nb.with_suffix(".py")) for nb in sorted(TUTORIALS.glob("[0-9][0-9]_*.ipynb"))]


def cell_sources(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def _kernel_manager(spec_root: str):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    kdir = os.path.join(spec_root, "kernels", KERNEL_NAME)
    os.makedirs(kdir, exist_ok=True)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "nki_lite venv", "language": "python"}, f)
    ksm = KernelSpecManager(kernel_dirs=[os.path.join(spec_root, "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)


def execute(ipynb_path, workdir):
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(os.fspath(ipynb_path), as_version=4)
    with tempfile.TemporaryDirectory() as spec_root:
        client = NotebookClient(nb, km=_kernel_manager(spec_root), timeout=CELL_TIMEOUT_S,
                                resources={"metadata": {"path": os.fspath(workdir)}})
        client.execute()
    return nb


def main(argv: list[str]) -> int:
    for nb_path, _ in pairs():
        if argv and nb_path.name[:2] not in argv:
            continue
        with tempfile.TemporaryDirectory() as work:
            t0 = time.perf_counter()
            execute(nb_path, work)
            print(f"{nb_path.name:40s} {time.perf_counter() - t0:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
