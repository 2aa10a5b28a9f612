"""Row softmax.

Part of nki_lite's stdlib: kernels written in the DSL itself, in the style of AWS's NKI tutorials
(legacy dialect), each with a numpy reference in nki_lite/stdlib/reference.py.
"""
import math

import nki_lite as nki
import nki_lite.language as nl


@nki.jit
def row_softmax(x):
    """Numerically stable softmax over each row, 128 rows per tile, ragged last tile masked."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(128)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / 128)):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        row_max = nl.max(t, axis=1)
        e = nl.exp(nl.subtract(t, row_max))
        total = nl.sum(e, axis=1)
        y = nl.multiply(e, nl.reciprocal(total))
        nl.store(out[i * 128 + ip, ic], value=y, mask=valid)
    return out
