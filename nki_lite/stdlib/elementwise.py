"""Elementwise kernels.

Part of nki_lite's stdlib: kernels written in the DSL itself, in the style of AWS's NKI tutorials
(legacy dialect), each with a numpy reference in nki_lite/stdlib/reference.py.
"""
import nki_lite as nki
import nki_lite.language as nl


@nki.jit
def spmd_add(a_input, b_input):
    """c = a + b over a 2-D launch grid of [128, 512] tiles."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    nl.store(c_output[ix, iy], value=c_tile)
    return c_output
