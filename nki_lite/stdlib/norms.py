"""Normalisation kernels.

Part of nki_lite's stdlib: kernels written in the DSL itself, in the style of AWS's NKI tutorials
(legacy dialect), each with a numpy reference in nki_lite/stdlib/reference.py.
"""
import math

import nki_lite as nki
import nki_lite.language as nl


@nki.jit
def rmsnorm(a_tensor, g_tensor):
    """out = a * rsqrt(mean(a^2, axis=1)) * g, rows in tiles of 128 with a masked ragged tail."""
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, width = a_tensor.shape
    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(width)[None, :]
    g_tile = nl.load(g_tensor.reshape((1, width))[iw, iy])
    for i in nl.affine_range(math.ceil(num_rows / 128)):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        in_square = nl.square(a_tile)
        square_sum = nl.sum(in_square, axis=[1])
        mean = square_sum / width
        rms_reciprocal = nl.rsqrt(mean)
        out_tile = nl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, width))
        out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor
