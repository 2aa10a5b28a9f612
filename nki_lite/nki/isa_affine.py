"""nisa.iota and nisa.affine_select of the current dialect: a [step, num] pattern over dst's elements.

Contract: the value at partition p and pattern digits (d_0 .. d_k) is
`offset + channel_multiplier * p + sum(step_i * d_i)` (int32), the digits running over the pattern's
`num`s in row-major order across dst's free elements (the reference's pseudo code). Patterns whose
product differs from dst's free size are NL-E102-style shape errors (shape_mismatch). The expression is
built from nl.arange indices and handed to the legacy nisa.iota / nisa.affine_select (affine
predicates), written into dst:
- dst's free dims equal to the pattern's nums (size-1 entries dropped): one instruction;
- a 2-D dst [P, F]: one instruction per combination of the outer digits, each writing a contiguous
  run of F (so a 1-entry pattern is one instruction);
- any other dst layout needs an SBUF reshape view: NL-E916.
`offset` may be a loop-variable or program-id expression (it is affine).
"""
from __future__ import annotations

import itertools
import math

from .. import errors
from .. import isa as _legacy
from .. import language as _nl
from ..loc import capture_loc
from .surface import not_built_argument

# by name, as nki_lite names ALU ops (nl.<op> of either dialect, or np.<op>)
_CMP = {"equal": lambda a: a == 0, "not_equal": lambda a: a != 0, "greater": lambda a: a > 0,
        "greater_equal": lambda a: a >= 0, "less": lambda a: a < 0, "less_equal": lambda a: a <= 0}


def _aranges(sizes: list[int]) -> list:
    rank = len(sizes)
    return [_nl.arange(n)[tuple(slice(None) if j == i else None for j in range(rank))] for i, n in enumerate(sizes)]


def pieces(dst, pattern, offset, channel_multiplier, api: str):
    """[(dst view, free-slice or None, affine expression)] covering dst (see the module contract)."""
    try:
        pat = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise errors.make("argument", f"{api}: pattern must be a list of [step, num] pairs, got {pattern!r}",
                          loc=capture_loc()) from None
    P, free = dst.shape[0], tuple(dst.shape[1:])
    if math.prod(n for _, n in pat) != math.prod(free):
        raise errors.make("shape_mismatch", f"{api}: the pattern {pattern} has {math.prod(n for _, n in pat)} "
                          f"elements per partition, dst {tuple(dst.shape)} has {math.prod(free)}", loc=capture_loc())
    pat = [(s, n) for s, n in pat if n != 1] or [(0, 1)]
    if free == tuple(n for _, n in pat):
        ip, *ix = _aranges([P] + [n for _, n in pat])
        expr = offset + channel_multiplier * ip
        for (s, _), i in zip(pat, ix):
            expr = expr + s * i
        return [(dst, None, expr)]
    if len(free) != 1:
        raise not_built_argument(api, f"a pattern {pattern} over dst of shape {tuple(dst.shape)} (needs an SBUF "
                                      "reshape view)")
    ip, ix = _aranges([P, pat[-1][1]])
    inner = pat[-1][1]
    out = []
    for k, digits in enumerate(itertools.product(*[range(n) for _, n in pat[:-1]])):
        base = offset + sum(s * d for (s, _), d in zip(pat[:-1], digits))
        sl = slice(k * inner, (k + 1) * inner)
        out.append((dst[:, sl], sl, base + channel_multiplier * ip + pat[-1][0] * ix))
    return out


def iota(dst, pattern, offset=0, channel_multiplier=0):
    for view, _, expr in pieces(dst, pattern, offset, channel_multiplier, "nisa.iota"):
        view[...] = _legacy.iota(expr, dtype=dst.dtype_name)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset):
    cmp = _CMP.get(getattr(cmp_op, "__name__", None)) if callable(cmp_op) else None
    if cmp is None:
        raise errors.make("argument", f"nisa.affine_select: cmp_op must be one of nl.equal, not_equal, greater, "
                          f"greater_equal, less, less_equal; got {cmp_op!r}", loc=capture_loc())
    if tuple(on_true_tile.shape) != tuple(dst.shape):
        raise errors.make("shape_mismatch", f"nisa.affine_select: on_true_tile {tuple(on_true_tile.shape)} and dst "
                          f"{tuple(dst.shape)} differ", loc=capture_loc())
    for view, sl, expr in pieces(dst, pattern, offset, channel_multiplier, "nisa.affine_select"):
        src = on_true_tile if sl is None else on_true_tile[:, sl]
        view[...] = _legacy.affine_select(cmp(expr), src, on_false_value, dtype=dst.dtype_name)
