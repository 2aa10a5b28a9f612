"""A random generator of well-formed NKI kernels (hypothesis), for differential testing of the backends.

`kernels(...)` is a `st.composite` strategy producing `Case`s: a traced-ready `Kernel` (with its SPMD
grid bound) plus its arguments. Each case is *Python source* written into `linecache` (so error
messages, buffer names and the IR's locations work as for a kernel in a file) and exec'd; `repr(case)`
is that source plus the argument shapes/dtypes, so a failing example reads as a repro.

What a kernel looks like:
- a *frame*: the tile [P, F] (P <= 128, F <= 300) walked over the inputs by 0-2 nested loops
  (`nl.affine_range` / `nl.sequential_range` / `nl.static_range`) and an optional 1-D or 2-D SPMD grid;
  row blocks come from `program_id(0)` and the row loop, column blocks from `program_id(1)` and the
  column loop; ragged rows/columns are masked (`mask=(i*P + ip < n)`), or an accumulation loop adds
  `acc[...] += x` over a leading input axis;
- loads through arange indexing (plain or strided), slices, `nl.ds`, `nl.load_transpose2d`, with
  DMA casts, `[P, 1]` vectors and `[1, F]` broadcast rows, some hoisted out of the loops;
- a chain of 1-6 ops drawn from the nl / nisa surface (see `OPS`), each picking operands from the
  values computed so far; masks on ragged frames; in-place updates;
- 1 to 4 outputs: the last value and some intermediate ones (HBM, optional cast, sometimes an
  `nt.mutable_tensor` parameter), stored per block (masked on ragged frames).

Choices come from a hypothesis-seeded RNG by default (independent cases) or, with NKI_LITE_SHRINK=1 or
`shrinkable=True`, from individual hypothesis draws (failures shrink to a minimal kernel).

Only kernels that trace are produced: the strategy calls `kernel.trace(*args)` (which also verifies)
and drops the rare illegal combination with `hypothesis.assume`; `STATS` counts generated and
dropped cases (with reasons) so tests can assert the drop rate stays low.

`init_full=True` restricts the generator to kernels that never read uninitialised memory (no masked
compute instructions; ragged loads go into zero-filled tiles), for runs with NKI_LITE_DEBUG=0.

Run `python -m tests.kernelgen [N]` to print N sample kernels' coverage statistics.
"""
from __future__ import annotations

import itertools
import linecache
import math
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite import errors
from nki_lite.core import dtypes as D

# ----------------------------------------------------------------------------------------- vocabulary

IN_FLOATS = ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2"]
IN_INTS = ["int8", "int16", "int32", "uint8"]
IN_DTYPES = IN_FLOATS + IN_INTS
RARE_DTYPES = ["uint16", "uint32", "bool", "float8_e4m3fn"]          # inputs, now and then
CAST_DTYPES = IN_DTYPES + ["tfloat32", "uint16", "uint32", "bool", "float8_e4m3fn"]
# draws are weighted towards float32 (then the 16-bit floats): rounding-order bugs only show in results
# that keep enough precision, and a narrow result hides most 1-ulp differences
IN_WEIGHTED = ["float32"] * 5 + ["bfloat16"] * 2 + ["float16"] * 2 + IN_FLOATS[3:] + IN_INTS
CAST_WEIGHTED = ["float32"] * 6 + ["bfloat16"] * 2 + ["float16"] * 2 + CAST_DTYPES[3:]
MM_NARROW = ["bfloat16", "float16", "float8_e4m3", "float8_e5m2"]

FLOAT_BINOPS = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "not_equal", "greater",
                "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor", "fmod", "mod"]
INT_ONLY_BINOPS = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "mod": "%", "bitwise_and": "&", "bitwise_or": "|",
             "bitwise_xor": "^", "left_shift": "<<", "right_shift": ">>", "less": "<", "less_equal": "<=",
             "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!="}
UNARY = ["exp", "log", "tanh", "sigmoid", "relu", "rsqrt", "sqrt", "square", "reciprocal", "abs", "negative",
         "gelu", "gelu_apprx_tanh", "silu", "softplus", "erf", "sin", "cos", "tan", "arctan", "mish", "sign"]
REDUCE_OPS = ["add", "maximum", "minimum", "multiply", "logical_and", "logical_or"]
NL_REDUCTIONS = ["sum", "max", "min", "prod", "mean", "all"]
SCAN_OPS = ["add", "subtract", "multiply", "maximum", "minimum"]
ACC_OPS_AFFINE = ["add", "maximum", "minimum", "multiply"]         # associative: legal in affine_range

FLOAT_SCALARS = [0.0, 1.0, -2.5, 0.5, 3.0, -0.0, 0.1, 1e-30, 1e30, 448.0, 65504.0, 3.4e38, -1e-3,
                 float("inf"), float("-inf"), float("nan")]
INT_SCALARS = [0, 1, -1, 2, 3, 7, 31, 127, 255, -128, 1000, 65535, 2 ** 31 - 1, -2 ** 31, 40, 64]
BOOL_SCALARS = [True, False]

# op kinds and their weights (the chain draws from the applicable ones)
OPS = {
    "binary": 10, "binary_scalar": 6, "unary": 8, "activation": 4, "tensor_scalar": 6, "scalar_tensor_tensor": 2,
    "reduce": 5, "reduce3d": 2, "var": 1, "where": 3, "iota": 2, "affine_select": 2, "scan": 3, "matmul": 5,
    "transpose": 3, "copy": 5, "fill": 1, "view": 4, "inplace": 3, "concat": 2, "bn_stats": 1, "max8": 1,
    "copy_predicated": 2, "tensor_scalar_reduce": 1, "activation_reduce": 1, "hbm_roundtrip": 1, "invert": 1,
}


def _dt(name: str) -> str:
    return "nl.bool_" if name == "bool" else f"nl.{name}"


def _dtk(name: str | None) -> str | None:
    """dtype= keyword text (None: no keyword)."""
    return _dt(name) if name else None


def _lit(v) -> str:
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return repr(int(v))


def _is_int(dt: str) -> bool:
    return D.INFO[dt].is_int


def _scalar_dt(v) -> str:
    return D.scalar_dtype(v)


# ----------------------------------------------------------------------------------------- statistics

@dataclass
class GenStats:
    generated: int = 0          # kernels built and handed to trace
    dropped: int = 0            # ... that failed to trace/verify (assume(False))
    reasons: Counter = field(default_factory=Counter)
    ops: Counter = field(default_factory=Counter)
    apis: Counter = field(default_factory=Counter)
    dtypes: Counter = field(default_factory=Counter)
    structures: Counter = field(default_factory=Counter)

    @property
    def drop_rate(self) -> float:
        return self.dropped / max(1, self.generated)

    def reset(self) -> None:
        self.__init__()

    def summary(self) -> str:
        lines = [f"generated {self.generated}, dropped {self.dropped} ({100 * self.drop_rate:.1f}%)"]
        for title, c in (("drop reasons", self.reasons), ("structures", self.structures), ("op kinds", self.ops),
                         ("apis", self.apis), ("dtypes", self.dtypes)):
            lines.append(f"{title}: " + ", ".join(f"{k}={v}" for k, v in c.most_common()))
        return "\n".join(lines)


STATS = GenStats()
DEBUG_DROPS = False

# Known, not yet fixed JIT/interpreter bugs: name -> description (tests/test_jit_regressions.py holds a
# minimal repro of each). Guard the code that generates one with `if ... and avoid(name)`: by default the
# generator keeps producing it (the differential tests fail until it is fixed); with
# NKI_LITE_KERNELGEN_AVOID_KNOWN=1 it steers around it to look for new bugs. Empty: every bug in
# test_jit_regressions.py is fixed.
KNOWN_BUGS: dict[str, str] = {}


def avoid(bug: str) -> bool:
    import os
    assert bug in KNOWN_BUGS, bug
    return os.environ.get("NKI_LITE_KERNELGEN_AVOID_KNOWN", "0") == "1"


def _out_cast(b, ops=()) -> str:
    """A random dtype= for an op result (an integer one for bitwise/shift ops: they have no float path)."""
    if any(o in INT_ONLY_BINOPS for o in ops):
        return b.pick(IN_INTS + ["uint16", "uint32", "bool"])
    return b.cast_dtype()


# ----------------------------------------------------------------------------------------- the case

@dataclass
class InputSpec:
    name: str
    shape: tuple
    dtype: str
    mutable: bool = False


class Case:
    """A generated kernel (grid bound) and its arguments; repr() is the kernel's source (a repro)."""

    def __init__(self, kernel, args: tuple, source: str, grid: tuple, inputs: list, init_full: bool):
        self.kernel = kernel
        self.args = args
        self.source = source
        self.grid = grid
        self.inputs = inputs
        self.init_full = init_full

    def fresh_args(self) -> tuple:
        """Copies of the arguments (mutable parameters are written by a call)."""
        return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in self.args)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}{' mutable' if s.mutable else ''}" for s in self.inputs)
        g = f"[{', '.join(map(str, self.grid))}]" if self.grid else "()"
        return f"<generated kernel, grid={g}, inputs=({ins}):\n{self.source}>"

    def _repr_pretty_(self, p, cycle) -> None:           # hypothesis' printer: the source, not the fields
        p.text(repr(self))


# ----------------------------------------------------------------------------------------- data

# sprinkled into 'normal' data: zeros, infinities, subnormals, values at the fp16/fp8 limits, and NaNs with
# other payloads and signs than the canonical +qNaN (signalling ones included)
SPECIALS = np.concatenate([
    np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e38, 65520.0, 240.0, 1e-8], np.float32),
    np.array([0x7FA00000, 0xFFC00001, 0x7F800001, 0xFFBFFFFF], np.uint32).view(np.float32)])


def make_array(rng: np.random.Generator, shape: tuple, dt: str, mode: str) -> np.ndarray:
    """Random data: 'normal' (scaled normals with a few special values), 'bits' (uniform bit patterns:
    every NaN payload, infinity, subnormal), 'small' (small integers / exactly representable)."""
    storage = D.storage(dt)
    n = int(np.prod(shape))
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if mode == "bits":
        nbytes = n * storage.itemsize
        raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        return raw.view(storage).reshape(shape).copy()
    if _is_int(dt):
        info = np.iinfo(storage)
        if mode == "small":
            lo, hi = max(info.min, -8), min(info.max, 8)
        else:
            lo, hi = info.min, info.max
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(storage)
    if mode == "small":
        x = rng.integers(-4, 5, size=shape).astype(np.float32) * np.float32(0.5)
    else:
        x = (rng.standard_normal(shape) * rng.choice([1.0, 4.0, 100.0])).astype(np.float32)
        k = rng.random(shape) < 0.05
        x[k] = rng.choice(SPECIALS, size=int(k.sum()))
    with np.errstate(all="ignore"):
        return x.astype(storage)


# ----------------------------------------------------------------------------------------- values

@dataclass
class Val:
    name: str
    shape: tuple            # (p, f) or (p,)
    dtype: str
    space: str = "sbuf"     # sbuf | psum
    scope: int = 0          # section depth where it was defined (values of inner bodies die after them)
    fresh: bool = True      # a tile created in the current body (safe to update in place)
    is_view: bool = False

    @property
    def p(self) -> int:
        return self.shape[0]

    @property
    def f(self) -> int:
        return self.shape[1] if len(self.shape) > 1 else 1

    @property
    def two_d(self) -> bool:
        return len(self.shape) == 2


# ----------------------------------------------------------------------------------------- the builder

_COUNTER = itertools.count()


class _Builder:
    def __init__(self, draw, init_full: bool, max_ops: int, rng: np.random.Generator | None = None):
        self.draw = draw
        self.rng = rng
        self.init_full = init_full
        self.max_ops = max_ops
        self.inputs: list[InputSpec] = []
        self.top: list[str] = []          # function body before the loops (output tensors)
        self.hoist: list[str] = []        # loads hoisted out of the loops
        self.secs: list[list[str]] = []   # secs[d]: lines at loop depth d, before the loop at depth d opens
        self.post: list[list[str]] = []   # post[d]: lines at loop depth d after that loop closes
        self.post_mode = False            # emitting after the accumulation loop (into post[...])
        self.final_d_post = -1
        self.pool: list[Val] = []         # values the chain can use, in creation order
        # the frame (set by _write_kernel)
        self.structure, self.grid, self.loops, self.depth = "", (), [], 0
        self.P = self.F = self.n = self.W = self.NB = self.CB = 1
        self.rb = self.cb = self.rowblk = self.colblk = "0"
        self.live_r = self.live = None
        self.ragged_c = False
        self.slices_ok = True
        self.names = itertools.count()
        self.psum_tiles = 0
        self.ops_used: list[str] = []
        self.apis: list[str] = []
        self.dtypes_used: set[str] = set()

    # ---- choices: from hypothesis (shrinkable) or from a numpy RNG seeded by one hypothesis draw
    def integer(self, lo: int, hi: int) -> int:
        if self.rng is not None:
            return int(self.rng.integers(lo, hi, endpoint=True))
        return self.draw(st.integers(lo, hi))

    def pick(self, seq):
        seq = list(seq)
        return seq[self.integer(0, len(seq) - 1)]           # shrinks towards the first element

    def coin(self, p_true: float = 0.5) -> bool:
        return self.integer(0, 999) < int(p_true * 1000)    # shrinks towards False

    def fresh(self, base: str) -> str:
        return f"{base}{next(self.names)}"

    def add_input(self, base: str, shape: tuple, dt: str, mutable: bool = False) -> str:
        name = f"{base.upper()}{len(self.inputs)}"      # upper case: never clashes with a tile name
        self.inputs.append(InputSpec(name, tuple(int(s) for s in shape), dt, mutable))
        self.dtypes_used.add(dt)
        return name

    def in_dtype(self, allow_rare: bool = True) -> str:
        if allow_rare and self.coin(0.06):
            return self.pick(RARE_DTYPES)
        return self.pick(IN_WEIGHTED)

    def cast_dtype(self) -> str:
        return self.pick(CAST_WEIGHTED)

    def api(self, name: str) -> None:
        self.apis.append(name)


def _blk(parts: list[tuple[str, int]]) -> str:
    """Block index expression from (variable, count) pairs, outermost first: ((a * nb) + b)."""
    parts = [(v, n) for v, n in parts if v is not None]
    if not parts:
        return "0"
    expr = parts[0][0]
    for v, n in parts[1:]:
        expr = f"({expr} * {n} + {v})"
    return expr


@st.composite
def kernels(draw, *, init_full: bool = False, max_ops: int = 6, shrinkable: bool | None = None,
            nested_affine: bool = False):
    """A `Case`: a freshly written kernel that traces and verifies, with its arguments.

    Every choice is either its own hypothesis draw (`shrinkable=True`: hypothesis can shrink a failure
    to a minimal kernel, but its generation mutates earlier examples, so consecutive cases are often
    near-duplicates) or comes from a numpy RNG seeded by one hypothesis draw (the default: each case is
    independent, which finds far more in a fixed budget). The default follows NKI_LITE_SHRINK=1.

    `nested_affine=True` always writes a sequential row loop around an affine column loop (the shape
    of the JIT's parallel regions, lower/parallel.py `regions`)."""
    if shrinkable is None:
        import os
        shrinkable = os.environ.get("NKI_LITE_SHRINK") == "1"
    rng = None if shrinkable else np.random.default_rng(draw(st.integers(0, 2 ** 63 - 1)))
    b = _Builder(draw, init_full, max_ops, rng)
    b.nested_affine = nested_affine
    src, fn_name = _write_kernel(b)
    grid = b.grid
    seed = b.integer(0, 2 ** 32 - 1)
    mode = b.pick(["normal", "normal", "normal", "small", "bits"])
    rng = np.random.default_rng(seed)
    args = []
    for spec in b.inputs:
        m = mode if not spec.name.startswith("W") or mode != "bits" else "normal"
        args.append(make_array(rng, spec.shape, spec.dtype, m))
    fname = f"<kernelgen {next(_COUNTER)}>"
    lines = src.splitlines(keepends=True)
    linecache.cache[fname] = (len(src), None, lines, fname)
    ns = {"nki": nki, "nl": nl, "nisa": nisa, "nt": nt, "np": np, "math": math}
    exec(compile(src, fname, "exec"), ns)
    k = ns[fn_name]
    if grid:
        k = k[grid]
    STATS.generated += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k.trace(*args)
    except errors.NkiLiteError as e:
        STATS.dropped += 1
        STATS.reasons[f"{e.name}: {str(e).splitlines()[0].split(': ', 1)[-1][:90]}"] += 1
        if DEBUG_DROPS:
            print("DROPPED:", str(e).splitlines()[0], "\n", src)
        linecache.cache.pop(fname, None)
        assume(False)
    STATS.structures[b.structure] += 1
    STATS.ops.update(b.ops_used)
    STATS.apis.update(b.apis)
    STATS.dtypes.update(b.dtypes_used)
    return Case(k, tuple(args), src, grid, b.inputs, init_full)


# ----------------------------------------------------------------------------------------- the frame

def _write_kernel(b: _Builder):
    structure = "rows_cols" if b.nested_affine else b.pick(["flat", "rows", "rows_cols", "rows_acc", "acc", "cols"])
    b.structure = structure
    # ---- grid
    gkind = "none" if b.nested_affine else b.pick(["none", "none", "1d", "2d"])
    g0 = b.integer(1, 3) if gkind != "none" else 1
    g1 = b.integer(1, 2) if gkind == "2d" else 1
    b.grid = () if gkind == "none" else ((g0,) if gkind == "1d" else (g0, g1))
    if b.grid:
        b.structure += f"+grid{len(b.grid)}d"

    P = b.pick([128, 1, 2, 8, 32, 64, 100, 127, 16, 128])
    F = b.pick([64, 1, 3, 8, 16, 17, 32, 48, 100, 128, 200, 256, 300])
    if P * F * max(1, g0 * g1) > 60000:
        F = max(1, 60000 // (P * g0 * g1))
    T = b.integer(1, 3) if structure in ("rows", "rows_cols", "rows_acc") else 1
    J = b.integer(2 if b.nested_affine else 1, 3) if structure in ("rows_cols", "cols") else 1
    S = b.integer(1, 3) if structure in ("rows_acc", "acc") else 0
    if P * F * T * J * max(1, S) * g0 * g1 > 150000:
        T = 1
        J = 2 if b.nested_affine else 1
        S = min(S, 1)
        if b.nested_affine:
            F = min(F, 150000 // (2 * P))
    kinds = ["affine_range", "sequential_range", "static_range"]
    row_kind = b.pick(kinds) if structure in ("rows", "rows_cols", "rows_acc") else None
    col_kind = b.pick(kinds) if structure in ("rows_cols", "cols") else None
    if b.nested_affine:
        row_kind, col_kind = "sequential_range", "affine_range"
    acc_kind = b.pick(kinds) if S else None
    for k in (row_kind, col_kind, acc_kind):
        if k:
            b.structure += f"/{k.split('_')[0]}"

    NB, CB = g0 * T, g1 * J
    ragged_r = b.coin(0.4) and NB * P > 1
    ragged_c = b.coin(0.2) and CB * F > 1 and structure in ("rows_cols", "cols")
    n = NB * P - (b.integer(1, min(P, NB * P - 1)) if ragged_r else 0)
    W = CB * F - (b.integer(1, min(F, CB * F - 1)) if ragged_c else 0)
    if n < NB * P and (NB - 1) * P >= n:        # a whole block past the end: keep the tail in the last block
        n = (NB - 1) * P + 1
    if W < CB * F and (CB - 1) * F >= W:
        W = (CB - 1) * F + 1
    ragged_r, ragged_c = n < NB * P, W < CB * F
    if ragged_r:
        b.structure += "+ragged_rows"
    if ragged_c:
        b.structure += "+ragged_cols"
    b.P, b.F, b.n, b.W = P, F, n, W
    # constant slices are clamped like Python's (x[8:16] of 10 rows has 2): on a ragged dimension, slice
    # only with a symbolic start (a loop variable or a program id), else use nl.ds / arange
    sym_r = bool(b.grid) or row_kind in ("affine_range", "sequential_range")
    sym_c = len(b.grid) == 2 or col_kind in ("affine_range", "sequential_range")
    b.slices_ok = (not ragged_r or sym_r) and (not ragged_c or sym_c)

    rv = "i" if row_kind else None
    cv = "j" if col_kind else None
    sv = "s" if acc_kind else None
    rowblk = _blk([("pid0" if b.grid else None, g0), (rv, T)])
    colblk = _blk([("pid1" if len(b.grid) == 2 else None, g1), (cv, J)])
    rb = "0" if rowblk == "0" else f"{rowblk} * {P}"
    cb = "0" if colblk == "0" else f"{colblk} * {F}"
    b.rb, b.cb, b.rowblk, b.colblk, b.NB, b.CB = rb, cb, rowblk, colblk, NB, CB

    # ---- sections, outermost first: top, [row loop body], [col loop body], [acc loop body]
    loops = []
    if row_kind:
        loops.append((rv, row_kind, T))
    if col_kind:
        loops.append((cv, col_kind, J))
    if acc_kind:
        loops.append((sv, acc_kind, S))
    depth_body = len(loops)
    secs: list[list[str]] = [[] for _ in range(depth_body + 1)]     # secs[d]: lines at loop depth d
    post: list[list[str]] = [[] for _ in range(depth_body + 1)]     # after the loop at depth d+1 closes
    b.secs, b.post = secs, post
    b.depth = depth_body
    b.loops = loops
    # loop bounds: (T), (0, T) or reversed (T - 1, -1, -1); the loop variable's values are the same set
    loop_args = {}
    for var, kind, trip in loops:
        form = b.pick(["stop", "start_stop", "reversed"])
        loop_args[var] = {"stop": f"{trip}", "start_stop": f"0, {trip}", "reversed": f"{trip - 1}, -1, -1"}[form]
        if form != "stop":
            b.api(f"loop:{form}")

    # masks (defined where their loop variables exist)
    mask_depth = len([l for l in loops if l[0] in (rv, cv)])
    live_r = live = None
    mlines = []
    if ragged_r:
        live_r = "live_r"
        mlines.append(f"live_r = {rb} + ip < {n}")
    if ragged_c:
        mlines.append(f"live_c = {cb} + jf < {W}")
    if ragged_r and ragged_c:
        live = "live"
        mlines.append("live = live_r & live_c")
    elif ragged_r:
        live = "live_r"
    elif ragged_c:
        live = "live_c"
    secs[mask_depth].extend(mlines)
    b.live_r, b.live = live_r, live
    b.ragged_c = ragged_c

    # ---- loads
    body_d = depth_body
    main_dt = b.in_dtype()
    t0 = _load_main(b, main_dt, body_d, S)
    b.pool.append(t0)
    if b.coin(0.5):
        t1 = _load_main(b, b.in_dtype(), body_d, S if b.coin(0.5) else 0)
        b.pool.append(t1)
    if b.coin(0.3):
        _load_vector(b, body_d)
    if b.coin(0.25):
        _load_row(b, body_d)

    # ---- the chain
    n_ops = b.integer(1, b.max_ops)
    for _ in range(n_ops):
        _one_op(b, body_d)

    # ---- accumulate over s
    final_d = body_d
    if acc_kind:
        cur = b.pool[-1]
        if not cur.two_d:
            cur = _as_2d(b, cur, body_d)
        acc_dt = b.pick(["float32", cur.dtype, "bfloat16", "int32"])
        accop = b.pick(ACC_OPS_AFFINE if acc_kind == "affine_range" else ACC_OPS_AFFINE + ["subtract"])
        acc_d = body_d - 1
        init = 0 if accop != "multiply" else 1
        secs[acc_d].append(f"acc = nl.full({cur.shape}, {init}, dtype={_dt(acc_dt)})")
        form = b.pick(["aug", "view_aug", "call"]) if accop == "add" else "call"
        if form == "aug":
            secs[body_d].append(f"acc += {cur.name}")
        elif form == "view_aug":
            secs[body_d].append(f"acc[...] += {cur.name}")
        else:
            # the same dtype as acc keeps it one instruction (out == an input: an associative reduction)
            secs[body_d].append(f"acc[...] = nl.{accop}(acc, {cur.name}, dtype={_dt(acc_dt)})")
        b.api(f"acc:{form}:{accop}")
        b.ops_used.append("accumulate")
        # values of the accumulation body are dead after it; continue with acc
        b.pool = [v for v in b.pool if v.scope < body_d]
        b.pool.append(Val("acc", cur.shape, acc_dt, scope=acc_d, fresh=False))
        final_d = acc_d
        b.post_mode, b.final_d_post = True, acc_d
        for _ in range(b.integer(0, 2)):
            _one_op(b, final_d, post=True)

    # ---- outputs
    outs = _store_outputs(b, final_d)

    # ---- assemble
    params = []
    for spec in b.inputs:
        params.append(f"{spec.name}: nt.mutable_tensor" if spec.mutable else spec.name)
    fn_name = f"kg_{next(_COUNTER)}"
    L = ["@nki.jit", f"def {fn_name}({', '.join(params)}):"]
    ind = "    "
    L += [ind + s for s in b.top]
    L.append(ind + f"ip = nl.arange({P})[:, None]")
    L.append(ind + f"jf = nl.arange({F})[None, :]")
    if b.grid:
        L.append(ind + "pid0 = nl.program_id(0)")
        if len(b.grid) == 2:
            L.append(ind + "pid1 = nl.program_id(1)")
    L += [ind + s for s in b.hoist]

    def emit(d):
        pad = ind * (d + 1)
        L.extend(pad + s for s in secs[d])
        if d < depth_body:
            var, kind, trip = loops[d]
            L.append(pad + f"for {var} in nl.{kind}({loop_args[var]}):")
            emit(d + 1)
            L.extend(pad + s for s in post[d])
    emit(0)
    L.append(ind + f"return {outs}")
    return "\n".join(L) + "\n", fn_name


def _row_index(b: _Builder) -> str:
    return "ip" if b.rb == "0" else f"{b.rb} + ip"


def _col_index(b: _Builder) -> str:
    return "jf" if b.cb == "0" else f"{b.cb} + jf"


def _load_main(b: _Builder, dt: str, d: int, S: int) -> Val:
    """A [P, F] tile of a frame input (n, W) (or (S, n, W) inside the accumulation loop)."""
    P, F, n, W = b.P, b.F, b.n, b.W
    lead = "s, " if S else ""
    style = b.pick(["arange", "slice", "ds", "strided", "transposed"])
    if style == "transposed" and (S or b.coin(0.5)):
        style = "arange"
    if style in ("slice", "transposed") and not b.slices_ok:
        style = "ds"
    if style == "strided":
        stride, off = b.pick([2, 3]), b.integer(0, 1)
        width = W * stride + off
    else:
        stride, off, width = 1, 0, W
    shape = ((S,) if S else ()) + ((width, n) if style == "transposed" else (n, width))
    name = b.add_input("x", shape, dt)
    r, c = _row_index(b), _col_index(b)
    if style == "arange":
        view = f"{name}[{lead}{r}, {c}]"
    elif style == "slice":
        rs = f"{b.rb}:{b.rb} + {P}" if b.rb != "0" else f"0:{P}"
        cs = f"{b.cb}:{b.cb} + {F}" if b.cb != "0" else f"0:{F}"
        view = f"{name}[{lead}{rs}, {cs}]"
    elif style == "ds":
        view = f"{name}[{lead}nl.ds({b.rb}, {P}), nl.ds({b.cb}, {F})]"
    elif style == "strided":
        view = f"{name}[{lead}{r}, {stride} * ({c}) + {off}]"
    else:
        rs = f"{b.rb}:{b.rb} + {P}" if b.rb != "0" else f"0:{P}"
        cs = f"{b.cb}:{b.cb} + {F}" if b.cb != "0" else f"0:{F}"
        view = f"{name}[{cs}, {rs}]"
    b.api(f"load:{style}")
    cast_dt = b.cast_dtype() if b.coin(0.2) else None
    cast = f", dtype={_dt(cast_dt)}" if cast_dt else ""
    out_dt = cast_dt or dt
    mask = f", mask={b.live}" if b.live else ""
    load = "nl.load_transpose2d" if style == "transposed" else "nl.load"
    t = b.fresh("t")
    if b.live and (b.init_full or b.coin(0.4)):
        # zero-filled tile, masked load into it: fully initialised
        fill = b.pick([0, 1, -1.5]) if not _is_int(out_dt) else b.pick([0, 3])
        b.secs[d].append(f"{t} = nl.full(({P}, {F}), {fill}, dtype={_dt(out_dt)})")
        b.secs[d].append(f"{t}[...] = {load}({view}{mask}{cast})")
        b.api("load:into_filled")
    else:
        b.secs[d].append(f"{t} = {load}({view}{mask}{cast})")
    return Val(t, (P, F), out_dt, scope=d)


def _load_vector(b: _Builder, d: int) -> None:
    """A [P, 1] tile of a (n,) input."""
    P, n = b.P, b.n
    dt = b.in_dtype()
    name = b.add_input("v", (n,), dt)
    t = b.fresh("v")
    rexpr = "nl.arange({P})".format(P=P) if b.rb == "0" else f"{b.rb} + nl.arange({P})"
    style = b.pick(["arange", "slice"]) if b.slices_ok else "arange"
    view = f"{name}[{rexpr}]" if style == "arange" else (f"{name}[{b.rb}:{b.rb} + {P}]" if b.rb != "0"
                                                           else f"{name}[0:{P}]")
    mask = f", mask={b.live_r}" if b.live_r else ""
    if b.live_r and (b.init_full or b.coin(0.5)):
        b.secs[d].append(f"{t} = nl.zeros(({P}, 1), dtype={_dt(dt)})")
        b.secs[d].append(f"{t}[...] = nl.load({view}{mask})")
    else:
        b.secs[d].append(f"{t} = nl.load({view}{mask})")
    b.api(f"load:vector_{style}")
    b.pool.append(Val(t, (P, 1), dt, scope=d))


def _load_row(b: _Builder, d: int) -> None:
    """A [1, F] row of a (W,) input broadcast to [P, F]; hoisted out of the loops when it can be."""
    P, F, W = b.P, b.F, b.W
    dt = b.in_dtype()
    name = b.add_input("g", (W,), dt)
    t = b.fresh("g")
    c = _col_index(b)
    hoisted = b.cb == "0" and not b.ragged_c
    mask = "" if not b.ragged_c else f", mask=({b.cb} + jf < {W})"
    line = f"{t} = nl.load({name}.reshape((1, {W}))[nl.arange(1)[:, None], {c}]{mask})"
    if b.ragged_c and (b.init_full or b.coin(0.5)):
        lines = [f"{t} = nl.zeros((1, {F}), dtype={_dt(dt)})",
                 f"{t}[...] = nl.load({name}.reshape((1, {W}))[nl.arange(1)[:, None], {c}]{mask})"]
    else:
        lines = [line]
    if hoisted:
        b.hoist.extend(lines)
        scope = -1
    else:
        b.secs[d].extend(lines)
        scope = d
    b.api("load:row" + ("_hoisted" if hoisted else ""))
    if b.coin(0.5):
        tb = b.fresh("gb")
        (b.hoist if hoisted else b.secs[d]).append(f"{tb} = {t}.broadcast_to(({P}, {F}))")
        b.pool.append(Val(tb, (P, F), dt, scope=scope, fresh=False, is_view=True))
    else:
        b.pool.append(Val(t, (1, F), dt, scope=scope, fresh=False))


# ----------------------------------------------------------------------------------------- ops

def _mask_for(b: _Builder, v_shape: tuple) -> str | None:
    """A mask for an instruction over `v_shape`, when the frame is ragged (random)."""
    if b.init_full or len(v_shape) != 2:
        return None
    if v_shape == (b.P, b.F) and b.live:
        m = b.live
    elif v_shape[0] == b.P and b.live_r:
        m = b.live_r
    else:
        return None
    return m if b.coin(0.5) else None


def _kw(**kw) -> str:
    parts = [f"{k}={v}" for k, v in kw.items() if v is not None]
    return (", " + ", ".join(parts)) if parts else ""


def _live_pool(b: _Builder, d: int) -> list[Val]:
    return [v for v in b.pool if v.scope <= d]


def _cur(b: _Builder, d: int) -> Val:
    return _live_pool(b, d)[-1]


def _partners(b: _Builder, d: int, v: Val, exact: bool = False) -> list[Val]:
    """Values that broadcast against v (same p; f equal or 1), v itself included."""
    out = []
    for w in _live_pool(b, d):
        if w.p != v.p and not (w.p == 1 and not exact and w.two_d):
            continue
        if exact:
            if w.shape == v.shape:
                out.append(w)
        elif w.f == v.f or w.f == 1 or v.f == 1:
            out.append(w)
    return out


def _per_partition(b: _Builder, d: int, v: Val) -> list[Val]:
    return [w for w in _live_pool(b, d) if w.p == v.p and w.f == 1]


def _scalar_for(b: _Builder, dts: list[str], int_only: bool = False):
    if int_only or (all(_is_int(x) for x in dts) and b.coin(0.7)):
        return b.pick(INT_SCALARS + BOOL_SCALARS[:1] if not int_only else INT_SCALARS[:12])
    return b.pick(FLOAT_SCALARS + [2, -3])


def _emit(b: _Builder, d: int, line: str) -> None:
    if b.post_mode and d == b.final_d_post:
        b.post[d].append(line)
    else:
        b.secs[d].append(line)


def _new(b: _Builder, d: int, base: str, shape, dt: str, space: str = "sbuf") -> Val:
    v = Val(b.fresh(base), tuple(shape), dt, space=space, scope=d)
    b.pool.append(v)
    b.dtypes_used.add(dt)
    return v


def _as_2d(b: _Builder, v: Val, d: int) -> Val:
    """(p,) -> (p, 1) by a copy into a [p, 1] tile."""
    w = Val(b.fresh("c"), (v.p, 1), v.dtype, scope=d)
    _emit(b, d, f"{w.name} = nl.ndarray(({v.p}, 1), dtype={_dt(v.dtype)})")
    _emit(b, d, f"{w.name}[...] = nl.copy({v.name})")
    b.pool.append(w)
    return w


def _one_op(b: _Builder, d: int, post: bool = False) -> None:
    if post:
        b.post_mode = True
        b.final_d_post = d
    cur = _cur(b, d)
    kinds = [k for k in OPS if _applicable(b, d, k, cur)]
    weights = [OPS[k] for k in kinds]
    # weighted choice through integers (shrinks towards the first kind)
    total = sum(weights)
    x = b.integer(0, total - 1)
    for k, w in zip(kinds, weights):
        if x < w:
            break
        x -= w
    b.ops_used.append(k)
    GEN[k](b, d, cur)


def _applicable(b: _Builder, d: int, k: str, cur: Val) -> bool:
    two = cur.two_d
    p, f = cur.p, cur.f
    if k in ("reduce3d",):
        return two and f >= 4 and any(f % a == 0 for a in (2, 3, 4, 5)) and p > 0
    if k in ("scan", "affine_select", "transpose", "bn_stats", "max8", "concat", "inplace", "copy_predicated",
             "activation_reduce", "tensor_scalar_reduce", "hbm_roundtrip", "var", "scalar_tensor_tensor"):
        if not two:
            return False
    if k == "matmul":
        return two and f <= 512 and p >= 1 and b.psum_tiles < 3
    if k == "transpose":
        return p <= 128 and f <= 128 and b.psum_tiles < 3
    if k == "bn_stats":
        return f <= 512 and not _is_int(cur.dtype)
    if k == "max8":
        return f >= 8 and not _is_int(cur.dtype)
    if k == "invert":
        return _is_int(cur.dtype) and cur.dtype != "bool"
    if k == "inplace":
        return cur.fresh and not cur.is_view and cur.space == "sbuf"
    if k == "view":
        return two and (f >= 2 or p >= 2)
    if k == "concat":
        return f >= 2
    if k == "hbm_roundtrip":
        return not b.post_mode
    return True


# ---- elementwise

def _op_binary(b, d, cur):
    partners = _partners(b, d, cur)
    other = b.pick(partners)
    x, y = (cur, other) if b.coin(0.7) else (other, cur)
    both_int = _is_int(x.dtype) and _is_int(y.dtype)
    op = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if both_int else []))
    shape = _bshape(x.shape, y.shape)
    dtype = _out_cast(b, [op]) if b.coin(0.25) else None
    mask = _mask_for(b, shape)
    style = b.pick(["nl", "operator", "nisa"])
    if style == "operator" and (op not in OPERATORS or dtype or mask):
        style = "nl"
    if style == "nisa" and mask:
        style = "nl"
    if style == "nl":
        expr = f"nl.{op}({x.name}, {y.name}{_kw(dtype=_dtk(dtype), mask=mask)})"
    elif style == "operator":
        expr = f"{x.name} {OPERATORS[op]} {y.name}"
    else:
        expr = f"nisa.tensor_tensor({x.name}, {y.name}, op=np.{op}{_kw(dtype=_dtk(dtype))})"
    b.api(f"binary:{style}")
    out_dt = dtype or D.promote(x.dtype, y.dtype)
    v = _new(b, d, "b", shape, out_dt)
    _emit(b, d, f"{v.name} = {expr}")


def _bshape(a, c):
    a2 = tuple(a) + (1,) * (2 - len(a)) if len(a) < len(c) else tuple(a)
    c2 = tuple(c) + (1,) * (len(a) - len(c)) if len(c) < len(a) else tuple(c)
    return tuple(max(x, y) for x, y in zip(a2, c2))


def _op_binary_scalar(b, d, cur):
    int_tile = _is_int(cur.dtype)
    op = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if int_tile else []))
    int_only = op in INT_ONLY_BINOPS
    s = _scalar_for(b, [cur.dtype], int_only=int_only)
    if int_only and op in ("left_shift", "right_shift"):
        s = b.pick([0, 1, 3, 7, 8, 15, 16, 31, 33, 63, 64, 100])
    reverse = b.coin(0.3)
    dtype = _out_cast(b, [op]) if b.coin(0.2) else None
    mask = _mask_for(b, cur.shape)
    style = b.pick(["nl", "operator"])
    if style == "operator" and (op not in OPERATORS or dtype or mask or (reverse and op in (
            "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "left_shift", "right_shift"))):
        style = "nl"
    a, c = (_lit(s), cur.name) if reverse else (cur.name, _lit(s))
    if style == "nl":
        expr = f"nl.{op}({a}, {c}{_kw(dtype=_dtk(dtype), mask=mask)})"
    else:
        expr = f"{a} {OPERATORS[op]} {c}"
    b.api(f"binary_scalar:{style}{':rev' if reverse else ''}")
    out_dt = dtype or D.promote(cur.dtype, _scalar_dt(s))
    v = _new(b, d, "bs", cur.shape, out_dt)
    _emit(b, d, f"{v.name} = {expr}")


def _op_unary(b, d, cur):
    fn = b.pick(UNARY)
    dtype = b.cast_dtype() if b.coin(0.25) else None
    mask = _mask_for(b, cur.shape)
    style = b.pick(["nl", "numpy"]) if fn in ("exp", "log", "tanh", "sqrt", "square", "abs", "negative", "sin",
                                                "cos", "tan", "arctan", "sign") and not dtype and not mask else "nl"
    if style == "numpy":
        expr = f"np.{fn}({cur.name})"
    else:
        expr = f"nl.{fn}({cur.name}{_kw(dtype=_dtk(dtype), mask=mask)})"
    b.api(f"unary:{style}")
    v = _new(b, d, "u", cur.shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = {expr}")


def _op_invert(b, d, cur):
    style = b.pick(["nl", "operator"])
    expr = f"nl.invert({cur.name})" if style == "nl" else f"~{cur.name}"
    b.api(f"invert:{style}")
    v = _new(b, d, "inv", cur.shape, cur.dtype)
    _emit(b, d, f"{v.name} = {expr}")


def _pp_operand(b, d, cur, int_only=False):
    """A scalar or a [P, 1] tile operand for tensor_scalar-like ops: (text, dtype)."""
    cands = _per_partition(b, d, cur) if cur.two_d else []
    if cands and not int_only and b.coin(0.5):
        w = b.pick(cands)
        return w.name, w.dtype
    s = _scalar_for(b, [cur.dtype], int_only=int_only)
    return _lit(s), _scalar_dt(s)


def _op_activation(b, d, cur):
    fn = b.pick(UNARY + ["copy"])
    pp = _per_partition(b, d, cur) if cur.two_d else []
    kw = {}
    if b.coin(0.5):
        if pp and b.coin(0.5):
            kw["scale"] = b.pick(pp).name
        else:
            kw["scale"] = _lit(b.pick([2.0, -1.0, 0.5, 1.0, 1e-3, 3]))
    if pp and b.coin(0.5):
        kw["bias"] = b.pick(pp).name
    dtype = b.cast_dtype() if b.coin(0.25) else None
    mask = _mask_for(b, cur.shape)
    op = b.pick([f"nl.{fn}", f"np.{fn}" if fn in ("exp", "tanh", "sqrt", "abs", "sin") else f"nl.{fn}"])
    expr = f"nisa.activation(op={op}, data={cur.name}{_kw(**kw, dtype=_dtk(dtype), mask=mask)})"
    b.api("activation" + ("+scale" if "scale" in kw else "") + ("+bias" if "bias" in kw else ""))
    v = _new(b, d, "a", cur.shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = {expr}")


def _op_tensor_scalar(b, d, cur):
    int_tile = _is_int(cur.dtype)
    op0 = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if int_tile else []))
    two = b.coin(0.5)
    op1 = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if int_tile else [])) if two else None
    all_int = op0 in INT_ONLY_BINOPS or op1 in INT_ONLY_BINOPS
    if all_int:             # a bitwise/shift op needs the integer path: integer operands, no divide
        op0, op1 = ("add" if op0 == "divide" else op0), ("add" if op1 == "divide" else op1)
    o0, _ = _pp_operand(b, d, cur, int_only=op0 in INT_ONLY_BINOPS or all_int)
    kw = {"op0": f"np.{op0}", "operand0": o0}
    if b.coin(0.3):
        kw["reverse0"] = "True"
    if two:
        o1, _ = _pp_operand(b, d, cur, int_only=op1 in INT_ONLY_BINOPS or all_int)
        kw.update(op1=f"np.{op1}", operand1=o1)
        if b.coin(0.3):
            kw["reverse1"] = "True"
    dtype = _out_cast(b, [op0] + ([op1] if two else [])) if b.coin(0.3) else None
    mask = _mask_for(b, cur.shape)
    engine = b.pick([None, None, "nisa.vector_engine", "nisa.gpsimd_engine", "nisa.scalar_engine"])
    expr = f"nisa.tensor_scalar(data={cur.name}{_kw(**kw, dtype=_dtk(dtype), mask=mask, engine=engine)})"
    pp_names = {w.name for w in _per_partition(b, d, cur)} if cur.two_d else set()
    b.api(f"tensor_scalar:{'two' if two else 'one'}" + (":rev" if "reverse0" in kw or "reverse1" in kw else "")
          + (":pp" if any(kw.get(k) in pp_names for k in ("operand0", "operand1")) else ""))
    v = _new(b, d, "ts", cur.shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = {expr}")


def _op_stt(b, d, cur):
    same = [w for w in _live_pool(b, d) if w.shape == cur.shape]
    other = b.pick(same)
    int_pair = _is_int(cur.dtype) and _is_int(other.dtype)
    op0 = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if int_pair else []))
    op1 = b.pick(FLOAT_BINOPS + (INT_ONLY_BINOPS if int_pair else []))
    all_int = op0 in INT_ONLY_BINOPS or op1 in INT_ONLY_BINOPS
    if all_int:
        op0, op1 = ("add" if op0 == "divide" else op0), ("add" if op1 == "divide" else op1)
    o0, _ = _pp_operand(b, d, cur, int_only=op0 in INT_ONLY_BINOPS or all_int)
    kw = {"op0": f"np.{op0}", "operand0": o0, "op1": f"np.{op1}", "operand1": other.name}
    if b.coin(0.3):
        kw["reverse0"] = "True"
    if b.coin(0.3):
        kw["reverse1"] = "True"
    dtype = _out_cast(b, [op0, op1]) if b.coin(0.25) else None
    mask = _mask_for(b, cur.shape)
    b.api("scalar_tensor_tensor")
    v = _new(b, d, "stt", cur.shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = nisa.scalar_tensor_tensor(data={cur.name}"
                f"{_kw(**kw, dtype=_dtk(dtype), mask=mask)})")


def _op_where(b, d, cur):
    partners = _partners(b, d, cur)
    cond = b.pick(partners)
    if b.coin(0.5):
        cmp_with = b.pick(partners)
        c = _new(b, d, "cond", _bshape(cond.shape, cmp_with.shape), "bool")
        opn = b.pick(["greater", "less_equal", "equal", "not_equal"])
        _emit(b, d, f"{c.name} = nl.{opn}({cond.name}, {cmp_with.name}, dtype=nl.bool_)")
        cond = c
    xs = []
    for _ in range(2):
        if b.coin(0.35):
            s = _scalar_for(b, [cur.dtype])
            xs.append((_lit(s), _scalar_dt(s), None))
        else:
            w = b.pick(_partners(b, d, cond) or [cur])
            xs.append((w.name, w.dtype, w.shape))
    shapes = [cond.shape] + [s for _, _, s in xs if s is not None]
    shape = shapes[0]
    for s in shapes[1:]:
        shape = _bshape(shape, s)
    dtype = b.cast_dtype() if b.coin(0.25) else None
    mask = _mask_for(b, shape)
    b.api("where" + ("+scalar" if any(s is None for _, _, s in xs) else ""))
    out_dt = dtype or D.promote(xs[0][1], xs[1][1])
    v = _new(b, d, "w", shape, out_dt)
    _emit(b, d, f"{v.name} = nl.where({cond.name}, {xs[0][0]}, {xs[1][0]}{_kw(dtype=_dtk(dtype), mask=mask)})")


def _op_iota(b, d, cur):
    p, f = cur.p, cur.f
    a = b.pick([1, 0, 2, -1, 3, 1000])
    c = b.pick([1, 0, -1, 5, p])
    k = b.pick([0, 0, 7, -3, 2 ** 20])
    terms = [f"nl.arange({p})[:, None] * {a}", f"nl.arange({f})[None, :] * {c}"]
    if k:
        terms.append(str(k))
    loopvars = [l[0] for l in b.loops[:d]]
    if loopvars and b.coin(0.5):
        terms.append(f"{b.pick(loopvars)} * {b.pick([1, 5, -2])}")
    if b.grid and b.coin(0.3):
        terms.append("pid0 * 11")
    dt = b.pick(["int32", "float32", "int16", "uint8", "bfloat16", "int8", "float16"])
    mask = _mask_for(b, (p, f))
    b.api("iota")
    v = _new(b, d, "io", (p, f), dt)
    _emit(b, d, f"{v.name} = nisa.iota({' + '.join(terms)}, dtype={_dt(dt)}{_kw(mask=mask)})")


def _op_affine_select(b, d, cur):
    p, f = cur.p, cur.f
    lhs = f"nl.arange({p})[:, None] * {b.pick([1, 2, -1])}"
    loopvars = [l[0] for l in b.loops[:d]]
    if loopvars and b.coin(0.5):
        lhs += f" + {b.pick(loopvars)} * {p}"
    rhs = f"nl.arange({f})[None, :] * {b.pick([1, 3, 0])} + {b.pick([0, 1, -5, f // 2])}"
    cmp = b.pick([">=", "<", ">", "<=", "==", "!="])
    val = b.pick([float(nl.fp32.min), 0.0, -1.0, 7.5, float("-inf"), float("nan")])
    dtype = b.cast_dtype() if b.coin(0.2) else None
    mask = _mask_for(b, cur.shape)
    b.api("affine_select")
    v = _new(b, d, "as", cur.shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = nisa.affine_select(pred=({lhs} {cmp} {rhs}), on_true_tile={cur.name}, "
                f"on_false_value={_lit(val)}{_kw(dtype=_dtk(dtype), mask=mask)})")


def _op_scan(b, d, cur):
    same = [w for w in _live_pool(b, d) if w.shape == cur.shape]
    other = b.pick(same)
    d0, d1 = (cur, other) if b.coin(0.6) else (other, cur)
    op0, op1 = b.pick(SCAN_OPS), b.pick(SCAN_OPS)
    pp = _per_partition(b, d, cur)
    init = b.pick(pp).name if pp and b.coin(0.5) else _lit(b.pick([0.0, 1.0, -2.0, 0.5]))
    kw = {"initial": init, "op0": f"np.{op0}", "op1": f"np.{op1}"}
    if b.coin(0.2):
        kw["reverse0"] = "True"
    if b.coin(0.2):
        kw["reverse1"] = "True"
    dtype = b.cast_dtype() if b.coin(0.25) else None
    mask = _mask_for(b, cur.shape)
    b.api("scan" + (":pp_init" if init in {w.name for w in pp} else ""))
    v = _new(b, d, "sc", cur.shape, dtype or D.promote(d0.dtype, d1.dtype))
    _emit(b, d, f"{v.name} = nisa.tensor_tensor_scan({d0.name}, {d1.name}"
                f"{_kw(**kw, dtype=_dtk(dtype), mask=mask)})")


# ---- reductions

def _op_reduce(b, d, cur):
    if not cur.two_d:
        cur = _as_2d(b, cur, d)
    keep = b.coin(0.5)
    mask = _mask_for(b, cur.shape)
    dtype = b.cast_dtype() if b.coin(0.25) else None
    axis = b.pick(["1", "[1]", "-1", "(1,)"])
    kd = "True" if keep else None
    if b.coin(0.5):
        fn = b.pick(NL_REDUCTIONS)
        expr = f"nl.{fn}({cur.name}, axis={axis}{_kw(dtype=_dtk(dtype), mask=mask, keepdims=kd)})"
        out_dt = dtype or ("bool" if fn == "all" else cur.dtype)
        b.api(f"reduce:nl.{fn}")
    else:
        op = b.pick(REDUCE_OPS)
        uf = {"add": "np.add", "maximum": "np.max", "minimum": "np.min", "multiply": "np.multiply",
              "logical_and": "np.logical_and", "logical_or": "np.logical_or"}[op]
        neg = b.coin(0.3)
        expr = (f"nisa.tensor_reduce({uf}, {cur.name}, axis={axis}"
                f"{_kw(negate='True' if neg else None, keepdims=kd, dtype=_dtk(dtype), mask=mask)})")
        out_dt = dtype or cur.dtype
        b.api("reduce:nisa" + (":negate" if neg else ""))
    v = _new(b, d, "r", (cur.p, 1) if keep else (cur.p,), out_dt)
    _emit(b, d, f"{v.name} = {expr}")


def _op_reduce3d(b, d, cur):
    p, f = cur.p, cur.f
    a = b.pick([x for x in (2, 3, 4, 5) if f % x == 0])
    c = f // a
    style = b.pick(["arange", "mgrid"])
    v3 = b.fresh("v3_")
    if style == "arange":
        _emit(b, d, f"{v3} = {cur.name}[nl.arange({p})[:, None, None], nl.arange({a})[None, :, None] * {c} + "
                    f"nl.arange({c})[None, None, :]]")
    else:
        g = b.fresh("g3_")
        _emit(b, d, f"{g}p, {g}a, {g}c = nl.mgrid[0:{p}, 0:{a}, 0:{c}]")
        _emit(b, d, f"{v3} = {cur.name}[{g}p, {g}a * {c} + {g}c]")
    axes = b.pick(["2", "[1, 2]", "1"])
    fn = b.pick(["sum", "max", "min", "mean"])
    dtype = b.cast_dtype() if b.coin(0.2) else None
    b.api(f"reduce3d:{style}:axis{axes}")
    shape = {"2": (p, a), "[1, 2]": (p,), "1": (p, c)}[axes]
    v = _new(b, d, "r3_", shape, dtype or cur.dtype)
    _emit(b, d, f"{v.name} = nl.{fn}({v3}, axis={axes}{_kw(dtype=_dtk(dtype))})")


def _op_var(b, d, cur):
    dtype = b.pick([None, "float32", "bfloat16"])
    b.api("var")
    v = _new(b, d, "var", (cur.p,), dtype or cur.dtype)
    _emit(b, d, f"{v.name} = nl.var({cur.name}, axis=1{_kw(dtype=_dtk(dtype))})")


def _op_bn_stats(b, d, cur):
    mask = _mask_for(b, cur.shape)
    st_ = _new(b, d, "bst", (cur.p, 6), "float32")
    _emit(b, d, f"{st_.name} = nisa.bn_stats({cur.name}, dtype=nl.float32{_kw(mask=mask)})")
    if b.coin(0.7):
        mv = _new(b, d, "bag", (cur.p, 2), b.pick(["float32", "bfloat16"]))
        _emit(b, d, f"{mv.name} = nisa.bn_aggr({st_.name}, dtype={_dt(mv.dtype)})")
        b.api("bn_stats+bn_aggr")
    else:
        b.api("bn_stats")


def _op_max8(b, d, cur):
    mask = _mask_for(b, cur.shape)
    m8 = _new(b, d, "m8_", (cur.p, 8), cur.dtype)
    _emit(b, d, f"{m8.name} = nisa.max8(src={cur.name}{_kw(mask=mask)})")
    if b.coin(0.6):
        ix = _new(b, d, "ix", (cur.p, 8), "uint32")
        _emit(b, d, f"{ix.name} = nisa.nc_find_index8(data={cur.name}, vals={m8.name})")
        b.api("max8+find_index8")
    else:
        b.api("max8")


def _op_tensor_scalar_reduce(b, d, cur):
    op0 = b.pick(["add", "multiply", "maximum", "subtract"])
    o0, _ = _pp_operand(b, d, cur)
    rop = b.pick(["np.add", "np.max", "np.min"])
    r = b.fresh("rr")
    rdt = b.pick(["float32", "bfloat16"])
    _emit(b, d, f"{r} = nl.ndarray(({cur.p}, 1), dtype={_dt(rdt)})")
    v = _new(b, d, "tsr", cur.shape, cur.dtype)
    _emit(b, d, f"{v.name} = nisa.tensor_scalar_reduce(data={cur.name}, op0=np.{op0}, operand0={o0}, "
                f"reduce_op={rop}, reduce_res={r})")
    b.pool.append(Val(r, (cur.p, 1), rdt, scope=d))
    b.api("tensor_scalar_reduce")


def _op_activation_reduce(b, d, cur):
    fn = b.pick(["exp", "tanh", "copy", "square", "sigmoid"])
    rop = b.pick(["np.add", "np.max"])
    r = b.fresh("ar")
    _emit(b, d, f"{r} = nl.ndarray(({cur.p}, 1), dtype=nl.float32)")
    v = _new(b, d, "acr", cur.shape, cur.dtype)
    _emit(b, d, f"{v.name} = nisa.activation_reduce(op=nl.{fn}, data={cur.name}, reduce_op={rop}, reduce_res={r})")
    b.pool.append(Val(r, (cur.p, 1), "float32", scope=d))
    b.api("activation_reduce")


# ---- matmul and transposes

def _op_matmul(b, d, cur):
    p, f = cur.p, cur.f
    M = b.pick([p if p <= 128 else 128, 1, 8, 64, 128, 33])
    kt = b.integer(1, min(3, p))
    narrow = b.coin(0.6)
    wdt = b.pick(MM_NARROW) if narrow else "float32"
    mdt = b.pick(MM_NARROW) if narrow else b.pick(["float32", "tfloat32"])
    if {wdt, mdt} == {"float8_e4m3", "float8_e4m3fn"}:
        mdt = wdt
    form = b.pick(["zeros_acc", "overwrite_then_acc", "materialize", "nl_matmul_T", "nl_matmul"])
    if form in ("materialize", "nl_matmul") and kt > 1:
        form = "zeros_acc"
    if form == "nl_matmul" and (M > 128 or p > 128):
        form = "zeros_acc"
    # operands: stationary [p, M] (a weight input) and moving = cur cast to mdt
    wshape = (M, p) if form == "nl_matmul" else (p, M)
    wname = b.add_input("w", wshape, b.pick([wdt, "float32"]) if wdt != "float32" else "float32")
    w_in_dt = b.inputs[-1].dtype
    wt = b.fresh("wt")
    cast = f", dtype={_dt(wdt)}" if w_in_dt != wdt else ""
    if d > 0 and b.coin(0.5):
        b.hoist.append(f"{wt} = nl.load({wname}{cast})")
        b.api("matmul:hoisted_weights")
    else:
        _emit(b, d, f"{wt} = nl.load({wname}{cast})")
    mv = b.fresh("mv")
    if cur.dtype != mdt or cur.space == "psum" or not cur.two_d:
        style = b.pick(["copy", "tensor_copy", "assign"])
        if style == "copy":
            _emit(b, d, f"{mv} = nl.copy({cur.name}, dtype={_dt(mdt)})")
        elif style == "tensor_copy":
            _emit(b, d, f"{mv} = nisa.tensor_copy({cur.name}, dtype={_dt(mdt)})")
        else:
            _emit(b, d, f"{mv} = nl.ndarray(({p}, {f}), dtype={_dt(mdt)})")
            _emit(b, d, f"{mv}[...] = {cur.name}")
        b.api(f"cast:{style}")
    else:
        mv = cur.name
    bounds = sorted(set([0, p] + [b.integer(1, p - 1) for _ in range(kt - 1)])) if p > 1 else [0, p]
    chunks = list(zip(bounds[:-1], bounds[1:]))
    ps = b.fresh("ps")
    mm = b.pick(["nisa.nc_matmul", "nl.matmul_T"])

    def call(lo, hi):
        sl = "" if (lo, hi) == (0, p) else f"[{lo}:{hi}, :]"
        if mm == "nl.matmul_T":
            return f"nl.matmul({wt}{sl}, {mv}{sl}, transpose_x=True)"
        return f"nisa.nc_matmul({wt}{sl}, {mv}{sl})"

    loop_k = (form == "zeros_acc" and len(chunks) > 1 and p % len(chunks) == 0 and b.depth + 1 <= 2
              and not b.post_mode and b.coin(0.4))
    if form == "zeros_acc":
        _emit(b, d, f"{ps} = nl.zeros(({M}, {f}), nl.float32, buffer=nl.psum)")
        if loop_k:
            kc = p // len(chunks)
            kind = b.pick(["affine_range", "sequential_range"])
            _emit(b, d, f"for k in nl.{kind}({len(chunks)}):")
            fn = "nisa.nc_matmul" if mm == "nisa.nc_matmul" else "nl.matmul"
            extra = ", transpose_x=True" if fn == "nl.matmul" else ""
            _emit(b, d, f"    {ps} += {fn}({wt}[k * {kc}:(k + 1) * {kc}, :], {mv}[k * {kc}:(k + 1) * {kc}, :]{extra})")
        else:
            for lo, hi in chunks:
                _emit(b, d, f"{ps} += {call(lo, hi)}")
    elif form == "overwrite_then_acc":
        _emit(b, d, f"{ps} = nl.ndarray(({M}, {f}), dtype=nl.float32, buffer=nl.psum)")
        lo, hi = chunks[0]
        _emit(b, d, f"{ps}[...] = {call(lo, hi)}")
        for lo, hi in chunks[1:]:
            _emit(b, d, f"{ps} += {call(lo, hi)}")
    elif form == "materialize":
        _emit(b, d, f"{ps} = {call(0, p)}")
    elif form == "nl_matmul_T":
        _emit(b, d, f"{ps} = nl.zeros(({M}, {f}), nl.float32, buffer=nl.psum)")
        for lo, hi in chunks:
            sl = "" if (lo, hi) == (0, p) else f"[{lo}:{hi}, :]"
            _emit(b, d, f"{ps} += nl.matmul({wt}{sl}, {mv}{sl}, transpose_x=True)")
    else:  # nl.matmul(x [M, K], y [K, N]): x goes through a Tensor Engine transpose
        _emit(b, d, f"{ps} = nl.zeros(({M}, {f}), nl.float32, buffer=nl.psum)")
        _emit(b, d, f"{ps} += nl.matmul({wt}, {mv})")
    b.api(f"matmul:{form}:k{len(chunks)}" + (":kloop" if loop_k else "") + f":{mdt}")
    b.psum_tiles += 1
    v = Val(ps, (M, f), "float32", space="psum", scope=d)
    b.pool.append(v)
    if b.coin(0.5):
        c = _new(b, d, "mm", (M, f), b.pick(["float32", "bfloat16", "float16", "int32"]))
        _emit(b, d, f"{c.name} = nl.copy({ps}, dtype={_dt(c.dtype)})")


def _op_transpose(b, d, cur):
    p, f = cur.p, cur.f
    style = b.pick(["nl", "nc_tensor", "nc_vector"] if p <= 32 and f <= 32 else ["nl", "nc_tensor"])
    dtype = b.cast_dtype() if b.coin(0.2) and style == "nl" else None
    src = cur.name if cur.two_d else f"{cur.name}"
    if style == "nl":
        v = _new(b, d, "tr", (f, p), dtype or cur.dtype)
        _emit(b, d, f"{v.name} = nl.transpose({src}{_kw(dtype=_dtk(dtype))})")
    elif style == "nc_tensor":
        v = _new(b, d, "tp", (f, p), cur.dtype, space="psum")
        _emit(b, d, f"{v.name} = nisa.nc_transpose({src}, engine=nisa.tensor_engine)")
        b.psum_tiles += 1
    else:
        v = _new(b, d, "tv", (f, p), cur.dtype)
        _emit(b, d, f"{v.name} = nisa.nc_transpose({src}, engine=nisa.vector_engine)")
    b.api(f"transpose:{style}")


# ---- data movement

def _op_copy(b, d, cur):
    dt = b.cast_dtype()
    style = b.pick(["nl", "nisa", "assign", "assign_view"])
    mask = _mask_for(b, cur.shape)
    if style == "nl":
        v = _new(b, d, "cp", cur.shape, dt)
        _emit(b, d, f"{v.name} = nl.copy({cur.name}, dtype={_dt(dt)}{_kw(mask=mask)})")
    elif style == "nisa":
        eng = b.pick([None, "nisa.vector_engine", "nisa.scalar_engine", "nisa.gpsimd_engine"])
        v = _new(b, d, "cp", cur.shape, dt)
        _emit(b, d, f"{v.name} = nisa.tensor_copy({cur.name}, dtype={_dt(dt)}{_kw(engine=eng, mask=mask)})")
    else:
        shape = cur.shape if cur.two_d else (cur.p, 1)
        space = "nl.psum" if b.coin(0.15) and dt == "float32" and b.psum_tiles < 3 else None
        v = _new(b, d, "cp", shape, dt, space="psum" if space else "sbuf")
        if space:
            b.psum_tiles += 1
        _emit(b, d, f"{v.name} = nl.ndarray({shape}, dtype={_dt(dt)}{_kw(buffer=space)})")
        if style == "assign":
            _emit(b, d, f"{v.name}[...] = {cur.name}")
        else:
            _emit(b, d, f"{v.name}[:, :] = {cur.name}")
    b.api(f"copy:{style}")


def _op_fill(b, d, cur):
    dt = b.cast_dtype()
    val = b.pick([0, 1, -1.5, 3, 255, float("inf"), -0.0, 1e10])
    if _is_int(dt) and isinstance(val, float) and (math.isinf(val) or val != int(val)):
        val = 7
    shape = cur.shape if cur.two_d else (cur.p, 1)
    style = b.pick(["full", "memset", "zeros_like", "ones_like"])
    v = _new(b, d, "fl", shape, dt)
    if style == "full":
        _emit(b, d, f"{v.name} = nl.full({shape}, {_lit(val)}, dtype={_dt(dt)})")
    elif style == "memset":
        _emit(b, d, f"{v.name} = nisa.memset({shape}, {_lit(val)}, {_dt(dt)})")
    elif style == "zeros_like" and cur.two_d and cur.space == "sbuf":
        _emit(b, d, f"{v.name} = nl.zeros_like({cur.name}, dtype={_dt(dt)})")
    else:
        _emit(b, d, f"{v.name} = nl.ones({shape}, dtype={_dt(dt)})")
    b.api(f"fill:{style}")


def _op_view(b, d, cur):
    p, f = cur.p, cur.f
    kinds = []
    if f >= 2:
        kinds += ["col_slice", "col_ds", "col_strided", "col0", "static_step"]
    if p >= 2:
        kinds += ["row_slice"]
    k = b.pick(kinds)
    if k == "col_slice":
        lo = b.integer(0, f - 1)
        hi = b.integer(lo + 1, f)
        expr, shape = f"{cur.name}[:, {lo}:{hi}]", (p, hi - lo)
    elif k == "col_ds":
        size = b.integer(1, f)
        lo = b.integer(0, f - size)
        expr, shape = f"{cur.name}[:, nl.ds({lo}, {size})]", (p, size)
    elif k == "col_strided":
        step = b.pick([2, 3]) if f >= 3 else 2
        off = b.integer(0, step - 1)
        cnt = (f - off + step - 1) // step
        expr, shape = f"{cur.name}[nl.arange({p})[:, None], nl.arange({cnt})[None, :] * {step} + {off}]", (p, cnt)
    elif k == "static_step":
        off = b.integer(0, 1)
        cnt = len(range(off, f, 2))
        expr, shape = f"{cur.name}[:, {off}::2]", (p, cnt)
    elif k == "col0":
        c = b.integer(0, f - 1)
        expr, shape = f"{cur.name}[:, {c}:{c + 1}]", (p, 1)
    else:
        lo = b.integer(0, p - 1)
        hi = b.integer(lo + 1, p)
        expr, shape = f"{cur.name}[{lo}:{hi}, :]", (hi - lo, f)
    b.api(f"view:{k}")
    v = Val(b.fresh("vw"), shape, cur.dtype, space=cur.space, scope=d, fresh=False, is_view=True)
    b.pool.append(v)
    _emit(b, d, f"{v.name} = {expr}")


def _op_inplace(b, d, cur):
    partners = [w for w in _partners(b, d, cur) if w.f in (1, cur.f) and w.p == cur.p]
    other = b.pick(partners)
    op = b.pick(["add", "subtract", "multiply", "maximum"])
    style = b.pick(["aug", "assign_call", "scalar_aug"])
    mask = _mask_for(b, cur.shape)
    if style == "aug" and op in ("add", "subtract", "multiply"):
        sym = {"add": "+=", "subtract": "-=", "multiply": "*="}[op]
        _emit(b, d, f"{cur.name} {sym} {other.name}")
    elif style == "scalar_aug":
        s = _scalar_for(b, [cur.dtype])
        _emit(b, d, f"{cur.name} *= {_lit(s)}" if op == "multiply" else f"{cur.name} += {_lit(s)}")
    else:
        _emit(b, d, f"{cur.name}[...] = nl.{op}({cur.name}, {other.name}{_kw(mask=mask)})")
        style = "assign_call" + ("+mask" if mask else "")
    b.api(f"inplace:{style}")
    # the value changed in place: make it the chain's current value again
    b.pool.remove(cur)
    b.pool.append(cur)


def _op_concat(b, d, cur):
    p, f = cur.p, cur.f
    h = b.integer(1, f - 1)
    same = [w for w in _live_pool(b, d) if w.two_d and w.p == p and w.f >= f - h]
    other = b.pick(same)
    dt = b.pick([cur.dtype, other.dtype, "float32"])
    v = _new(b, d, "cat", (p, f), dt)
    _emit(b, d, f"{v.name} = nl.ndarray(({p}, {f}), dtype={_dt(dt)})")
    _emit(b, d, f"{v.name}[:, 0:{h}] = {cur.name}[:, 0:{h}]")
    fn = b.pick(["exp", "abs"]) if b.coin(0.3) else None
    _emit(b, d, f"{v.name}[:, {h}:{f}] = nl.{fn}({other.name}[:, 0:{f - h}])" if fn
          else f"{v.name}[:, {h}:{f}] = {other.name}[:, 0:{f - h}]")
    b.api("concat")


def _op_copy_predicated(b, d, cur):
    same = [w for w in _live_pool(b, d) if w.shape == cur.shape]
    pred = b.pick(same)
    dst = _new(b, d, "cpd", cur.shape, cur.dtype)
    _emit(b, d, f"{dst.name} = nl.copy({cur.name})")
    if b.coin(0.3):
        src = _lit(_scalar_for(b, [cur.dtype]))
    else:       # src broadcasts to dst's shape
        src = b.pick([w for w in _partners(b, d, cur) if w.f in (1, cur.f)] or [cur]).name
    rev = ", reverse_pred=True" if b.coin(0.3) else ""
    mask = _mask_for(b, cur.shape)
    _emit(b, d, f"nisa.tensor_copy_predicated(src={src}, dst={dst.name}, predicate={pred.name}{rev}{_kw(mask=mask)})")
    b.api("copy_predicated")


def _op_hbm_roundtrip(b, d, cur):
    shape = cur.shape if cur.two_d else (cur.p, 1)
    dt = b.pick([cur.dtype, b.cast_dtype()])
    h = b.fresh("hb")
    _emit(b, d, f"{h} = nl.ndarray({shape}, dtype={_dt(dt)}, buffer=nl.hbm)")
    _emit(b, d, f"nl.store({h}, value={cur.name})")
    out_dt = b.pick([dt, b.cast_dtype()])
    v = _new(b, d, "hl", shape, out_dt)
    _emit(b, d, f"{v.name} = nl.load({h}{_kw(dtype=_dt(out_dt) if out_dt != dt else None)})")
    b.api("hbm_roundtrip")


GEN = {
    "binary": _op_binary, "binary_scalar": _op_binary_scalar, "unary": _op_unary, "activation": _op_activation,
    "tensor_scalar": _op_tensor_scalar, "scalar_tensor_tensor": _op_stt, "reduce": _op_reduce,
    "reduce3d": _op_reduce3d, "var": _op_var, "where": _op_where, "iota": _op_iota,
    "affine_select": _op_affine_select, "scan": _op_scan, "matmul": _op_matmul, "transpose": _op_transpose,
    "copy": _op_copy, "fill": _op_fill, "view": _op_view, "inplace": _op_inplace, "concat": _op_concat,
    "bn_stats": _op_bn_stats, "max8": _op_max8, "copy_predicated": _op_copy_predicated,
    "tensor_scalar_reduce": _op_tensor_scalar_reduce, "activation_reduce": _op_activation_reduce,
    "hbm_roundtrip": _op_hbm_roundtrip, "invert": _op_invert,
}
assert set(GEN) == set(OPS)


# ----------------------------------------------------------------------------------------- outputs

def _store_outputs(b: _Builder, d: int) -> str:
    """Store the chain's last value (and sometimes a second one) into per-block HBM outputs."""
    live = _live_pool(b, d)
    vals = [live[-1]]
    # intermediate values are outputs too (a wrong intermediate must not hide behind a lossy last op)
    others = [v for v in live[:-1] if v.space in ("sbuf", "psum")]
    for _ in range(b.integer(0, min(3, len(others)))):
        v = b.pick(others)
        others.remove(v)
        vals.append(v)
    names = []
    for k, v in enumerate(vals):
        p = v.p
        f = v.f
        src = v.name
        if v.space == "psum" and b.coin(0.5):
            c = b.fresh("o")
            _emit_at(b, d, f"{c} = nl.copy({v.name})")
            src = c
        rows_ragged = b.live_r is not None and p == b.P
        cols_ragged = b.ragged_c and f == b.F and v.two_d
        R = b.n if rows_ragged else b.NB * p
        C = b.W if cols_ragged else b.CB * f
        odt = v.dtype if b.coin(0.7) else b.cast_dtype()
        mutable = k == 0 and b.coin(0.12)
        if mutable:
            name = b.add_input("y", (R, C), odt, mutable=True)
        else:
            name = f"out{k}"
            b.top.append(f"{name} = nl.ndarray(({R}, {C}), dtype={_dt(odt)}, buffer=nl.shared_hbm)")
        r = "ip" if p == b.P else f"nl.arange({p})[:, None]"
        c_ = "jf" if (f == b.F and v.two_d) else f"nl.arange({f})[None, :]"
        ri = r if b.rowblk == "0" else f"{b.rowblk} * {p} + {r}"
        ci = c_ if b.colblk == "0" else f"{b.colblk} * {f} + {c_}"
        masks = []
        if rows_ragged:
            masks.append(b.live_r)
        if cols_ragged:
            masks.append("live_c")
        mask = f", mask={' & '.join(masks)}" if masks else ""
        _emit_at(b, d, f"nl.store({name}[{ri}, {ci}], value={src}{mask})")
        names.append(name)
        b.api("store" + (":mutable" if mutable else "") + (":masked" if mask else "")
              + (":cast" if odt != v.dtype else ""))
    if len(names) == 1:
        return names[0]
    return "(" + ", ".join(names) + ")" if b.coin(0.5) else ", ".join(names)


def _emit_at(b: _Builder, d: int, line: str) -> None:
    if b.post_mode and d == b.final_d_post:
        b.post[d].append(line)
    else:
        b.secs[d].append(line)


# ----------------------------------------------------------------------------------------- sampling

def sample(n: int = 200, **kw) -> list[Case]:
    """n generated cases outside of a test (for coverage statistics and debugging)."""
    from hypothesis import HealthCheck, given, settings
    out: list[Case] = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(kernels(**kw))
    def collect(case):
        out.append(case)

    collect()
    return out


if __name__ == "__main__":
    import sys
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    DEBUG_DROPS = len(sys.argv) > 2
    cases = sample(N)
    print(STATS.summary())
