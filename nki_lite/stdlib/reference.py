"""numpy references of the stdlib kernels (float64 math, for comparisons with tolerances)."""
import numpy as np


def row_softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rmsnorm_ref(a, g):
    a = a.astype(np.float64)
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g.astype(np.float64)[None, :]


def matmul_ref(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)
