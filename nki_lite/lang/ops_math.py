"""nl compute ops: elementwise arithmetic, activations, reductions, matmul, transpose, select.

Contract: each public function checks its operands (tiles on-chip, shapes broadcastable with the
partition axis aligned first), picks the output dtype (explicit `dtype=` or NKI promotion), allocates
a fresh SBUF tile and emits exactly the IR instructions that define the result:
`tensor_tensor` (tile op tile), `tensor_scalar` (tile op Python scalar), `activation` (unary math),
`tensor_reduce`, `transpose`, `select` and `nc_matmul` (PSUM result; see tile.PendingMatmul).
nl.loop_reduce is the one deferred op: its result is applied when assigned into its destination.
Every nl function here is also what Tile's operators and numpy hooks call (tile.TILE_OPS).
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import errors
from ..loc import capture_loc
from ..core import ir
from ..core.affine import Affine, axis_var
from ..numerics import alu
from ..core import dtypes as D
from .api import api, spec_of
from .index import Index
from .masks import to_mask
from .memory import ON_CHIP, new_buffer, resolve_dtype
from .opnames import alu_name
from .tile import PendingMatmul, Tile, broadcast_access, broadcast_shapes, compose, drop_axes, provide_tile_ops
from .tracer import attrs, current

_SCALARS = (bool, int, float, np.number, np.bool_)


def _is_scalar(x) -> bool:
    return isinstance(x, _SCALARS)


def tile_operand(x, what: str, op: str, loc) -> Tile:
    if not isinstance(x, Tile):
        if isinstance(x, Index):
            raise errors.make("unsupported", f"operand '{what}' of '{op}' is a symbolic index; index values as tile "
                              "data are not built yet", loc=loc, hint="use nisa.iota to materialise indices")
        raise errors.make("argument", f"operand '{what}' of '{op}' must be a tile, got {type(x).__name__}", loc=loc)
    if x.space not in ON_CHIP:
        raise errors.make("memory_space", f"Expected operand '{what}' of '{op}' to be in address space 'psum|sbuf', "
                          f"but got a tile in 'hbm' instead", loc=loc, hint="nl.load it into SBUF first")
    return x


def require_same_partitions(op: str, operands, loc) -> None:
    """NKI's err_num_partition_mismatch: the nisa instructions need every tile operand to have the same
    number of partitions (nki.errors docs; only the nl functions broadcast over partitions)."""
    tiles = [(what, t) for what, t in operands if isinstance(t, Tile) and t.shape]
    parts = {t.shape[0] for _, t in tiles}
    if len(parts) > 1:
        listed = ", ".join(f"{what}{list(t.shape)}" for what, t in tiles)
        big = builtins.max(tiles, key=lambda wt: wt[1].shape[0])[1]
        what, small = next((w, t) for w, t in tiles if t.shape[0] != big.shape[0])
        target = (big.shape[0],) + tuple(small.shape[1:])
        raise errors.make("shape_mismatch", f"number of partitions (dimension 0 of a tile) mismatch in parameters "
                          f"({listed}) of '{op}': its tile operands must have the same number of partitions",
                          loc=loc, hint=f"broadcast the partition axis explicitly: pass {what}.broadcast_to({target})"
                          " (the nl functions, e.g. nl.add, broadcast over partitions themselves)")


def result_access(shape, dt: str, loc, base: str = "t") -> ir.Access:
    tr = current()
    full = shape if len(shape) >= 2 else tuple(shape) + (1,)
    buf = new_buffer(tr, tuple(full), dt, ir.Space.SBUF, base, loc)
    acc = ir.Access.full(buf)
    if len(shape) < 2:
        acc = ir.Access(acc.buffer, (Affine.var(axis_var(0)), Affine(0)), tuple(shape))
    return acc


def scalar_imm(v) -> ir.Imm:
    dt = D.scalar_dtype(v)             # numpy scalars promote by their own dtype
    if isinstance(v, np.generic):
        v = v.item()
    return ir.Imm(v, dt)


# ---------------------------------------------------------------- elementwise binary

def elementwise(opname: str, x, y, dtype=None, mask=None, out: Tile | None = None, loc=None, engine=None):
    loc = loc or capture_loc(3)
    tr = current()
    if _is_scalar(x) and _is_scalar(y):
        raise errors.make("argument", f"'{opname}' needs at least one tile operand", loc=loc)
    if opname not in alu.ALL_OPS:
        raise errors.make("unsupported", f"elementwise op '{opname}' is not built in nki_lite", loc=loc)
    if _is_scalar(x) or _is_scalar(y):
        tile_, scal, reverse = (y, x, True) if _is_scalar(x) else (x, y, False)
        t = tile_operand(tile_, "x", opname, loc)
        imm = scalar_imm(scal)
        dt = (out.dtype_name if out is not None else resolve_dtype(dtype, loc) if dtype is not None
              else _int_result(opname, (t.dtype_name, imm.dtype), D.promote(t.dtype_name, imm.dtype)))
        check_int_only(opname, (t.dtype_name, imm.dtype, dt), loc)
        dst = out.access if out is not None else result_access(t.shape, dt, loc)
        src = broadcast_access(t.access, dst.shape, "x")
        tr.emit(ir.Instr("tensor_scalar", (dst,), (src, imm),
                         attrs(op0=opname, reverse0=reverse, engine=engine or "vector",
                               engine_auto=True if engine is None else None),
                         to_mask(mask, dst.shape, loc), loc))
        return out if out is not None else Tile(tr, dst, dt)
    a = tile_operand(x, "x", opname, loc)
    b = tile_operand(y, "y", opname, loc)
    shape = out.shape if out is not None else broadcast_shapes(a.shape, b.shape)
    dt = (out.dtype_name if out is not None else resolve_dtype(dtype, loc) if dtype is not None
          else _int_result(opname, (a.dtype_name, b.dtype_name), D.promote(a.dtype_name, b.dtype_name)))
    check_int_only(opname, (a.dtype_name, b.dtype_name, dt), loc)
    dst = out.access if out is not None else result_access(shape, dt, loc)
    tr.emit(ir.Instr("tensor_tensor", (dst,), (broadcast_access(a.access, shape, "x"),
                                               broadcast_access(b.access, shape, "y")),
                     attrs(op=opname, engine=engine or "vector"), to_mask(mask, shape, loc), loc))
    return out if out is not None else Tile(tr, dst, dt)


def check_int_only(opname: str, dts, loc) -> None:
    if opname in alu.INT_ONLY and not builtins.all(D.INFO[d].is_int for d in dts):
        raise errors.make("dtype", f"bitwise op '{opname}' needs integer operands and an integer result, got "
                          f"{', '.join(dts)}", loc=loc, hint="cast with nl.copy(x, dtype=nl.int32) or pass an "
                          "integer dtype=")


def _int_result(opname: str, dts, dt: str) -> str:
    """Bitwise ops on integers stay integers: where NKI's promotion of two integer types gives
    float32 ((int32, uint32), (uint32, int16), ...), use the wider integer operand's type."""
    if (opname in alu.INT_ONLY and not D.INFO[dt].is_int
            and builtins.all(D.INFO[d].is_int for d in dts)):
        return builtins.max(dts, key=lambda d: (D.INFO[d].bits, D.INFO[d].kind == "u"))
    return dt


def _binary(name):
    def fn(x, y, *, dtype=None, mask=None):
        return elementwise(name, x, y, dtype, mask)
    fn.__doc__ = f"nl.{name}(x, y, *, dtype=None, mask=None): elementwise {name} (NKI broadcasting)."
    return api(f"nl.{name}", ignored=("max_free_vec_size",))(fn)


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
fmod = _binary("fmod")
mod = _binary("mod")
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
less = _binary("less")
less_equal = _binary("less_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")


@api("nl.power")
def power(x, y, *, dtype=None, mask=None):
    raise errors.make("unsupported", "nl.power is not built yet", loc=capture_loc(2),
                      hint="use nl.multiply for integer powers, or nl.exp(y * nl.log(x))")


# ---------------------------------------------------------------- unary (activation functions)

def activation_tile(func: str, x, dtype, mask, *, bias=None, scale=1.0, loc=None, opname=None) -> Tile:
    tr = current()
    loc = loc or capture_loc(3)
    t = tile_operand(x, "x", opname or func, loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    ins: list = [t.access]
    scale_attr = None
    require_same_partitions(f"nisa.{opname}" if opname else func, (("data", t), ("bias", bias), ("scale", scale)), loc)
    if isinstance(scale, Tile):
        ins.append(broadcast_access(tile_operand(scale, "scale", "activation", loc).access, t.shape, "scale"))
        scale_attr = "tile"
    elif scale is not None and float(scale) != 1.0:
        scale_attr = float(scale)
    bias_attr = None
    if bias is not None:
        if not isinstance(bias, Tile):
            raise errors.make("dtype", "activation bias must be a [P, 1] tile of float32/float16/bfloat16",
                              loc=loc, hint="create it with nl.full((P, 1), value, nl.float32)")
        ins.append(broadcast_access(tile_operand(bias, "bias", "activation", loc).access, t.shape, "bias"))
        bias_attr = "tile"
    tr.emit(ir.Instr("activation", (dst,), tuple(ins),
                     attrs(func=func, scale=scale_attr, bias=bias_attr, engine="scalar"),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


def _unary(func):
    def fn(x, *, dtype=None, mask=None):
        return activation_tile(func, x, dtype, mask)
    fn.__doc__ = f"nl.{func}(x, *, dtype=None, mask=None): elementwise {func} (nki_lite fp32 algorithm)."
    return api(f"nl.{func}")(fn)


exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
rsqrt = _unary("rsqrt")
sqrt = _unary("sqrt")
square = _unary("square")
reciprocal = _unary("reciprocal")
abs = _unary("abs")  # noqa: A001 - NKI's name
negative = _unary("negative")
gelu = _unary("gelu")
gelu_apprx_tanh = _unary("gelu_apprx_tanh")
silu = _unary("silu")
silu_dx = _unary("silu_dx")
softplus = _unary("softplus")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
arctan = _unary("arctan")
mish = _unary("mish")
sign = _unary("sign")
floor = _unary("floor")   # NKI lists trunc/floor/ceil among nl's math ops (api/nki.language.rst)
ceil = _unary("ceil")
trunc = _unary("trunc")


@api("nl.invert")
def invert(x, *, dtype=None, mask=None):
    """nl.invert: bitwise NOT of an integer tile (x ^ all-ones)."""
    loc = capture_loc(2)
    t = tile_operand(x, "x", "invert", loc)
    if not D.INFO[t.dtype_name].is_int or t.dtype_name == "bool":
        raise errors.make("dtype", f"nl.invert needs an integer tile, got {t.dtype_name}", loc=loc,
                          hint="nl.invert on bool is wrong on hardware too; use int8 or nl.logical_not")
    return elementwise("bitwise_xor", t, -1, dtype or t.dtype, mask, loc=loc)


@api("nl.copy")
def copy(x, *, dtype=None, mask=None) -> Tile:
    """nl.copy: a new tile with x's values (cast to dtype)."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(x, "x", "copy", loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access(t.shape, dt, loc)
    # engine_auto: NKI's compiler picks the engine of an nl-level op (lower/cost/engines.py)
    tr.emit(ir.Instr("tensor_copy", (dst,), (t.access,), attrs(engine="vector", engine_auto=True),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


# ---------------------------------------------------------------- reductions

def _axes(axis, ndim: int, loc) -> tuple[int, ...]:
    if axis is None:
        axes = tuple(range(1, ndim))
    elif isinstance(axis, (int, np.integer)):
        axes = (int(axis),)
    else:
        axes = tuple(int(a) for a in axis)
    axes = tuple(sorted(a + ndim if a < 0 else a for a in axes))
    if not axes or builtins.any(a <= 0 or a >= ndim for a in axes) or len(set(axes)) != len(axes):
        raise errors.make("shape_mismatch", f"reduction axis {axis} is invalid for a tile of rank {ndim}: NKI reduces "
                          "along free axes (1..rank-1) only", loc=loc,
                          hint="transpose the tile to put the reduced axis on the free dimension")
    return axes


def reduce_tile(op: str, x, axis, dtype, mask, keepdims: bool, negate: bool = False, loc=None,
                what: str = "reduce") -> Tile:
    tr = current()
    loc = loc or capture_loc(3)
    t = tile_operand(x, "x", what, loc)
    axes = _axes(axis, len(t.shape), loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    kept = tuple(1 if a in axes else n for a, n in enumerate(t.shape))
    dst = result_access(kept, dt, loc)
    tr.emit(ir.Instr("tensor_reduce", (dst,), (t.access,),
                     attrs(op=op, axes=axes, negate=negate or None, engine="vector"),
                     to_mask(mask, t.shape, loc), loc))
    res = Tile(tr, dst, dt)
    if keepdims:
        return res
    return drop_axes(res, axes)


def _reduction(op, name):
    def fn(x, axis=None, *, dtype=None, mask=None, keepdims=False):
        return reduce_tile(op, x, axis, dtype, mask, keepdims, what=name)
    fn.__doc__ = f"nl.{name}(x, axis, *, dtype=None, mask=None, keepdims=False): reduce along free axes."
    return api(f"nl.{name}")(fn)


sum = _reduction("add", "sum")  # noqa: A001
max = _reduction("maximum", "max")  # noqa: A001
min = _reduction("minimum", "min")  # noqa: A001
prod = _reduction("multiply", "prod")


@api("nl.all")
def all(x, axis=None, *, dtype=None, mask=None, keepdims=False):  # noqa: A001 - NKI's name
    """nl.all: whether all elements along the free axes are nonzero (bool by default)."""
    return reduce_tile("logical_and", x, axis, dtype if dtype is not None else "bool", mask, keepdims, what="all")


@api("nl.mean")
def mean(x, axis=None, *, dtype=None, mask=None, keepdims=False):
    """nl.mean: fp32 sum in nki_lite's reduction order, then one fp32 division by the count."""
    loc = capture_loc(2)
    t = tile_operand(x, "x", "mean", loc)
    axes = _axes(axis, len(t.shape), loc)
    n = int(np.prod([t.shape[a] for a in axes]))
    s = reduce_tile("add", t, axes, "float32", mask, True, loc=loc, what="mean")
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    res = elementwise("divide", s, float(n), dt, None, loc=loc)
    if keepdims:
        return res
    return drop_axes(res, axes)


# ---------------------------------------------------------------- layout and selection

@api("nl.broadcast_to")
def broadcast_to(src, shape) -> Tile:
    """nl.broadcast_to: a broadcast view of src with `shape` (no data movement in nki_lite)."""
    loc = capture_loc(2)
    if not isinstance(src, Tile):
        raise errors.make("argument", "nl.broadcast_to needs a tile", loc=loc)
    return src.view_of(broadcast_access(src.access, tuple(int(s) for s in shape), "src"))


@api("nl.transpose")
def transpose(x, *, dtype=None, mask=None, engine=None) -> Tile:
    """nl.transpose: 2-D partition/free transpose (exact data movement; cast to dtype)."""
    tr = current()
    loc = capture_loc(2)
    t = tile_operand(x, "x", "transpose", loc)
    if len(t.shape) != 2:
        raise errors.make("rank", f"transpose takes a 2-D tile, got shape {t.shape}", loc=loc)
    dt = resolve_dtype(dtype, loc) if dtype is not None else t.dtype_name
    dst = result_access((t.shape[1], t.shape[0]), dt, loc)
    tr.emit(ir.Instr("transpose", (dst,), (t.access,), attrs(engine=engine or "tensor"),
                     to_mask(mask, dst.shape, loc), loc))
    return Tile(tr, dst, dt)


@api("nl.where")
def where(condition, x, y, *, dtype=None, mask=None) -> Tile:
    """nl.where: condition ? x : y elementwise (x / y may be Python numbers)."""
    tr = current()
    loc = capture_loc(2)
    c = tile_operand(condition, "condition", "where", loc)
    tiles = [v for v in (x, y) if isinstance(v, Tile)]
    for v in tiles:
        tile_operand(v, "x", "where", loc)
    shape = broadcast_shapes(c.shape, *[v.shape for v in tiles])
    dts = [v.dtype_name if isinstance(v, Tile) else D.scalar_dtype(v) for v in (x, y)]
    dt = resolve_dtype(dtype, loc) if dtype is not None else D.promote(*dts)
    dst = result_access(shape, dt, loc)
    ins = [broadcast_access(c.access, shape, "condition")]
    for v in (x, y):
        ins.append(broadcast_access(v.access, shape) if isinstance(v, Tile) else scalar_imm(v))
    tr.emit(ir.Instr("select", (dst,), tuple(ins), attrs(engine="vector"), to_mask(mask, shape, loc), loc))
    return Tile(tr, dst, dt)


# ---------------------------------------------------------------- matmul

MATMUL_DTYPES = ("float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")


def sbuf_operand(t: Tile, loc) -> Tile:
    """A matmul operand in SBUF. The Tensor Engine reads only SBUF (NKI's nc_matmul docs), and a
    Tensor Engine nc_transpose writes PSUM; when that transpose's result tile (never assigned into a
    user-declared tile) feeds a matmul, NKI's compiler places it for the matmul — nki-samples' flash
    attention backward does this and runs on hardware — so nki_lite copies it to SBUF (exact, on the
    Vector Engine). A user-declared PSUM tile as operand stays an NL-E301 error (lower/verify_matmul.py)."""
    tr = current()
    if t.space != ir.Space.PSUM or t.access.buffer not in tr.compiler_placed:
        return t
    buf = new_buffer(tr, t.shape, t.dtype_name, ir.Space.SBUF, "placed", loc, raw=True)
    dst = ir.Access.full(buf)
    tr.emit(ir.Instr("tensor_copy", (dst,), (t.access,), attrs(engine="vector"), None, loc))
    return Tile(tr, dst, t.dtype_name)


def matmul_pending(stationary: Tile, moving: Tile, loc, op: str, **extra) -> PendingMatmul:
    tr = current()
    s = sbuf_operand(tile_operand(stationary, "stationary", op, loc), loc)
    m = sbuf_operand(tile_operand(moving, "moving", op, loc), loc)
    rows = double_row_operands(s, m, extra.get("perf_mode"), loc)
    if rows:
        s, m = rows[0]
    if len(s.shape) != 2 or len(m.shape) != 2:
        raise errors.make("matmul_shape", f"{op} operands must be 2-D tiles: stationary {s.shape}, moving {m.shape}",
                          loc=loc)
    if s.shape[0] != m.shape[0]:
        raise errors.make("matmul_shape", f"contraction (partition) dimensions differ: stationary[K={s.shape[0]}, "
                          f"M={s.shape[1]}] vs moving[K={m.shape[0]}, N={m.shape[1]}]", loc=loc)
    for role, t in (("stationary", s), ("moving", m)):
        if t.dtype_name not in MATMUL_DTYPES:
            raise errors.make("dtype", f"{op} {role} dtype {t.dtype_name} is not a Tensor Engine input dtype "
                              f"(allowed: {', '.join(MATMUL_DTYPES)})", loc=loc)
    pending = PendingMatmul(tr, (s.shape[1], m.shape[1]), (s.access, m.access),
                            attrs(engine="tensor", **extra), loc)
    pending.chain = tuple((a.access, b.access) for a, b in rows[1:])
    return pending


def double_row_operands(s: Tile, m: Tile, perf_mode, loc) -> list[tuple[Tile, Tile]]:
    """`perf_mode="double_row*"` with 3-D operands stationary [K, 2, M], moving [K, 2, N] (the FP8
    double-row mode packs two rows' element pairs per PE row; the legacy docs' example and test use
    this layout): the product sums over K and the pair axis, [M, N] = sum_{k,l} s[k,l,:]^T m[k,l,:].
    nki_lite returns the two [K, M] x [K, N] halves, l = 0 then l = 1, emitted as one accumulation
    (that is the fp32 summation order). Any other operands: [] (the 2-D rules apply)."""
    if not (isinstance(perf_mode, str) and perf_mode.startswith("double_row")) or len(s.shape) != 3 \
            or len(m.shape) != 3:
        return []
    if s.shape[1] != 2 or m.shape[1] != 2:
        raise errors.make("matmul_shape", f"perf_mode={perf_mode!r} with 3-D operands takes stationary [K, 2, M] "
                          f"and moving [K, 2, N]; got {s.shape} and {m.shape}", loc=loc)
    tr = current()
    return [(Tile(tr, compose(s.access, (slice(None), l, slice(None)), tr), s.dtype_name),
             Tile(tr, compose(m.access, (slice(None), l, slice(None)), tr), m.dtype_name)) for l in (0, 1)]


@api("nl.matmul")
def matmul(x, y, *, transpose_x=False, mask=None):
    """nl.matmul(x, y, transpose_x): x @ y into a PSUM tile (fp32). With transpose_x=False x is [M, K]
    and is transposed on the Tensor Engine first (an explicit transpose instruction)."""
    loc = capture_loc(2)
    if mask is not None:
        raise errors.make("unsupported", "mask= on nl.matmul (operand masking) is not built yet", loc=loc,
                          hint="slice the operands instead")
    xt = tile_operand(x, "x", "matmul", loc)
    if not transpose_x:
        if len(xt.shape) != 2:
            raise errors.make("matmul_shape", f"matmul x must be 2-D, got {xt.shape}", loc=loc)
        tr = current()
        dst = result_access((xt.shape[1], xt.shape[0]), xt.dtype_name, loc)
        tr.emit(ir.Instr("transpose", (dst,), (xt.access,), attrs(engine="tensor"), None, loc))
        xt = Tile(tr, dst, xt.dtype_name)
    return matmul_pending(xt, y, loc, "matmul")


@api("nl.var")
def var(x, axis, *, dtype=None, mask=None):
    """nl.var: population variance along free axes = mean((x - mean(x))^2), each step in fp32."""
    loc = capture_loc(2)
    t = tile_operand(x, "x", "var", loc)
    axes = _axes(axis, len(t.shape), loc)
    mu = mean(t, axes, dtype="float32", mask=mask, keepdims=True)
    d = elementwise("subtract", t, mu, "float32", mask, loc=loc)
    sq = elementwise("multiply", d, d, "float32", mask, loc=loc)
    out = mean(sq, axes, dtype=dtype if dtype is not None else t.dtype, mask=mask, keepdims=False)
    return out


class fp32:  # noqa: N801 - NKI's spelling
    """FP32 constants (nl.fp32.min is the most negative finite fp32, bit pattern 0xff7fffff)."""
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


@api("nl.logical_not")
def logical_not(x, *, dtype=None, mask=None):
    """nl.logical_not: 1 where x == 0, else 0."""
    return equal(x, 0, dtype=dtype if dtype is not None else "bool", mask=mask)


# ---------------------------------------------------------------- loop_reduce (legacy)

class LoopReduce:
    """A pending nl.loop_reduce (legacy: "the destination tile is also the rhs input to op"): assigned
    into a view, `dst[...] = nl.loop_reduce(x, op=np.add, loop_indices=[i])` is `dst = op(x, dst)` on
    the Vector Engine, cast to `dtype` (default: x's dtype), masked-off positions unwritten.
    loop_indices only tells NKI's compiler which loops it may optimise across; it changes nothing
    here. The result has no value of its own: any other use is an error naming the line."""

    def __init__(self, x, op: str, dtype, mask, loc, loop_indices=()):
        self.x, self.op, self.dtype, self.mask, self.loc = x, op, dtype, mask, loc
        idx = loop_indices if isinstance(loop_indices, (list, tuple)) else [loop_indices]
        self.vars = tuple(v for i in idx if isinstance(i, Index) and len(i.expr.terms) == 1
                          and i.expr.const == 0 for v in i.expr.vars())

    def apply_into(self, view) -> None:
        want = resolve_dtype(self.dtype, self.loc) if self.dtype is not None else self.x.dtype_name
        if want != view.dtype_name:
            raise errors.make("dtype", f"nl.loop_reduce(dtype={want}) is assigned into '{view.name}' of dtype "
                              f"{view.dtype_name}: the destination is also the reduction's input",
                              loc=self.loc, hint="give the destination tile the reduction's dtype")
        self._start(view)
        elementwise(self.op, self.x, view, None, self.mask, out=view, loc=self.loc)

    def _start(self, view) -> None:
        """A destination nothing wrote before (an nl.ndarray: uninitialised on-chip memory) starts at
        op's identity before the outermost loop of loop_indices, as NKI's compiler starts the
        reduction (public compiler-generated kernels, NKIBench's, reduce into nl.ndarray tiles and ran
        on trn1; the docs' equivalent starts from nl.zeros). identity op x == x exactly (add: -0.0).
        A destination indexed by a loop inside that loop is started over that whole dimension."""
        ident = alu.REDUCE_IDENTITY.get(self.op)
        tr = current()
        if ident is None or not self.vars or D.INFO[view.dtype_name].is_int or self.mask is not None:
            return
        acc = view.access
        depth = {b.loop["var"]: k for k, b in enumerate(tr.stack) if b.loop is not None}
        j = builtins.min((depth[v] for v in self.vars if v in depth), default=None)
        if j is None or builtins.any(acc.buffer == o.buffer and i.op != "alloc" for b in tr.stack
                            for i, _ in ir.walk(tuple(b.nodes)) for o in i.outs):
            return
        whole = _hoisted(acc, tr.buffers[acc.buffer], {v for v, k in depth.items() if k >= j}, tr.var_extents)
        if whole is not None:
            tr.stack[j - 1].nodes.append(ir.Instr("memset", (whole,), (ir.Imm(float(ident), "float32"),),
                                                  attrs(engine="vector"), None, self.loc))

    def __getattr__(self, name):
        raise errors.make("unsupported", "the result of nl.loop_reduce has no value of its own: assign it into "
                          "its destination (dst[...] = nl.loop_reduce(x, op=..., loop_indices=[i]))",
                          loc=self.__dict__.get("loc"))


def _hoisted(acc: ir.Access, buf: ir.Buffer, inner: set, extents: dict) -> ir.Access | None:
    """`acc` outside the loops of `inner`: a dimension indexed by one of them (alone, over the whole
    dimension) becomes a whole-dimension axis; None when another index uses them."""
    index, shape, axes = [], [], {}
    for d, e in enumerate(acc.index):
        vs = e.vars()
        if vs & inner:
            v = next(iter(vs))
            if len(vs) != 1 or e != Affine.var(v) or extents.get(v) != buf.shape[d]:
                return None
            index.append(Affine.var(axis_var(len(shape))))
            shape.append(buf.shape[d])
            continue
        sub = {}
        for a in sorted(x for x in vs if x.startswith("@")):
            if a not in axes:
                axes[a] = len(shape)
                shape.append(acc.shape[int(a[1:])])
            sub[a] = Affine.var(axis_var(axes[a]))
        index.append(e.subst(sub))
    return ir.Access(acc.buffer, tuple(index), tuple(shape))


@api("nl.loop_reduce", ignored=("name",))
def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None) -> LoopReduce:
    loc = capture_loc(2)
    if not isinstance(x, Tile):
        raise errors.make("argument", f"nl.loop_reduce needs a tile, got {type(x).__name__}", loc=loc)
    return LoopReduce(x, alu_name(op, loc), dtype, mask, loc, loop_indices)


# every nl function of this module, by name, for Tile's operators (`a + b` is nl.add(a, b))
provide_tile_ops({f.__name__: f for f in list(globals().values()) if callable(f) and spec_of(f) is not None})
