"""Run public legacy-dialect NKI kernels unmodified in nki_lite and compare with their numpy references.

None of the kernels is part of this repository. Point the script at local extracts (the search
tool's fetch gives bare git dirs; `git --git-dir=... archive <commit> <path> | tar -x -C DIR`):

    python tutorials/check_corpus.py DIR... [--mode=interpret,jit] [--only=SUBSTR] [--timeout=S] [--mem-cap=GIB]

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
per kernel and mode (pass/FAIL with the first error line), then a summary per source, the cases
left out (EXCLUSIONS: what this machine cannot run, each with its reason) and every distinct warning
nki_lite emitted (the false-positive audit); exits non-zero if any check fails. Each case has a
wall-clock budget (--timeout, default 1800 s: past it, a FAIL saying so) and the process and its
pytest subprocesses an address-space cap (--mem-cap, default 10 GiB: a MemoryError is a FAIL).
Large NKIBench shapes take minutes in interpret mode.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import nki_lite.compat
from nki_lite.tools import checkdir
from nki_lite.tools.budget import Exclusion

nki_lite.compat.install()


def samples_getting_started(root: Path) -> None:
    """nki-samples keeps the getting-started tensor add in tensor_addition/: `nki_tensor_add` launches
    the [128, 512]-tile kernel over its SPMD grid."""
    import check_aws_examples as ex
    ex._tensor_add(root, "tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add", (256, 1024))


samples_getting_started.__name__ = "getting_started"


def _fresh_allocator(kernel) -> None:
    """v9 and v10 place their tiles with the file's module-level `allocator = SBufAllocator()`, whose
    address counter only grows: the tutorial runs one version per process (test_attention.py's
    test_attn_tutorial(mode, version)), so in one process running every version the second allocated
    kernel would start past the first one's tiles and run off the SBUF (NL-E506). Each check starts the
    counter at 0, as its own process would."""
    alloc = getattr(getattr(kernel, "fn", kernel), "__globals__", {}).get("allocator")
    if alloc is not None and hasattr(alloc, "offset"):
        alloc.offset = 0


def _attention_fwd(version: str):
    """nki-samples' attention_fwd_performance tutorial kernels against the tutorial's own numpy
    reference (test_attention.py's `numpy_attention`), with its shapes and tolerance (fp32, seqlen 128
    for v1/v2, else 4096; atol 1e-2)."""
    def check(root: Path) -> None:
        import check_aws_examples as ex
        m = ex.load(root, "attention_fwd_performance/test_attention.py")   # its import runs v1 once
        seqlen = 128 if version in ("v1", "v2") else 4096
        q, k, v = (ex.rng.uniform(-1, 1, (128, seqlen)).astype(np.float32) for _ in range(3))
        want = m.numpy_attention(q, k, v)
        kernel = getattr(m, f"attn_fwd_{version}")
        _fresh_allocator(kernel)
        got = kernel(q, k, v)
        if not np.allclose(got, want, atol=1e-2):
            raise AssertionError(f"mismatch: max abs error {np.max(np.abs(got - want)):.3g} (atol 1e-2)")
    check.__name__ = f"attn_fwd_{version}"
    return check


def _checks_for(label: str):
    import check_aws_examples as ex
    if label != "samples-tutorials":
        return ex.CHECKS
    return ([samples_getting_started] + [c for c in ex.CHECKS if c.__name__ != "getting_started"]
            + [_attention_fwd(v) for v in ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v8a", "v9", "v10",
                                           "v11")])


def tutorial_checks(label: str, root: Path) -> list:
    """The tutorial kernels as [(name, check)], with tutorials/check_aws_examples.py's inputs and numpy
    references (plus nki-samples' own layout: its getting-started file and the attention_fwd_performance
    kernels); checkdir runs them under the sweep's budgets."""
    return [(check.__name__, lambda check=check: check(root)) for check in _checks_for(label)]


# Cases this machine (24 GiB shared by several jobs, 2 cores) cannot run, with the reason the summary prints.
# Everything else runs; a case past --timeout is a FAIL saying so.
EXCLUSIONS = [
    Exclusion("samples-test", r"test_flash_attn_bwd_numerical\[.*-8192-",
              "its numpy reference (cpu_attention_backward, fp32, 8 heads x 8192 x 8192 scores: 2.1 GB a tensor, "
              "about six live at once) needs about 13 GB, more than the sweep's memory cap; the kernel itself "
              "runs (the 4096 cases are the same code)"),
]


def _option(argv: list[str], name: str, default: str) -> str:
    return ([a.split("=", 1)[1] for a in argv[1:] if a.startswith(f"--{name}=")] or [default])[-1]


def cap_memory(gib: float) -> None:
    """RLIMIT_AS for this process and the pytest subprocesses it starts: a case that needs more gets a
    MemoryError (a FAIL naming it) instead of waking the OOM killer on a shared machine."""
    if gib > 0:
        import resource
        limit = int(gib * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        print(__doc__)
        return 2
    modes = _option(argv, "mode", "interpret,jit").split(",")
    only = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--only=")]
    timeout, mem_cap = float(_option(argv, "timeout", "1800")), float(_option(argv, "mem-cap", "10"))
    cap_memory(mem_cap)
    print(f"budgets: {timeout:g} s wall clock per case, {mem_cap:g} GiB address space (--timeout=, --mem-cap=; 0: none)",
          flush=True)
    failures, _ = checkdir.run(dirs, modes, only, show=lambda line: print(line, flush=True),
                               tutorials=tutorial_checks, generic=False, timeout=timeout, exclusions=EXCLUSIONS)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main(sys.argv))
