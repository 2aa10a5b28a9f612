"""Moving whole tensors between HBM and SBUF in current-dialect test kernels (one dma_copy each way).

Test kernels of the `nki` dialect start by copying their HBM inputs to SBUF and end by copying a result tile
to a new shared-HBM tensor; these are those two steps, written once.
"""
from __future__ import annotations

import nki_lite.nki.isa as nisa
import nki_lite.nki.language as nl


def sbuf_of(src):
    """src (an HBM tensor or view) copied into a new SBUF tensor of its shape and dtype."""
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def hbm_of(tile):
    """tile copied into a new shared-HBM tensor (a kernel output when returned)."""
    out = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out
