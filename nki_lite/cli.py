"""The `nki-lite` command (also `python -m nki_lite`): the common jobs from a shell.

    nki-lite demo
    nki-lite run FILE::KERNEL --shape 256x1024 --shape 256x1024 [--dtype bf16] [--grid 2,2] [--mode jit]
    nki-lite estimate FILE::KERNEL --shape ... --target trn2 [--trace out.json] [--png out.png] [--json]
    nki-lite check DIR... [--mode jit,interpret] [--only SUBSTR]
    nki-lite bench [--full] [--reps N] [--only SUBSTR]
    nki-lite cache {dir,info,clear}
    nki-lite sysinfo [--json]

Contract: this module parses arguments and dispatches to nki_lite/tools/ (one engine per command).
Exit codes: 0 success; 1 a check failed (run: JIT and interpreter differ; check: a kernel failed, or
nothing was checked);
2 a usage mistake (argparse) or an nki_lite error, printed to stderr with its code and location.
Tables and JSON go to stdout, progress bars to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from . import errors

Handler = Callable[[argparse.Namespace], int]


def _demo(a: argparse.Namespace) -> int:
    from . import demo
    return demo.main()


def _kernel_inputs(a: argparse.Namespace):
    from .tools import kernelfile, runner
    kern = kernelfile.load_kernel(a.ref)
    shapes = [runner.parse_shape(s) for s in a.shape]
    return kern, shapes, runner.parse_dtypes(a.dtype, len(shapes)), runner.parse_grid(a.grid), \
        runner.parse_kwargs(a.kwarg)


def _run(a: argparse.Namespace) -> int:
    from .tools import runner
    kern, shapes, dtypes, grid, kw = _kernel_inputs(a)
    text, ok = runner.run(kern, shapes, dtypes, grid, a.mode, a.seed, kw, check=not a.no_check)
    print(text)
    return 0 if ok else 1


def _estimate(a: argparse.Namespace) -> int:
    from .tools import runner
    kern, shapes, dtypes, grid, kw = _kernel_inputs(a)
    est = runner.estimate(kern, shapes, dtypes, grid, a.target, kw, a.trace, a.png)
    print(json.dumps(est.summary(), indent=1) if a.json else est.table())
    for what, path in (("trace", a.trace), ("png", a.png)):
        if path:
            print(f"wrote {what}: {path}", file=sys.stderr)
    return 0


def _check(a: argparse.Namespace) -> int:
    from .tools import checkdir
    modes = [m for m in a.mode.split(",") if m]
    bad = [m for m in modes if m not in ("jit", "interpret")]
    if bad or not modes:
        raise errors.make("argument", f"--mode {a.mode!r}: use jit, interpret or both (jit,interpret)")
    for d in a.dirs:
        if not Path(d).is_dir():
            raise errors.make("argument", f"{d!r} is not a directory")
    failures, passes = checkdir.run([Path(d) for d in a.dirs], modes, a.only or [], bar=True)
    if not failures and not passes:
        print("nki-lite check: no kernel file with a numpy check ran (docs/cli.md says what counts as one)",
              file=sys.stderr)
        return 1
    return 1 if failures else 0


def _bench(a: argparse.Namespace) -> int:
    from .tools import bench
    print(bench.run("full" if a.full else "quick", a.reps, a.only))
    return 0


def _cache(a: argparse.Namespace) -> int:
    from .tools import sysinfo
    from .runtime import diskcache
    from .tuning import store
    if a.action == "dir":
        print(diskcache.cache_dir())
    elif a.action == "info":
        c = sysinfo.info()["cache"]
        print(f"directory: {c['dir']}\nenabled: {c['enabled']} (NKI_LITE_DISK_CACHE)\n"
              f"JIT entries: {c['entries']} ({c['bytes']} bytes)\nautotune choices: {c['autotune_records']}")
    else:
        n, m = diskcache.clear(), store.clear()
        print(f"removed {n} JIT entries and {m} autotune choices from {diskcache.cache_dir()}")
    return 0


def _sysinfo(a: argparse.Namespace) -> int:
    from .tools import sysinfo
    d = sysinfo.info()
    print(json.dumps(d, indent=1, default=str) if a.json else sysinfo.render(d))
    return 0


def _kernel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="FILE::KERNEL", help="a Python file and the kernel in it, e.g. add.py::add_kernel "
                   "(legacy neuronxcc.nki imports resolve to nki_lite)")
    p.add_argument("--shape", action="append", default=[], metavar="DIMS",
                   help="shape of one tensor argument, in order (256x1024 or 256,1024); repeat per argument")
    p.add_argument("--dtype", action="append", metavar="DTYPE",
                   help="dtype of every argument, or one per --shape (float32, bf16, float8_e4m3, int32, ...); "
                   "default float32")
    p.add_argument("--grid", metavar="G0,G1", help="SPMD grid, e.g. 2,2")
    p.add_argument("--kwarg", action="append", metavar="NAME=VALUE",
                   help="a keyword argument (Python literal) passed to the kernel; repeatable")


def parser() -> argparse.ArgumentParser:
    from .version import __version__
    top = argparse.ArgumentParser(prog="nki-lite", description="Write, run, test and profile AWS NKI kernels on "
                                  "an ordinary CPU.")
    top.add_argument("--version", action="version", version=f"nki_lite {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("demo", help="run the README's demo: real kernels on the JIT, checked against numpy",
                       description="Trace and run stdlib kernels on the JIT, compare with the interpreter "
                       "(bitwise) and numpy, and print an engine-model profile.")
    p.set_defaults(fn=_demo)

    p = sub.add_parser("run", help="run a kernel on random inputs; JIT vs interpreter check",
                       description="Call FILE::KERNEL on seeded random inputs of the given shapes, summarise each "
                       "result and check that the JIT and the interpreter agree bit for bit (exit 1 if not).")
    _kernel_args(p)
    p.add_argument("--mode", choices=("jit", "interpret"), default="jit", help="backend whose result is summarised")
    p.add_argument("--seed", type=int, default=0, help="random input seed (default 0)")
    p.add_argument("--no-check", action="store_true", help="skip the run on the other backend")
    p.set_defaults(fn=_run)

    p = sub.add_parser("estimate", help="the engine model's estimate of a kernel on trn1/trn2/trn3",
                       description="Trace FILE::KERNEL on placeholders of the given shapes (nothing runs) and "
                       "print the engine model's estimate.")
    _kernel_args(p)
    p.add_argument("--target", choices=("trn1", "trn2", "trn3"), help="default: the kernel's, else "
                   "NKI_LITE_TARGET, else trn2")
    p.add_argument("--trace", metavar="OUT.json", help="write the Chrome-trace / Perfetto timeline")
    p.add_argument("--png", metavar="OUT.png", help="write a PNG timeline (needs matplotlib: nki_lite[plot])")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (neuron-profile field names)")
    p.set_defaults(fn=_estimate)

    p = sub.add_parser("check", help="run every kernel file with a numpy check in directories (CI)",
                       description="Run each kernel file's numpy checks (check*/test* functions without "
                       "arguments; NKIBench, aws-neuron-sdk and nki-samples trees by their own layout) and "
                       "print a pass/fail table. Exit 1 if any check fails.")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--mode", default="jit,interpret", help="backends, comma-separated (default jit,interpret)")
    p.add_argument("--only", action="append", metavar="SUBSTR", help="only checks whose name contains SUBSTR")
    p.set_defaults(fn=_check)

    p = sub.add_parser("bench", help="the stdlib benchmark table against numpy",
                       description="Time the stdlib kernels against numpy on this machine (a table; nothing is "
                       "asserted). benchmarks/stdlib.py is the longer study.")
    p.add_argument("--full", action="store_true", help="large shapes (minutes) instead of the quick ones")
    p.add_argument("--reps", type=int, default=3, help="interleaved timed calls per case (default 3)")
    p.add_argument("--only", metavar="SUBSTR", help="only cases whose name contains SUBSTR")
    p.set_defaults(fn=_bench)

    p = sub.add_parser("cache", help="the JIT disk cache: dir, info, clear",
                       description="dir: print the cache directory; info: entries and size; clear: delete every "
                       "JIT entry and remembered autotune choice.")
    p.add_argument("action", choices=("dir", "info", "clear"))
    p.set_defaults(fn=_cache)

    p = sub.add_parser("sysinfo", help="versions, CPU features, BLAS, cache dir, active knobs",
                       description="What a bug report needs: versions, CPU and vector features, numpy's BLAS, "
                       "the cache directory and every NKI_LITE_* knob set.")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_sysinfo)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    handler: Handler = args.fn
    try:
        return handler(args)
    except errors.NkiLiteError as e:
        print(f"nki-lite {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:            # `nki-lite ... | head`: the reader left; not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
