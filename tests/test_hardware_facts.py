"""Hardware facts live in one table, nki_lite/core/targets.py: no other module of nki_lite writes a
partition count, a PSUM bank or partition size, a matmul free size, an SBUF size, ... as a literal.

The check reads the code (AST), so docstrings, comments and message text are not scanned: an
integer literal (or a constant expression such as `2 * 1024`, `1 << 11`, `192 * 1024 - 16 * 1024`)
whose value is one of the facts is a finding unless ALLOWED says why that number is something else
there. Kernels written in the DSL (stdlib/, demo.py) choose their own tile sizes, as a user's kernel
does (verification checks them against the target), and are not scanned. Files still being
converted are in PENDING (strict xfail: the entry must go when the file is clean)."""
from __future__ import annotations

import ast
import os

import pytest

from tests.pending import marked

from tests.layering import ROOT, modules

# partitions / PE rows / K and M (128), moving free size / bn_stats / PSUM fp32 bank (512), PSUM bank
# bytes (2 KiB), fp32 moving free size on v4 and vector PSUM limit (4096), PSUM partition bytes
# (16 KiB), vector SBUF limit (64 K), SBUF partition bytes (176, 192, 224, 256 KiB)
FACTS = {128, 512, 2048, 4096, 16384, 65536, 176 * 1024, 192 * 1024, 224 * 1024, 256 * 1024}

# stdlib, demo and the benchmark driver are kernels and problems written in the DSL: their tile and
# problem sizes are their own choice, not hardware facts
NOT_SCANNED = ("nki_lite/core/targets.py", "nki_lite/stdlib/", "nki_lite/demo.py", "nki_lite/tools/bench.py")

# (path, value) -> what the number is there
ALLOWED: dict[tuple[str, int], str] = {
    ("nki_lite/lower/cost/periodic.py", 128): "FULL_SIM_TRIP: loops simulated fully, a model budget",
    ("nki_lite/lower/cost/validation.py", 4096): "the published tutorial problem's matrix sizes",
    ("nki_lite/lower/cost/validation_docs.py", 4096): "shapes of the published DMA examples (validation data)",
    ("nki_lite/lower/cost/validation_docs.py", 128): "shapes of the published DMA examples (validation data)",
    ("nki_lite/lower/llvm/convert.py", 128): "the float32 exponent bias + 1 (128 - B), not a partition count",
    ("nki_lite/numerics/bitcodec.py", 128): "the float32 exponent bias + 1 (128 - B)",
    ("nki_lite/lower/parallel.py", 1 << 18): "REGION_MIN_ELEMENTS: work per threaded region, a host cost",
    ("nki_lite/lower/analysis/coverage.py", 1 << 18): "COVER_POINTS: an enumeration budget",
    ("nki_lite/lower/llvm/plan_check.py", 4096): "bound on the status words of a disk-cache entry (validation)",
    ("nki_lite/lang/purity.py", 1 << 16): "_MAX_ITEMS: containers fingerprinted per trace",
    ("nki_lite/lang/source.py", 4096): "an lru_cache size",
}

PENDING: dict[str, str] = {}

FILES = sorted(os.path.relpath(p, ROOT) for p in modules().values())
SCANNED = [f for f in FILES if not f.startswith(NOT_SCANNED)]


def _value(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.LShift, ast.Sub, ast.Add)):
        a, b = _value(node.left), _value(node.right)
        if a is None or b is None:
            return None
        return {ast.Mult: a * b, ast.LShift: a << b if b < 64 else None, ast.Sub: a - b,
                ast.Add: a + b}[type(node.op)]
    return None


def literal_facts(source: str) -> list[tuple[int, int]]:
    """(line, value) of every fact-valued literal; a constant expression counts once, as a whole."""
    out, inside = [], set()
    for node in ast.walk(ast.parse(source)):
        if id(node) in inside or not isinstance(node, (ast.BinOp, ast.Constant)):
            continue
        v = _value(node)
        if v is not None:
            inside |= {id(n) for n in ast.walk(node)}
            if v in FACTS:
                out.append((node.lineno, v))
    return sorted(out)


def findings(path: str) -> list[str]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        found = literal_facts(f.read())
    return [f"{path}:{line}: {v} (a hardware fact: read it from core/targets.py)"
            for line, v in found if (path, v) not in ALLOWED]



@pytest.mark.parametrize("path", marked(SCANNED, PENDING))
def test_no_hardware_fact_outside_the_target_table(path):
    found = findings(path)
    assert not found, "\n".join(found)


def test_allowances_are_used_and_name_real_files():
    assert set(PENDING) <= set(SCANNED)
    for path, v in ALLOWED:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert v in [val for _, val in literal_facts(f.read())], (path, v)


def test_the_scanner_sees_literals_and_expressions_but_not_text():
    src = ('"""pmax is 128"""\n'
           'P = 128  # 512 in a comment\n'
           'BANK = 2 * 1024\n'
           'SBUF = 192 * 1024 - 16 * 1024\n'
           'msg = f"at most {n} of 512"\n'
           'K = 127 + 1\n'
           'ok = 3 * 128 + 7\n')
    assert literal_facts(src) == [(2, 128), (3, 2048), (4, 176 * 1024), (6, 128)]
