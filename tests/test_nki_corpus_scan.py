"""tutorials/check_nki_corpus.py's static scan: which files are new-dialect, which reference names
they use (through any import spelling), and which kernels they define."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import nki_lite.compat

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("check_nki_corpus", ROOT / "tutorials" / "check_nki_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    finally:
        nki_lite.compat.uninstall()      # the script installs `import nki`; keep the test process clean
    return mod


SCRIPT = _script()

KERNEL_FILE = '''
import nki
import nki.isa as nisa
from nki.language import ndarray, sbuf
from nki.isa.constants import dge_mode
import nki.language as nl

@nki.jit
def k(a):
    t = ndarray(a.shape, a.dtype, buffer=sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[1, 4]]), dge_mode=dge_mode.hwdge)
    nisa.tensor_scalar_cumulative(t, t)
    nisa.nc_matmul(t, t, t)
    return nl.load(t)

def helper(x):
    return x
'''


def test_new_dialect_files_are_recognised():
    assert SCRIPT.is_new_dialect(ast.parse(KERNEL_FILE))
    assert not SCRIPT.is_new_dialect(ast.parse("import neuronxcc.nki as nki\nimport nki.language as nl\n"))
    assert not SCRIPT.is_new_dialect(ast.parse("import numpy as np\n"))


def test_used_names_follow_every_import_spelling():
    used = SCRIPT.used_names(ast.parse(KERNEL_FILE))
    assert {"nki.jit", "nki.isa.dma_copy", "nki.language.ndarray", "nki.language.sbuf", "nki.isa.dge_mode",
            "nki.isa.tensor_scalar_cumulative", "nki.isa.nc_matmul", "nki.language.load",
            "nki.language.NkiTensor.ap"} <= used
    blocking = sorted(n for n in used if SCRIPT.STATUS.get(n) == "not supported")
    assert blocking == ["nki.isa.tensor_scalar_cumulative"]         # NkiTensor.ap is built (lang/views.py)


def test_jit_kernels_are_the_decorated_functions():
    assert SCRIPT.jit_kernels(ast.parse(KERNEL_FILE)) == ["k"]
