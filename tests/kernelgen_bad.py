"""A seeded generator of ill-formed kernels, each with exactly one mistake (BAD_INPUTS.md's rows).

`case(seed)` returns a `Bad` case: the kernel's Python source (registered in `linecache`, so error
messages show the line), its arguments, the knobs the mistake needs to be detectable (run-time checks
such as NKI_LITE_DEBUG_UNINIT=1 or NKI_LITE_SHUFFLE) and the error codes that diagnose it. Around the
mistake sits a random well-formed frame: tile shapes, dtypes, a chain of 0-3 element-wise ops, loops.

`check(case)` runs the kernel in both modes and returns the problems found: a mode in which the kernel
ran without error, raised something other than an `NkiLiteError`, or raised an unexpected code.
The property tested by tests/test_fuzz_illformed.py: no problems, no crash, no hang.

Run as `python -X faulthandler -m tests.kernelgen_bad START COUNT [TIMEOUT_S]`: checks COUNT cases
from seed START in this process, each under `faulthandler.dump_traceback_later(TIMEOUT_S, exit=True)`
(a hang prints every thread's stack and exits with status 1; a crash prints its stack and kills the
process), prints one JSON line {"cases": n, "problems": [...], "kinds": {kind: n}} and exits 0.
"""
from __future__ import annotations

import faulthandler
import itertools
import json
import linecache
import os
import random
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.core import dtypes as D

_COUNTER = itertools.count()
FLOATS = ["float32", "bfloat16", "float16"]
CHAIN = ["nl.exp({x})", "nl.add({x}, {x})", "nl.multiply({x}, 0.5)", "nl.maximum({x}, 0.0)", "nl.negative({x})",
         "nl.abs({x})", "nl.copy({x})", "nl.tanh({x})"]


@dataclass
class Bad:
    kind: str
    src: str
    args: tuple
    codes: frozenset          # codes that diagnose the mistake
    env: dict = field(default_factory=dict)
    grid: tuple = ()
    call_extra: tuple | None = None   # call with these positional arguments instead (argument mistakes)
    fname: str = ""

    def __repr__(self) -> str:
        shapes = ", ".join(f"{getattr(a, 'dtype', type(a).__name__)}{getattr(a, 'shape', '')}" for a in self.args)
        return f"<ill-formed kernel ({self.kind}), grid={list(self.grid)}, env={self.env}, args=({shapes}):\n{self.src}>"


def _chain(r: random.Random, x: str, lines: list, pad: str = "        ") -> str:
    for k in range(r.randint(0, 3)):
        y = f"c{k}"
        lines.append(f"{pad}{y} = {r.choice(CHAIN).format(x=x)}")
        x = y
    return x


def _arr(r: random.Random, shape, dtype="float32") -> np.ndarray:
    """Values matter only where a mistake is in the data (NaN creation: see _nan)."""
    return np.full(shape, r.choice([0.5, 1.0, 2.0]), dtype=D.storage(dtype))


def _frame(r: random.Random, mistake: str = "", loop: str = "affine_range", rows: int | None = None,
           cols: int | None = None, mask: bool = True, store_mask: bool | None = None) -> tuple[str, int, int]:
    """A tiled copy-through-a-chain kernel `k(a)`; `mistake` (with {x} = the last tile) is spliced in
    after the chain. Returns (source, rows, cols)."""
    R = rows if rows is not None else r.choice([128, 256, r.randint(1, 300)])
    F = cols if cols is not None else r.choice([8, 64, 512, r.randint(1, 200)])
    n = -(-R // 128)
    lines = ["@nki.jit", "def k(a):",
             f"    out = nl.ndarray(({R}, {F}), dtype=a.dtype, buffer=nl.shared_hbm)",
             "    ip = nl.arange(128)[:, None]", f"    jf = nl.arange({F})[None, :]",
             f"    for i in nl.{loop}({n}):"]
    m = f", mask=(i * 128 + ip < {R})" if mask else ""
    lines.append(f"        x = nl.load(a[i * 128 + ip, jf]{m})")
    x = _chain(r, "x", lines)
    if mistake:
        lines += ["        " + s.replace("COLS", str(F)).format(x=x) for s in mistake.splitlines()]
        x = "y" if "y =" in mistake else x
    sm = mask if store_mask is None else store_mask
    ms = f", mask=(i * 128 + ip < {R})" if sm else ""
    lines.append(f"        nl.store(out[i * 128 + ip, jf], value={x}{ms})")
    lines.append("    return out")
    return "\n".join(lines) + "\n", R, F


def _partition_limit(r):
    P = r.randint(129, 1024)
    src, R, F = _frame(r, f"t = nl.ndarray(({P}, {r.randint(1, 64)}), dtype=nl.float32, buffer=nl.sbuf)\n"
                          "y = nl.exp(t)\ny = {x}")
    return Bad("partition_limit", src, (_arr(r, (R, F)),), frozenset({"NL-E101"}))


def _transpose_free(r):
    F = r.randint(129, 512)
    src, R, _ = _frame(r, "y = nl.transpose({x})\ny = {x}", rows=128, cols=F, mask=False)
    # NL-E101 today: the message names the transposed tile's partition dim (issue #10 section 4)
    return Bad("free_size_limit", src, (_arr(r, (R, F)),), frozenset({"NL-E102", "NL-E101"}))


def _sbuf_capacity(r):
    F = r.randint(60_000, 120_000)     # fp32 columns: > 224 KiB per partition (trn2; trn1: 176 KiB)
    src, R, G = _frame(r, f"big = nl.zeros((128, {F}), dtype=nl.float32, buffer=nl.sbuf)\n"
                          "y = nl.add({x}, big[:, 0:COLS])")
    return Bad("sbuf_capacity", src, (_arr(r, (R, G)),), frozenset({"NL-E401", "NL-E102"}))


def _psum_capacity(r):
    F = r.randint(4097, 16384)         # PSUM holds 8 banks x 2 KiB = 4096 fp32 per partition
    src, R, G = _frame(r, f"ps = nl.zeros((128, {F}), dtype=nl.float32, buffer=nl.psum)\n"
                          "y = nl.add({x}, ps[:, 0:COLS])")
    return Bad("psum_capacity", src, (_arr(r, (R, G)),), frozenset({"NL-E402", "NL-E404", "NL-E102"}))


def _matmul(kind, codes, k1, k2, dtype="float32", n=None):
    def make(r):
        M, N = r.randint(1, 128), n or r.randint(1, 512)
        src = "\n".join([
            "@nki.jit", "def k(a, b):",
            f"    out = nl.ndarray(({M}, {N}), dtype=nl.float32, buffer=nl.shared_hbm)",
            "    x = nl.load(a)", "    y = nl.load(b)",
            f"    ps = nl.zeros(({M}, {N}), nl.float32, buffer=nl.psum)",
            "    ps += nisa.nc_matmul(x, y)",
            "    nl.store(out, value=nl.copy(ps))", "    return out"]) + "\n"
        K1 = k1(r)
        K2 = k2(r, K1)
        return Bad(kind, src, (_arr(r, (K1, M), dtype), _arr(r, (K2, N), dtype)), frozenset(codes))
    return make


def _wrong_space_load(r):
    src, R, F = _frame(r, "y = nl.load({x})")
    return Bad("memory_space", src, (_arr(r, (R, F)),), frozenset({"NL-E301"}))


def _wrong_space_compute(r):
    R, F = r.choice([128, 64]), r.randint(1, 256)
    src = "\n".join(["@nki.jit", "def k(a):", f"    out = nl.ndarray(({R}, {F}), dtype=a.dtype, buffer=nl.shared_hbm)",
                     f"    y = nl.{r.choice(['exp', 'tanh', 'abs'])}(a)", "    nl.store(out, value=y)",
                     "    return out"]) + "\n"
    return Bad("memory_space", src, (_arr(r, (R, F)),), frozenset({"NL-E301"}))


def _arg_count(r):
    src, R, F = _frame(r)
    a = _arr(r, (R, F))
    args, extra = r.choice([((), ()), ((a,), (a,)), ((a,), (a, 3))])   # one missing, one or two extra
    return Bad("argument_count", src, args, frozenset({"NL-E901"}), call_extra=extra)


def _arg_type(r):
    src, R, F = _frame(r)
    return Bad("argument_type", src, (_arr(r, (R, F)),), frozenset({"NL-E901"}),
               call_extra=(r.choice(["abc", None, object(), {"x": 1}]),))


def _oob(r):
    R = 128 * r.randint(1, 3)
    src, _, F = _frame(r, rows=R, mask=False)
    src = src.replace(f"nl.affine_range({R // 128})", f"nl.affine_range({R // 128 + r.randint(1, 2)})")
    return Bad("out_of_bounds", src, (_arr(r, (R, F)),), frozenset({"NL-E501", "NL-E502"}))


def _ragged(r):
    R = 128 * r.randint(0, 2) + r.randint(1, 127)
    src, _, F = _frame(r, rows=R, mask=False)
    return Bad("ragged_tail", src, (_arr(r, (R, F)),), frozenset({"NL-E502", "NL-E501"}))


def _ragged_store_only(r):
    R = 128 * r.randint(0, 2) + r.randint(1, 127)
    src, _, F = _frame(r, rows=R, mask=True, store_mask=False)
    return Bad("ragged_tail", src, (_arr(r, (R, F)),), frozenset({"NL-E502", "NL-E501"}))


def _loop_race(r):
    R = 128 * r.randint(2, 3)
    src, _, F = _frame(r, rows=R, mask=False)
    src = src.replace("nl.store(out[i * 128 + ip, jf]", "nl.store(out[ip, jf]")
    return Bad("loop_dependency", src, (_arr(r, (R, F)),), frozenset({"NL-E601", "NL-E702"}))


def _write_input(r):
    src, R, F = _frame(r)
    src = src.replace("nl.store(out[", "nl.store(a[")
    return Bad("immutable_parameter", src, (_arr(r, (R, F)),), frozenset({"NL-E701", "NL-E702"}))


def _uninit(r):
    src, R, F = _frame(r, "t = nl.ndarray((128, COLS), dtype=nl.float32, buffer=nl.sbuf)\ny = nl.add({x}, t)")
    return Bad("uninitialized_read", src, (_arr(r, (R, F)),), frozenset({"NL-E902"}),
               env={"NKI_LITE_DEBUG_UNINIT": "1"})


def _uninit_ragged(r):
    R = 128 * r.randint(0, 2) + r.randint(1, 127)
    src, _, F = _frame(r, rows=R, mask=True, store_mask=True)
    src = src.replace(f", mask=(i * 128 + ip < {R}))\n        nl.store", ")\n        nl.store")  # unmasked tail read
    src = src.replace(f"x = nl.load(a[i * 128 + ip, jf], mask=(i * 128 + ip < {R}))",
                      f"x = nl.ndarray((128, {F}), dtype=a.dtype, buffer=nl.sbuf)\n"
                      f"        x[ip, jf] = nl.load(a[i * 128 + ip, jf], mask=(i * 128 + ip < {R}))")
    src = src.replace(f", mask=(i * 128 + ip < {R}))\n    return", ")\n    return")
    # the store keeps no mask: the tail rows were never loaded -> out of bounds (trace time) or garbage
    return Bad("ragged_uninit", src, (_arr(r, (R, F)),), frozenset({"NL-E502", "NL-E501", "NL-E902"}),
               env={"NKI_LITE_DEBUG_UNINIT": "1"})


def _not_written(r):
    src, R, F = _frame(r)
    src = src.replace(f"nl.affine_range({-(-R // 128)})", "nl.affine_range(0)")
    return Bad("output_not_written", src, (_arr(r, (R, F)),), frozenset({"NL-E702", "NL-E808"}))


def _cf_tile(r):
    cond = r.choice(["{x}[0, 0] > 0", "{x} > 0", "nl.sum({x}, axis=1)[0, 0] > 1.0", "bool({x})"])
    src, R, F = _frame(r, f"if {cond}:\n    y = nl.exp({{x}})\nelse:\n    y = {{x}}".replace("{x}", "{x}"))
    return Bad("control_flow_on_tile", src, (_arr(r, (R, F)),), frozenset({"NL-E801", "NL-E104"}))


def _cf_index(r):
    # an arange index (a branch on loop variables only is legal: the loop is traced unrolled)
    cond = r.choice(["ip > 0", "i * 128 + ip < 100", "jf < 3"])
    src, R, F = _frame(r, f"if {cond}:\n    y = nl.exp({{x}})\nelse:\n    y = {{x}}")
    return Bad("control_flow_on_index", src, (_arr(r, (R, F)),), frozenset({"NL-E802"}))


def _rank1(r):
    F = r.randint(1, 512)
    src, R, G = _frame(r, f"t = nl.zeros(({F},), dtype=nl.float32, buffer=nl.sbuf)\ny = nl.add({{x}}, t)")
    return Bad("rank", src, (_arr(r, (R, G)),), frozenset({"NL-E104", "NL-E103"}))


def _mixed_index(r):
    src, R, F = _frame(r)
    src = src.replace("x = nl.load(a[i * 128 + ip, jf]", "x = nl.load(a[i * 128 + ip, :]")
    return Bad("mixed_indexing", src, (_arr(r, (R, F)),), frozenset({"NL-E804"}))


def _shape_mismatch(r):
    src, R, F = _frame(r, f"z = nl.zeros((128, COLS + {r.choice([-1, 1, 7, 100])}), dtype=nl.float32, "
                          "buffer=nl.sbuf)\ny = nl.add({x}, z)", cols=r.randint(2, 600))
    return Bad("shape_mismatch", src, (_arr(r, (R, F)),), frozenset({"NL-E103"}))


def _store_shape(r):
    src, R, F = _frame(r, f"y = nl.zeros((128, COLS + {r.randint(1, 100)}), dtype=nl.float32, buffer=nl.sbuf)")
    return Bad("shape_mismatch", src, (_arr(r, (R, F)),), frozenset({"NL-E103"}))


def _bad_dtype(r):
    dt = r.choice(['"float64"', "np.float64", '"complex64"', '"int4"', "object", '"nope"'])
    src, R, F = _frame(r, f"y = nl.zeros((128, COLS), dtype={dt}, buffer=nl.sbuf)\ny = nl.add({{x}}, y)")
    return Bad("dtype", src, (_arr(r, (R, F)),), frozenset({"NL-E201", "NL-E202"}))


def _bad_mask(r):
    src, R, F = _frame(r, "y = nl.exp({x}, mask=({x} > 0))")
    return Bad("bad_mask", src, (_arr(r, (R, F)),), frozenset({"NL-E806"}))


def _bad_loop(r):
    src, R, F = _frame(r)
    src = src.replace(f"nl.affine_range({-(-R // 128)})", r.choice(["nl.affine_range(2.5)", "nl.affine_range('2')",
                                                                    "nl.sequential_range(None)"]))
    return Bad("bad_loop", src, (_arr(r, (R, F)),), frozenset({"NL-E808"}))


def _spmd_race(r):
    R, F = 128, r.randint(1, 512)
    g = r.randint(2, 4)
    src = "\n".join(["@nki.jit", "def k(a):", f"    out = nl.ndarray(({R}, {F}), dtype=a.dtype, buffer=nl.shared_hbm)",
                     "    p = nl.program_id(0)", "    t = nl.load(a[p * 128:(p + 1) * 128, :])",
                     "    nl.store(out[0:128, :], value=t)", "    return out"]) + "\n"
    return Bad("program_dependency", src, (_arr(r, (R * g, F)),), frozenset({"NL-E602", "NL-E601"}),
               env={"NKI_LITE_SHUFFLE": str(r.randint(0, 99))}, grid=(g,))


def _hbm_raw(r):
    F = r.randint(1, 512)
    src = "\n".join([
        "@nki.jit", "def k(a):", f"    out = nl.ndarray((256, {F}), dtype=a.dtype, buffer=nl.shared_hbm)",
        f"    res = nl.ndarray((256, {F}), dtype=a.dtype, buffer=nl.shared_hbm)",
        "    ip = nl.arange(128)[:, None]", f"    jf = nl.arange({F})[None, :]", "    for i in nl.affine_range(2):",
        "        nl.store(out[i * 128 + ip, jf], value=nl.load(a[i * 128 + ip, jf]))",
        "        nl.store(res[i * 128 + ip, jf], value=nl.load(out[(1 - i) * 128 + ip, jf]))",
        "    return out, res"]) + "\n"
    return Bad("loop_raw_hbm", src, (_arr(r, (256, F)),), frozenset({"NL-E601", "NL-E902"}),
               env={"NKI_LITE_SHUFFLE": str(r.randint(0, 99))})


def _nan(r):
    src, R, F = _frame(r, f"y = nl.{r.choice(['log', 'sqrt'])}(nl.negative(nl.abs({{x}})) - 1.0)")
    a = np.random.default_rng(r.getrandbits(32)).standard_normal((R, F), dtype=np.float32)
    return Bad("nan_created", src, (a,), frozenset({"NL-E903"}), env={"NKI_LITE_DEBUG_NANS": "1"})


# (mistake body after `out = nl.ndarray((128, F), float32, shared_hbm)`, codes): API misuse at one line
_MISUSE = [
    ("t = nl.ndarray((0, F), dtype=nl.float32, buffer=nl.sbuf)\nnl.store(out, value=nl.exp(t))", {"NL-E103"}),  # an empty tile cannot be stored into a non-empty output
    ("t = nl.ndarray((-1, F), dtype=nl.float32, buffer=nl.sbuf)\nnl.store(out, value=nl.exp(t))", {"NL-E103"}),
    ("t = nl.zeros((128, F + 0.5), dtype=nl.float32, buffer=nl.sbuf)\nnl.store(out, value=t)", {"NL-E104"}),
    ("t = nl.zeros(128, dtype=nl.float32, buffer=nl.sbuf)\nnl.store(out, value=t)", {"NL-E104"}),
    ("nl.store(out, value=nl.load(a[1.5, :]))", {"NL-E807"}),
    ("nl.store(out, value=nl.load(a[nl.ds(0, -5), :]))", {"NL-E807"}),
    ("nl.store(out, value=nl.load(a[0:128:0, :]))", {"NL-E807"}),
    ("nl.store(out, value=nl.load(a[..., ...]))", {"NL-E807"}),
    ("ip = nl.arange(-3)[:, None]\nnl.store(out, value=nl.load(a[ip, 0:F]))", {"NL-E807"}),
    ("nl.store(out, value=nl.load(a[0:128, 0:F, 0]))", {"NL-E104"}),
    ("t = nl.zeros((128, F), dtype=None, buffer=nl.sbuf)\nnl.store(out, value=t)", {"NL-E202"}),
    ("t = nl.zeros((128, F), dtype=nl.float32, buffer='sbuf')\nnl.store(out, value=t)", {"NL-E301"}),
    ("nl.store(out, value=None)", {"NL-E901"}),
    ("nl.store(out, value=nl.load(np.ones((128, F))))", {"NL-E901"}),
    ("nl.store(out, value=nl.exp('x'))", {"NL-E901"}),
    ("x = nl.load(a)\nnl.store(out[0:128, 0:1], value=nl.sum(x, axis=5))", {"NL-E103"}),
    ("p = nl.program_id(3)\nnl.store(out, value=nl.load(a))", {"NL-E901"}),
    ("x = nl.load(a)\nnl.store(out, value=nl.load(a[x, :]))", {"NL-E201"}),   # a float tile as an index
    ("x = nl.load(a)\nnl.store(out, value=nl.where(x[:, 0:1] > 0, x[:, 0:F - 1], x))", {"NL-E103"}),
    ("x = nl.load(a)\nnl.store(out, value=nl.bitwise_and(x, x))", {"NL-E201"}),
    ("x = nl.load(a)\nnl.store(out, value=nl.copy(x, dtype='float128'))", {"NL-E202"}),
    ("ip = nl.arange(64)[:, None]\nnl.store(out, value=nl.load(a), mask=(ip < 3))", {"NL-E806"}),
    ("x = nl.load(a)\nnl.store(out, value=nisa.tensor_scalar(x, op0=np.sin, operand0=1.0))", {"NL-E904", "NL-E901"}),
]


def _misuse(r):
    body, codes = r.choice(_MISUSE)
    F = r.randint(2, 300)
    lines = ["@nki.jit", "def k(a):", f"    out = nl.ndarray((128, {F}), dtype=nl.float32, buffer=nl.shared_hbm)"]
    lines += ["    " + ln.replace("F", str(F)) for ln in body.split("\n")]
    lines.append("    return out")
    return Bad("api_misuse", "\n".join(lines) + "\n", (_arr(r, (128, F)),), frozenset(codes))


KINDS = {
    "api_misuse": _misuse,
    "api_misuse_2": _misuse,
    "partition_limit": _partition_limit,
    "free_size_limit": _transpose_free,
    "sbuf_capacity": _sbuf_capacity,
    "psum_capacity": _psum_capacity,
    "matmul_k_mismatch": _matmul("matmul_k_mismatch", {"NL-E105", "NL-E103"}, lambda r: r.randint(1, 128),
                                 lambda r, k: r.choice([x for x in (k + 1, k - 1, 2 * k) if 0 < x <= 128] or [2])),
    "matmul_k_over_128": _matmul("matmul_k_over_128", {"NL-E105", "NL-E101"}, lambda r: r.randint(129, 300),
                                 lambda r, k: k),
    "matmul_n_over_512": _matmul("matmul_n_over_512", {"NL-E105", "NL-E102", "NL-E402", "NL-E404"},
                                 lambda r: r.randint(1, 128), lambda r, k: k, n=None),
    "matmul_dtype": _matmul("matmul_dtype", {"NL-E201"}, lambda r: r.randint(1, 128), lambda r, k: k, dtype="int32"),
    "memory_space_load": _wrong_space_load,
    "memory_space_compute": _wrong_space_compute,
    "argument_count": _arg_count,
    "argument_type": _arg_type,
    "out_of_bounds": _oob,
    "ragged_tail": _ragged,
    "ragged_store": _ragged_store_only,
    "loop_dependency": _loop_race,
    "immutable_parameter": _write_input,
    "uninitialized_read": _uninit,
    "ragged_uninit": _uninit_ragged,
    "output_not_written": _not_written,
    "control_flow_on_tile": _cf_tile,
    "control_flow_on_index": _cf_index,
    "rank": _rank1,
    "mixed_indexing": _mixed_index,
    "shape_mismatch": _shape_mismatch,
    "store_shape": _store_shape,
    "dtype": _bad_dtype,
    "bad_mask": _bad_mask,
    "bad_loop": _bad_loop,
    "program_dependency": _spmd_race,
    "loop_raw_hbm": _hbm_raw,
    "nan_created": _nan,
}


def _fix_matmul_n(r, case: Bad) -> Bad:
    if case.kind == "matmul_n_over_512":
        N = r.randint(513, 2048)
        a = case.args[0]
        M = a.shape[1]
        case.src = case.src.replace(case.src.split("out = nl.ndarray((")[1].split(")")[0], f"{M}, {N}")
        case.src = case.src.replace(case.src.split("ps = nl.zeros((")[1].split(")")[0], f"{M}, {N}")
        case.args = (a, _arr(r, (a.shape[0], N)))
    return case


def case(seed: int) -> Bad:
    r = random.Random(seed)
    kind = sorted(KINDS)[seed % len(KINDS)]
    c = _fix_matmul_n(r, KINDS[kind](r))
    c.kind = kind
    c.fname = f"<kernelgen_bad {seed} {kind}>"
    linecache.cache[c.fname] = (len(c.src), None, c.src.splitlines(keepends=True), c.fname)
    return c


def build(c: Bad):
    ns = {"nki": nki, "nl": nl, "nisa": nisa, "nt": nt, "np": np}
    exec(compile(c.src, c.fname, "exec"), ns)
    k = ns["k"]
    return k[c.grid] if c.grid else k


def check(c: Bad) -> list[str]:
    """Problems of one case in both modes (empty: each mode raised an expected nki_lite error)."""
    problems = []
    saved = {k: os.environ.get(k) for k in c.env}
    os.environ.update(c.env)
    try:
        k = build(c)
        for mode in ("interpret", "jit"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    k(*(c.args if c.call_extra is None else c.args + c.call_extra), mode=mode)
            except errors.NkiLiteError as e:
                if e.code not in c.codes:
                    problems.append(f"{mode}: {e.code} {e.name}, expected one of {sorted(c.codes)}: "
                                    f"{str(e).splitlines()[0]}")
            except BaseException as e:            # noqa: BLE001 - anything else is the bug we look for
                if isinstance(e, KeyboardInterrupt):
                    raise
                problems.append(f"{mode}: {type(e).__name__} (not an NkiLiteError): {e}")
            else:
                problems.append(f"{mode}: accepted without an error")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return problems


def main(argv: list[str]) -> int:
    start, count = int(argv[1]), int(argv[2])
    timeout = float(argv[3]) if len(argv) > 3 else 20.0
    problems, kinds = [], Counter()
    for seed in range(start, start + count):
        c = case(seed)
        kinds[c.kind] += 1
        faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            for p in check(c):
                problems.append(f"seed {seed} ({c.kind}): {p}\n{c.src}")
        finally:
            faulthandler.cancel_dump_traceback_later()
    print(json.dumps({"cases": count, "problems": problems, "kinds": kinds}))
    return 0


if __name__ == "__main__":
    faulthandler.enable()
    sys.exit(main(sys.argv))
