"""Row softmax.

Part of nki_lite's stdlib: kernels written in the DSL itself, in the style of AWS's NKI tutorials
(legacy dialect), each with a numpy reference in nki_lite/stdlib/reference.py.
"""
import math

import numpy as np

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl


@nki.jit
def row_softmax(x):
    """Numerically stable softmax over each row, 128 rows per tile, ragged last tile masked.

    Written the way optimised NKI kernels are: the max is reduced with negate=True so it can be the
    activation's bias, and exp(x - max) and its row sum come from one activation instruction.
    """
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip = nl.arange(128)[:, None]
    ic = nl.arange(cols)[None, :]
    for i in nl.affine_range(math.ceil(rows / 128)):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        neg_max = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True)
        total = nl.ndarray((128, 1), dtype=nl.float32)
        e = nisa.activation(op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        y = nl.multiply(e, nl.reciprocal(total), mask=valid)
        nl.store(out[i * 128 + ip, ic], value=y, mask=valid)
    return out
