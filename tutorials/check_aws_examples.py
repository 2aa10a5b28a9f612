"""Run AWS's legacy NKI tutorial kernels unmodified (imports aside) in nki_lite and compare with numpy.

AWS's files are NOT part of this repository. Point the script at a local checkout of
aws-neuron/aws-neuron-sdk (a tree that still has general/nki/, e.g. commit 8a38e733):

    python tutorials/check_aws_examples.py /path/to/aws-neuron-sdk/general/nki/examples [--mode=interpret,jit]

`import neuronxcc.nki ...` resolves to nki_lite through nki_lite.compat.install(). Each check calls
the tutorial's kernel on small inputs and compares with a numpy reference written here. Prints a
pass/fail table; exits non-zero if any check fails. Some tutorial files import scipy at module level.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path

import ml_dtypes
import numpy as np

import nki_lite.compat
from nki_lite.tools.checkdir import close  # noqa: F401  (one comparison for every checker; check_corpus.py imports it from here)

nki_lite.compat.install()
rng = np.random.default_rng(0)


def load(root: Path, rel: str):
    return load_path(root / rel)


def load_path(path: Path, name: str | None = None):
    """Import the file at `path` as a module (its own directory on sys.path while it loads)."""
    spec = importlib.util.spec_from_file_location(name or path.stem.replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod



def f32(*shape, lo=0.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


# ---------------------------------------------------------------- the checks

def _tensor_add(root, path: str, kernel: str, shape: tuple) -> None:
    """One of the tutorials' tensor-add kernels: exact against numpy."""
    a, b = f32(*shape), f32(*shape)
    close(getattr(load(root, path), kernel)(a, b), a + b, 0, 0)


def getting_started(root):
    _tensor_add(root, "getting_started_baremetal.py", "nki_tensor_add_kernel", (128, 512))


def spmd_tensor_add(root):
    _tensor_add(root, "tensor_addition/spmd_tensor_addition_nki_kernels.py", "nki_tensor_add", (256, 1024))


def spmd_multiple_nc_add(root):
    _tensor_add(root, "tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py", "nki_tensor_add_nc2",
                (512, 2048))


def transpose2d(root):
    m = load(root, "transpose2d/transpose2d_nki_kernels.py")
    P, X, Y = 5, 3, 4
    a = np.arange(P * X * Y, dtype=np.int8).reshape((P, X * Y))
    close(m.tensor_transpose2D_kernel_(a, (X, Y)), np.transpose(a.reshape(P, X, Y), (0, 2, 1)).reshape(P, X * Y), 0, 0)


def average_pool(root):
    m = load(root, "average_pool2d/average_pool2d_nki_kernels.py")
    x = f32(64, 16, 24)
    ref = x.reshape(64, 8, 2, 12, 2).mean(axis=(2, 4))
    close(m.tensor_avgpool_kernel(x, 2), ref, 1e-6, 1e-6)


def _matmul(name, K, M, N):
    def check(root):
        m = load(root, "matrix_multiplication/matrix_multiplication_nki_kernels.py")
        lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
        rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
        ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
        out = getattr(m, name)(lhsT, rhs)
        close(out.astype(np.float64), ref, 2e-2, 2e-2)
    check.__name__ = name
    return check


def _layernorm(version):
    def check(root):
        m = load(root, "layernorm/layernorm_nki_kernel.py")
        x, g, b = f32(300, 256), f32(256), f32(256)
        eps = 1e-5
        mu = x.mean(1, keepdims=True)
        ref = (x - mu) / np.sqrt(x.var(1, keepdims=True) + eps) * g + b
        close(getattr(m, f"nki_layernorm_kernel_{version}")(x, eps, g, b), ref, 1e-4, 1e-4)
    check.__name__ = f"layernorm_{version}"
    return check


def rmsnorm(root):
    m = load(root, "rmsnorm/rmsnorm_nki_kernels.py")
    a, g = f32(250, 512), f32(512)
    ref = a / np.sqrt(np.mean(a.astype(np.float64) ** 2, axis=1, keepdims=True)) * g
    close(m.nki_rmsnorm_kernel(a, g), ref, 1e-4, 1e-5)


def _mamba_ref(delta, u, A, B, C):
    d, uu = delta.astype(np.float64), u.astype(np.float64)
    batch, ch, L = d.shape
    out = np.zeros((batch, ch, L))
    for s in range(A.shape[1]):
        dA = np.exp(d * A[None, :, s, None])
        dBu = d * uu * B[:, None, s, :]
        h = np.zeros((batch, ch))
        for t in range(L):
            h = dA[:, :, t] * h + dBu[:, :, t]
            out[:, :, t] += h * C[:, s, t][:, None]
    return out


def _mamba(version):
    def check(root):
        m = load(root, "fused_mamba/mamba_nki_kernels.py")
        batch, ch, L, S = 1, 128, 512, 4
        delta, u = f32(batch, ch, L, lo=0.0, hi=0.1), f32(batch, ch, L)
        A, B, C = -f32(ch, S), f32(batch, S, L), f32(batch, S, L)
        close(getattr(m, f"mamba_{version}")(delta, u, A, B, C), _mamba_ref(delta, u, A, B, C), 1e-4, 1e-4)
    check.__name__ = f"mamba_{version}"
    return check


def sd_attention(root):
    m = load(root, "sd_attention/sd_attention_nki_kernels.py")
    seqlen, d_head = 512, 64
    q, k, v = f32(seqlen, d_head), f32(seqlen, d_head), f32(seqlen, d_head)
    s = (q.astype(np.float64) * 0.125) @ k.astype(np.float64).T     # the tutorial's softmax_scale
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v
    close(m.fused_self_attn_for_SD_small_head_size(q, k, v), ref, 1e-3, 1e-5)


CHECKS = [getting_started, spmd_tensor_add, spmd_multiple_nc_add, transpose2d, average_pool,
          _matmul("nki_matmul_basic_", 128, 64, 512), _matmul("nki_matmul_tiled_", 512, 256, 1024),
          _matmul("nki_matmul_hoist_load_", 512, 256, 1024),
          _matmul("nki_matmul_block_free_dimension_", 512, 256, 2048),
          _matmul("nki_matmul_fully_optimized_", 1024, 2048, 1024),
          _layernorm("v1"), _layernorm("v2"), rmsnorm, _mamba("v1"), _mamba("v2"), _mamba("v3"), sd_attention]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = Path(argv[1])
    only = {a for a in argv[2:] if not a.startswith("-")}
    modes = [a.split("=", 1)[1] for a in argv[2:] if a.startswith("--mode=")] or ["interpret,jit"]
    failures = 0
    rows = []
    for check, mode in ((c, m) for m in modes[0].split(",") for c in CHECKS):
        if only and check.__name__ not in only:
            continue
        os.environ["NKI_LITE_MODE"] = mode
        t0 = time.perf_counter()
        try:
            check(root)
            status, detail = "pass", ""
        except Exception as e:  # report every failure, keep going
            failures += 1
            status = "FAIL"
            detail = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:150]}"
            if "-v" in argv:
                tb = traceback.format_exc().splitlines()
                detail += " | " + " / ".join(l.strip() for l in tb[-6:-1])[:400]
        rows.append((check.__name__, status, time.perf_counter() - t0, detail))
        print(f"{check.__name__:36s} {mode:9s} {status:5s} {rows[-1][2]:7.2f}s {detail}", flush=True)
    print(f"\n{len(rows) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
