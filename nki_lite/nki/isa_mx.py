"""nki.isa.quantize_mx and nki.isa.nc_matmul_mx of the current dialect (NeuronCore-v4 MX formats).

Contract: the reference's signatures (nki/api/nki/isa), forwarded to lang/isa_mx.py, which checks the MX
layout at the calling line and traces them into `quantize_mx` / `nc_matmul_mx` IR instructions.
"""
from __future__ import annotations

from ..lang import isa_mx as _mx


def quantize_mx(dst, src, dst_scale, name=None):
    return _mx.quantize_mx(dst, src, dst_scale, name=name)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    return _mx.nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=tile_position,
                            tile_size=tile_size, accumulate=accumulate, name=name)
