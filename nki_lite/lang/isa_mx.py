"""nisa.quantize_mx and nisa.nc_matmul_mx (NeuronCore-v4 MX instructions), dst-first as in the current dialect.

Contract (the ISA docs of both instructions, the Trainium3 architecture guide, the nki-samples MXFP tutorial;
numerics in numerics/mx.py, choices in docs/numerics.md "MX formats"):
- `quantize_mx(dst, src, dst_scale)`: src an SBUF float16/bfloat16 tile [P, F...] (P a multiple of 32, at most
  128; F, the free elements read row-major, a multiple of 4: groups are 4 consecutive free elements), dst an
  SBUF float8_e4m3fn_x4 / float8_e5m2_x4 tile with P partitions and F//4 free elements (any free shape, as the
  NKI Library writes [P, n, T]), dst_scale an SBUF float8_e8m0fnu / uint8 tile with F//4 free elements and the
  quadrant layout: the scales of data
  quadrant j (partitions 32j..32j+31) are written to scale partitions 32j..32j+3 of the view; the
  other partitions are not touched (a view starting at partition 4, 8 or 12 packs several tensors'
  scales into one tile). IR: `quantize_mx` with outs (dst, one [4, F//4] scale view per quadrant).
- `nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position, tile_size,
  accumulate)`: stationary [K, M...] and moving [K, N...] SBUF x4 tiles (free axes read row-major) (any of the three x4 dtypes, mixed
  allowed), K a multiple of 32 (at most 128), M even and at most 128, N at most 4096 (fp32 dst) / 8192
  (bf16 dst); scales as for quantize_mx with at least M / N free elements (the first M / N are read);
  dst a PSUM float32 / bfloat16 tile of M partitions x N free elements. accumulate=False overwrites; True and None (the
  dialect zero-fills PSUM tensors, so "auto-detect" is accumulation) accumulate. tile_position /
  tile_size are checked and then only a performance hint. IR: `nc_matmul_mx` with ins (stationary,
  moving, stationary scale quadrants..., moving scale quadrants...).
- Misuse is NL-E119 (layout, shapes, spaces) or NL-E120 (dtypes, a target before NeuronCore-v4) at the
  calling line; `.indirect`
  operands do not exist in nki_lite (no method).
"""
from __future__ import annotations

from .. import errors
from ..core import dtypes as D
from ..core import ir
from ..core.affine import axis_var
from ..loc import capture_loc
from ..numerics import mx as MX
from .argcheck import expect
from .tile import Tile
from .tracer import attrs, current

SCALE_DTYPES = ("float8_e8m0fnu", "uint8")
QUADRANT = 32


def _tile(x, what: str, api: str, loc) -> Tile:
    return expect(x, Tile, api, what, "a tensor or tile of the kernel", loc,
                  code="dst_operand" if what == "dst" else "argument")


def _layout(api: str, msg: str, loc, hint: str | None = None):
    return errors.make("mx_layout", f"{api}: {msg}", loc=loc, hint=hint)


def _space(t: Tile, want: ir.Space, what: str, api: str, loc) -> None:
    if t.buf.space != want:
        raise _layout(api, f"{what} must be a {want.value.upper()} tile, got one in {t.buf.space.value.upper()}", loc,
                      "MX data and scales live in SBUF; nc_matmul_mx writes a PSUM tile")


def _dtype(t: Tile, allowed, what: str, api: str, loc) -> None:
    if t.dtype_name not in allowed:
        raise errors.make("mx_dtype", f"{api}: {what} must be {' or '.join(allowed)}, got {t.dtype_name}", loc=loc)


def _flat(t: Tile, what: str, api: str, loc) -> tuple[int, int]:
    """(partitions, free elements) of a tile of any rank >= 2 (its free axes read row-major)."""
    if len(t.shape) < 2:
        raise _layout(api, f"{what} must have a partition axis and free axes, got shape {tuple(t.shape)}", loc)
    free = 1
    for n in t.shape[1:]:
        free *= int(n)
    return int(t.shape[0]), free


def _data_partitions(P: int, what: str, api: str, loc) -> None:
    pmax = current().hw.partitions
    if P % QUADRANT or not 0 < P <= pmax:
        raise _layout(api, f"{what} spans {P} partitions: it must be a multiple of 32 and at most {pmax} (a scaling "
                      "group is 8 partitions x 4 elements and each quadrant holds its own scales)", loc,
                      "pad the contraction (partition) axis to a multiple of 32")


def _scale_quadrants(scale: Tile, P: int, F: int, what: str, api: str, loc) -> tuple[ir.Access, ...]:
    """The [4, ...] view of each quadrant's scales: rows 32j..32j+3 of `scale` (a 2-D scale tile: its
    columns 0..F-1; any other rank: all of its free elements, which must then be exactly F)."""
    SP, SF = _flat(scale, what, api, loc)
    need = MX.scale_partitions(P)
    if len(scale.shape) != 2 and SF != F:
        raise _layout(api, f"{what} has {SF} free elements (shape {tuple(scale.shape)}); a scale tile of rank "
                      f"{len(scale.shape)} must have exactly the data's {F}", loc)
    if SP < need or SF < F:
        raise _layout(api, f"{what} has shape {(SP, SF)}; a data tile of {P} partitions x {F} x4 elements needs "
                      f"at least {need} partitions x {F} (the scales of quadrant j sit in partitions 32j..32j+3)",
                      loc, f"allocate the scale tile as ({P // 8 if P <= 32 else P}, {F}) (nki-samples' "
                      "allocate_mx_tiles)")
    start = scale.access.index[0].subst({axis_var(k): 0 for k in range(len(scale.shape))})
    if start.is_const and start.const % QUADRANT not in (0, 4, 8, 12):
        raise _layout(api, f"{what} starts at partition {start.const}: scales are read/written at an offset of 0, "
                      "4, 8 or 12 within a quadrant", loc)
    if len(scale.shape) == 2:
        return tuple(scale[QUADRANT * j:QUADRANT * j + 4, 0:F].access for j in range(P // QUADRANT))
    return tuple(scale[QUADRANT * j:QUADRANT * j + 4].access for j in range(P // QUADRANT))


def _v4(api: str, loc) -> None:
    hw = current().hw
    if hw.nc_version < 4:
        raise errors.make("mx_dtype", f"{api}: MX formats exist on NeuronCore-v4 and newer; the target {hw.name} is "
                          f"NeuronCore-v{hw.nc_version}", loc=loc, hint="trace for trn3 (@nki.jit(platform_target="
                          "\"trn3\") or target=\"trn3\")")


def quantize_mx(dst, src, dst_scale, name=None):
    loc = capture_loc(2)
    api = "nisa.quantize_mx"
    _v4(api, loc)
    d, s, sc = _tile(dst, "dst", api, loc), _tile(src, "src", api, loc), _tile(dst_scale, "dst_scale", api, loc)
    for t, what in ((d, "dst"), (s, "src"), (sc, "dst_scale")):
        _space(t, ir.Space.SBUF, what, api, loc)
    _dtype(s, ("bfloat16", "float16"), "src", api, loc)
    _dtype(d, MX.QUANTIZE_OUT, "dst", api, loc)
    _dtype(sc, SCALE_DTYPES, "dst_scale", api, loc)
    P, F = _flat(s, "src", api, loc)
    _data_partitions(P, "src", api, loc)
    if F % 4:
        raise _layout(api, f"src has {F} free elements: quantize_mx packs groups of 4, so it must be a multiple of 4",
                      loc)
    if _flat(d, "dst", api, loc) != (P, F // 4):
        raise _layout(api, f"dst has shape {tuple(d.shape)}; for src {tuple(s.shape)} it must have {P} partitions "
                      f"and {F // 4} free elements (four values per x4 element)", loc)
    if _flat(sc, "dst_scale", api, loc)[1] != F // 4:
        raise _layout(api, f"dst_scale has shape {tuple(sc.shape)}; it must have exactly src's free elements / 4 = "
                      f"{F // 4}", loc, "slice the scale tile's free axis: scale[:, :F // 4]")
    quads = _scale_quadrants(sc, P, F // 4, "dst_scale", api, loc)
    current().emit(ir.Instr("quantize_mx", (d.access,) + quads, (s.access,), attrs(quadrants=len(quads)), None, loc))


def _tiling(tile_position, tile_size, K: int, api: str, loc) -> None:
    if tile_position is None and tile_size is None:
        return
    if tile_position is None or tile_size is None:
        raise _layout(api, "tile_position and tile_size must both be set to use row tiling", loc)
    try:
        (r0, c0), (rs, cs) = (tuple(tile_position), tuple(tile_size))
    except (TypeError, ValueError):
        raise _layout(api, f"tile_position / tile_size are (row, column) pairs, got {tile_position!r}, "
                      f"{tile_size!r}", loc) from None
    ints = all(isinstance(v, int) for v in (r0, c0, rs, cs))
    hw = current().hw
    rows = (hw.pe_rows // 4, hw.pe_rows // 2, hw.pe_rows)          # the docs: 4x 32-, 2x 64- or one 128-row tile
    if ints and (cs != hw.pe_cols or c0 != 0 or rs not in rows or r0 % rs or r0 >= hw.pe_rows or K > rs):
        raise _layout(api, f"tile_position={tile_position!r}, tile_size={tile_size!r}: nc_matmul_mx has row tiling "
                      f"only (column size {hw.pe_cols} at column 0), row size one of {rows}, start a multiple of the row "
                      f"size, and the stationary's {K} partitions within the row size", loc)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    loc = capture_loc(2)
    api = "nisa.nc_matmul_mx"
    _v4(api, loc)
    d = _tile(dst, "dst", api, loc)
    st, mv = _tile(stationary, "stationary", api, loc), _tile(moving, "moving", api, loc)
    ss, ms = _tile(stationary_scale, "stationary_scale", api, loc), _tile(moving_scale, "moving_scale", api, loc)
    _space(d, ir.Space.PSUM, "dst", api, loc)
    for t, what in ((st, "stationary"), (mv, "moving"), (ss, "stationary_scale"), (ms, "moving_scale")):
        _space(t, ir.Space.SBUF, what, api, loc)
    for t, what in ((st, "stationary"), (mv, "moving")):
        _dtype(t, D.MX_X4, what, api, loc)
    for t, what in ((ss, "stationary_scale"), (ms, "moving_scale")):
        _dtype(t, SCALE_DTYPES, what, api, loc)
    _dtype(d, ("float32", "bfloat16"), "dst", api, loc)
    K, M = _flat(st, "stationary", api, loc)
    K2, N = _flat(mv, "moving", api, loc)
    if K2 != K:
        raise _layout(api, f"stationary and moving must span the same partitions (the contraction), got {K} and {K2}",
                      loc)
    _data_partitions(K, "stationary", api, loc)
    hw = current().hw
    if M % 2 or M > hw.matmul_stationary_fmax:
        raise _layout(api, f"stationary has {M} free elements: it must be even and at most {hw.matmul_stationary_fmax}",
                      loc)
    nmax = hw.psum_banks * hw.psum_bank_bytes // D.itemsize(d.dtype_name)     # all of PSUM (the docs: 8 banks)
    if N > nmax:
        raise _layout(api, f"moving has {N} free elements: at most {nmax} for a {d.dtype_name} dst (all of PSUM)", loc)
    if _flat(d, "dst", api, loc) != (M, N):
        raise _layout(api, f"dst has shape {tuple(d.shape)}; stationary {tuple(st.shape)} x moving {tuple(mv.shape)} "
                      f"gives ({M}, {N}): {M} partitions x {N} free elements", loc)
    _tiling(tile_position, tile_size, K, api, loc)
    if accumulate not in (None, True, False):
        raise errors.make("argument", f"{api}: accumulate must be True, False or None, got {accumulate!r}", loc=loc)
    sq = _scale_quadrants(ss, K, M, "stationary_scale", api, loc)
    mq = _scale_quadrants(ms, K, N, "moving_scale", api, loc)
    current().emit(ir.Instr("nc_matmul_mx", (d.access,), (st.access, mv.access) + sq + mq,
                            attrs(accumulate=accumulate is not False, quadrants=len(sq)), None, loc))
