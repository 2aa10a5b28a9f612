"""Run public legacy-dialect NKI kernels unmodified in nki_lite and compare with their numpy references.

None of the kernels is part of this repository. Point the script at local extracts (the search
tool's fetch gives bare git dirs; `git --git-dir=... archive <commit> <path> | tar -x -C DIR`):

    python tutorials/check_corpus.py DIR... [--mode=interpret,jit] [--only=SUBSTR]

Each DIR is recognised by its layout:
- NKIBench (zhang677/AccelOpt `NKIBench/`, with `kernels/*.py` and `reference/*_numpy_*.py`): the
  reference's `get_inputs()` builds the inputs, `transform_to_nki_inputs` reshapes them for the
  kernel, `forward(...)` is the numpy result and `transform_nki_outputs` reshapes the kernel's output.
- aws-neuron-sdk (a tree before the new dialect, e.g. `1db4d74e^`, extract `general/nki`): the
  unit tests of `general/nki/test` (their own inputs and numpy references) run under pytest with
  tutorials/corpus_pytest_plugin.py; the tutorial kernels of `general/nki/examples` run with
  check_aws_examples.py's inputs and references.
- nki-samples (e.g. commit 7af4e4d): `test/unit` with `--simulation-only -m simulation` (the tests
  NKI itself runs without a device), and the tutorials of `src/nki_samples/tutorials`.

The engine is nki_lite/tools/checkdir.py (also `nki-lite check DIR`, which runs any directory of
kernel files with numpy checks); this script adds the tutorial kernels' inputs and references.
`import neuronxcc.nki ...` resolves to nki_lite through nki_lite.compat.install(). Prints one line
per kernel and mode (pass/FAIL with the first error line), then a summary per source; exits
non-zero if any check fails. Large NKIBench shapes take minutes in interpret mode.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nki_lite.compat
from nki_lite.tools import checkdir

nki_lite.compat.install()


def tutorial_checks(label: str, root: Path):
    """The tutorial kernels, with tutorials/check_aws_examples.py's inputs and numpy references."""
    import check_aws_examples as ex

    def run(mode: str, only: list[str]):
        for check in ex.CHECKS:
            if only and not any(o in check.__name__ for o in only):
                continue
            os.environ["NKI_LITE_MODE"] = mode
            t0 = time.perf_counter()
            try:
                check(root)
                yield check.__name__, "pass", "", time.perf_counter() - t0
            except Exception as e:  # report every failure, keep going
                yield check.__name__, "FAIL", f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}", \
                    time.perf_counter() - t0
    return label, run


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        print(__doc__)
        return 2
    modes = ([a.split("=", 1)[1] for a in argv[1:] if a.startswith("--mode=")] or ["interpret,jit"])[0].split(",")
    only = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--only=")]
    failures, _ = checkdir.run(dirs, modes, only, show=lambda line: print(line, flush=True),
                            tutorials=tutorial_checks, generic=False)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main(sys.argv))
