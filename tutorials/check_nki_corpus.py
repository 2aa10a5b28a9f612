"""Check the public current-dialect (`import nki`) NKI corpus against nki_lite's `nki` dialect.

None of the files is part of this repository. Point the script at local extracts
(`git --git-dir=<bare clone> archive HEAD <path> | tar -x -C DIR`):

    python tutorials/check_nki_corpus.py DIR... [--mode=interpret,jit] [--files]

  aws-neuron-sdk  nki/examples                    (the tutorials' kernels)
  nki-samples     src/nki_samples/tutorials        (current tutorials; legacy-dialect files are skipped)
  nki-library     src/nkilib_src/nkilib            (the NKI Library's kernels)

`import nki ...` resolves to nki_lite.nki through nki_lite.compat.install(dialect="nki"). For every file
written in the new dialect (it imports `nki`, not `neuronxcc`) the script
1. lists the reference names it uses (an AST walk: attribute chains on the names bound to nki /
   nki.language / nki.isa / nki.collectives, names imported from them, calls of the reference's
   tensor-view methods such as `.ap(...)`) and classifies them with docs/compat_nki.md's classifier;
2. imports it (nki-library files as modules of the `nkilib` package);
3. for the tutorial kernels with a numpy reference below (RUNS), runs them in each mode and compares.
The summary gives the counts and the blocking features (not-supported names, and the first error of each
failed import or run) ranked by the number of kernels (@nki.jit functions) in the files that use them.
`--files` prints every file, `--traceback` the traceback of each failed run. Exits 0: the output is a report.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

import nki_lite.compat
from nki_lite.nki import compat_table
from nki_lite.nki.reference import REFERENCE

nki_lite.compat.install()          # both dialects: a few current tutorials are still legacy-dialect files
RNG = np.random.default_rng(0)
TENSOR_METHODS = {n.rsplit(".", 1)[1] for n in REFERENCE if n.startswith(compat_table.TENSOR)}
STATUS = {name: status for name, _, status, _ in compat_table.rows()}


# ---------------------------------------------------------------- static scan

def is_new_dialect(tree: ast.AST) -> bool:
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
    return any(m == "nki" or m.startswith("nki.") for m in mods) and not any("neuronxcc" in m for m in mods)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> reference module or name (`nl` -> nki.language, `dma_copy` -> nki.isa.dma_copy)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "nki" or a.name.startswith("nki."):
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else "nki"
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module == "nki"
                                                                     or node.module.startswith("nki.")):
            module = "nki.isa" if node.module == "nki.isa.constants" else node.module
            for a in node.names:
                out[a.asname or a.name] = f"{module}.{a.name}"
    return out


def _chain(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def used_names(tree: ast.AST) -> set[str]:
    """Reference names the file uses (see the module docstring)."""
    aliases = _aliases(tree)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            ch = _chain(node)
            if ch and ch[0] in aliases:
                base = aliases[ch[0]]
                for i in range(len(ch), 1, -1):           # the longest prefix that is a reference name
                    cand = ".".join([base] + ch[1:i])
                    if cand in REFERENCE:
                        used.add(cand)
                        break
        elif isinstance(node, ast.Name) and node.id in aliases and aliases[node.id] in REFERENCE:
            used.add(aliases[node.id])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METHODS:
            # a tensor-view call (`t.ap(...)`); an approximation: `.view` / `.select` / `.slice` of other
            # types (numpy in host code) are counted too
            ch = _chain(node.func.value)
            if not (ch and ch[0] in aliases):
                used.add(compat_table.TENSOR + node.func.attr)
        for child in ast.iter_child_nodes(node):
            child._parent = node
    return used


def jit_kernels(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                text = ast.unparse(d)
                if "jit" in text:
                    out.append(node.name)
    return out


# ---------------------------------------------------------------- the runs (tutorial kernels with a reference)

def f32(*shape, lo=0.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def close(got, want, rtol=1e-5, atol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} vs {want.shape}")
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        raise AssertionError(f"mismatch: max abs error {np.max(np.abs(got - want)):.3g}")


def _add(kernel_name, shape):
    def run(mod, mode):
        a, b = f32(*shape), f32(*shape)
        close(getattr(mod, kernel_name)(a, b, mode=mode), a + b, 0, 0)
    return run


def _matmul(kernel_name, K, M, N, **meta):
    def run(mod, mode):
        lhs_t, rhs = f32(K, M, lo=-1), f32(K, N, lo=-1)
        close(getattr(mod, kernel_name)(lhs_t, rhs, mode=mode, **meta), lhs_t.T.astype(np.float64) @ rhs, 1e-4, 1e-4)
    return run


def _transpose2d(mod, mode):
    P, X, Y = 5, 3, 4
    a = np.arange(P * X * Y, dtype=np.int8).reshape(P, X * Y)
    close(mod.tensor_transpose2D_kernel_(a, (X, Y), mode=mode), a.reshape(P, X, Y).transpose(0, 2, 1).reshape(P, -1),
          0, 0)


def _avgpool(mod, mode):
    x = f32(2, 6, 6)
    close(mod.tensor_avgpool_kernel(x, 2, mode=mode), x.reshape(2, 3, 2, 3, 2).mean(axis=(2, 4)))


def _maxpool(mod, mode):
    x = f32(2, 6, 6)
    close(mod.tensor_maxpool_kernel_(x, 2, mode=mode), x.reshape(2, 3, 2, 3, 2).max(axis=(2, 4)), 0, 0)


def _split(mod, mode):
    x = f32(4, 5)
    even, odd = mod.tensor_split_kernel_(x, mode=mode)
    close(even, x[:, 0::2], 0, 0)
    close(odd, x[:, 1::2], 0, 0)


def _exp(shape):
    def run(mod, mode):
        x = f32(*shape)
        close(mod.tensor_exp_kernel_(x, mode=mode), np.exp(x.astype(np.float64)), 1e-5, 1e-6)
    return run


def _mamba(kernel_name):
    def run(mod, mode):
        batch, channels, seq, state = 1, 128, 512, 2     # mamba_v3 tiles the sequence by 512
        delta, u = f32(batch, channels, seq), f32(batch, channels, seq)
        A = -f32(channels, state)
        B, C = f32(batch, state, seq), f32(batch, state, seq)
        dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])           # [b, c, s, l]
        dBu = (delta * u)[:, :, None, :] * B[:, None, :, :]
        h = np.zeros((batch, channels, state), np.float64)
        out = np.zeros((batch, channels, seq))
        for t in range(seq):
            h = dA[..., t] * h + dBu[..., t]
            out[..., t] = (h * C[:, None, :, t]).sum(-1)
        close(getattr(mod, kernel_name)(delta, u, A, B, C, mode=mode), out, 1e-4, 1e-4)
    return run


def _mx_utils(mod):
    """The tutorial's own CPU golden helpers (mx_cpu_utils.py next to the kernels: numpy and ml_dtypes only)."""
    return import_file(Path(mod.__file__).parent / "mx_cpu_utils.py", Path(mod.__file__).parent)


def _mx_offline(element):
    """nki-samples mxfp-matmul: Matmul-MX of host-quantized max-size tiles vs the tutorial's nc_matmul_mx_golden
    (its mx_toplevel.py: M, K, N = 128, 128, 512; np.allclose rtol = atol = 5e-2)."""
    def run(mod, mode):
        import ml_dtypes
        u = _mx_utils(mod)
        dt = getattr(ml_dtypes, element)
        _, _, st, st_s = u.generate_stabilized_mx_data(dt, (128, 128 * 4))
        _, _, mv, mv_s = u.generate_stabilized_mx_data(dt, (128, 512 * 4))
        x4 = {"float8_e5m2": mod.nl.float8_e5m2_x4, "float4_e2m1fn": mod.nl.float4_e2m1fn_x4}[element]
        got = mod.kernel_offline_quantized_mx_matmul(st, st_s, mv, mv_s, x4, mode=mode)
        close(np.asarray(got, np.float32), u.nc_matmul_mx_golden(st, mv, st_s, mv_s, dt, dt), 5e-2, 5e-2)
    return run


def _mx_on_device(st_element, mv_element):
    """Host-quantized stationary, moving quantized by nisa.quantize_mx on the device (mx_toplevel.py's check)."""
    def run(mod, mode):
        import ml_dtypes
        u = _mx_utils(mod)
        sdt, mdt = getattr(ml_dtypes, st_element), getattr(ml_dtypes, mv_element)
        x4 = {"float8_e5m2": mod.nl.float8_e5m2_x4, "float4_e2m1fn": mod.nl.float4_e2m1fn_x4}
        _, _, st, st_s = u.generate_stabilized_mx_data(sdt, (128, 128 * 4))
        mv_data, _, _, _ = u.generate_stabilized_mx_data(mdt, (128, 512 * 4))
        mv_bf16 = mv_data.astype(ml_dtypes.bfloat16)
        got = mod.kernel_on_device_quantize_matmul_mx(st, st_s, mv_bf16, x4[st_element], x4[mv_element], mode=mode)
        mq, ms = u.quantize_mx_golden(mv_bf16.astype(np.float32), mdt)
        close(np.asarray(got, np.float32), u.nc_matmul_mx_golden(st, mq, st_s, ms, sdt, mdt), 5e-2, 5e-2)
    return run


def _mx_strided(use_tensor_copy):
    """Both tiles laid out by strided copies (tensor_copy or DMA), quantized on the device: vs stationary.T @
    moving of the unquantized inputs (mx_toplevel.py's run_copy_strided_test)."""
    def run(mod, mode):
        import ml_dtypes
        u = _mx_utils(mod)
        st, _, _, _ = u.generate_stabilized_mx_data(ml_dtypes.float8_e5m2, (512, 128))
        mv, _, _, _ = u.generate_stabilized_mx_data(ml_dtypes.float8_e5m2, (512, 512))
        got = mod.kernel_copy_strided_quantize_matmul_mx(st.astype(ml_dtypes.bfloat16), mv.astype(ml_dtypes.bfloat16),
                                                         mod.nl.float8_e5m2_x4, use_tensor_copy, mode=mode)
        close(np.asarray(got, np.float32), st.T @ mv, 5e-2, 5e-2)
    return run


_MX = "mxfp-matmul/mx_kernels.py"

# (file suffix, kernel, check)
RUNS = [
    (_MX, "kernel_offline_quantized_mx_matmul", _mx_offline("float8_e5m2")),
    (_MX, "kernel_offline_quantized_mx_matmul", _mx_offline("float4_e2m1fn")),
    (_MX, "kernel_on_device_quantize_matmul_mx", _mx_on_device("float4_e2m1fn", "float8_e5m2")),
    (_MX, "kernel_on_device_quantize_matmul_mx", _mx_on_device("float8_e5m2", "float8_e5m2")),
    (_MX, "kernel_copy_strided_quantize_matmul_mx", _mx_strided(True)),
    (_MX, "kernel_copy_strided_quantize_matmul_mx", _mx_strided(False)),
    ("getting_started_baremetal.py", "nki_tensor_add_kernel", _add("nki_tensor_add_kernel", (128, 512))),
    ("tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add", _add("nki_tensor_add", (256, 1024))),
    ("simulate/nki_simulate_example.py", "add_kernel", _add("add_kernel", (128, 512))),
    ("transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_", _transpose2d),
    ("average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel", _avgpool),
    ("index-case-1.py", "tensor_split_kernel_", _split),
    ("index-case-3.py", "tensor_maxpool_kernel_", _maxpool),
    ("layout-pass.py", "tensor_exp_kernel_", _exp((128, 512))),
    ("layout-loop.py", "tensor_exp_kernel_", _exp((256, 512))),
    ("matrix_multiplication/matrix_multiplication_nki_kernels.py", "nki_matmul_basic_",
     _matmul("nki_matmul_basic_", 128, 64, 512)),
    ("matrix_multiplication/matrix_multiplication_nki_kernels.py", "nki_matmul_tiled_",
     _matmul("nki_matmul_tiled_", 256, 256, 1024)),
    ("matrix_multiplication/matrix_multiplication_nki_kernels.py", "nki_matmul_hoist_load_",
     _matmul("nki_matmul_hoist_load_", 256, 256, 1024)),
    ("matrix_multiplication/matrix_multiplication_nki_kernels.py", "nki_matmul_block_free_dimension_",
     _matmul("nki_matmul_block_free_dimension_", 256, 256, 1024)),
    ("matrix_multiplication/matrix_multiplication_nki_kernels.py", "nki_matmul_fully_optimized_",
     _matmul("nki_matmul_fully_optimized_", 256, 256, 512, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=1,
             TILES_IN_BLOCK_K=2)),
    ("fused_mamba/mamba_nki_kernels.py", "mamba_v1", _mamba("mamba_v1")),
    ("fused_mamba/mamba_nki_kernels.py", "mamba_v2", _mamba("mamba_v2")),
    ("fused_mamba/mamba_nki_kernels.py", "mamba_v3", _mamba("mamba_v3")),
]


def _attention(kernel_name, seqlen):
    """nki-samples' attention_fwd_performance (a legacy-dialect file in its current tutorials): softmax(q^T k) v^T,
    with the tolerance of its test_attention.py (the later versions compute in bfloat16)."""
    def run(mod, mode):
        q, k, v = (f32(128, seqlen, lo=-1) for _ in range(3))
        qk = q.T.astype(np.float64) @ k
        e = np.exp(qk - qk.max(axis=1, keepdims=True))
        close(getattr(mod, kernel_name)(q, k, v, mode=mode), (e / e.sum(axis=1, keepdims=True)) @ v.T, 0, 1e-2)
    return run


# legacy-dialect tutorial files among the current tutorials (imported with the legacy dialect): (suffix, kernel,
# check). seqlen 512, the kernels' minimum from v3 on (their test uses 4096 on a device).
LEGACY_RUNS = [("attention_fwd_performance/attention_kernels.py", f"attn_fwd_v{v}",
                _attention(f"attn_fwd_v{v}", 128 if v in ("1", "2") else 512))
               for v in ("1", "2", "3", "4", "5", "6", "7", "8", "8a", "9", "10", "11")]


# ---------------------------------------------------------------- driver

def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:160]


def error_kind(e: BaseException) -> str:
    """What the summary groups failures by: the nki_lite error code, else the exception and its message."""
    code = getattr(e, "code", None)
    if code:
        return f"{code} {getattr(e, 'name', '')}: " + str(getattr(e, "message", "")).split("`")[0][:70]
    return first_line(e)


def import_file(path: Path, root: Path):
    pkg_root = next((p.parent for p in [path, *path.parents] if p.name == "nkilib"), None)
    if pkg_root is not None:
        if str(pkg_root) not in sys.path:
            sys.path.insert(0, str(pkg_root))
        name = ".".join(path.relative_to(pkg_root).with_suffix("").parts)
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"corpus_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


class Tally:
    """What the summary counts."""

    def __init__(self):
        self.files = self.new = self.kernels = self.imported = 0
        self.feature_kernels: Counter = Counter()
        self.feature_files: Counter = Counter()
        self.import_errors: Counter = Counter()
        self.runs: list = []        # (file, kernel, mode, pass/FAIL, first line, error kind)


def check_file(path: Path, root: Path, modes: list[str], tally: Tally, show: bool, tb: bool) -> None:
    tally.files += 1
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError as e:
        print(f"SYNTAX  {path}: {e.msg} (line {e.lineno})")
        return
    rel = str(path.relative_to(root))
    if not is_new_dialect(tree):
        legacy = [r for r in LEGACY_RUNS if str(path).endswith(r[0])]
        if legacy:                  # a legacy-dialect file among the current tutorials: only its RUNS
            _run(legacy, import_file(path, root), rel, modes, tally, tb)
        return
    tally.new += 1
    kernels = jit_kernels(tree)
    tally.kernels += len(kernels)
    blocking = sorted(n for n in used_names(tree) if STATUS.get(n) == "not supported")
    for b in blocking:
        tally.feature_kernels[b] += len(kernels)
        tally.feature_files[b] += 1
    try:
        mod = import_file(path, root)
        tally.imported += 1
        status = "import ok"
    except BaseException as e:          # noqa: BLE001 - any failure is a finding
        mod, status = None, "IMPORT  " + first_line(e)
        tally.import_errors[error_kind(e)] += 1
    if show or mod is None:
        print(f"{status:60.60s} {rel}  kernels={len(kernels)}"
              + (f"  not supported: {', '.join(blocking)}" if blocking else ""))
    if mod is not None:
        _run(RUNS, mod, rel, modes, tally, tb)


def _run(runs, mod, rel: str, modes: list[str], tally: Tally, tb: bool) -> None:
    for suffix, kname, check in runs:
        if not rel.endswith(suffix) or not hasattr(mod, kname):
            continue
        for mode in modes:
            try:
                check(mod, mode)
                tally.runs.append((rel, kname, mode, "pass", "", ""))
            except BaseException as e:  # noqa: BLE001
                tally.runs.append((rel, kname, mode, "FAIL", first_line(e), error_kind(e)))
                if tb:
                    traceback.print_exc()


def summary(t: Tally) -> None:
    print()
    for path, kname, mode, res, why, _ in t.runs:
        print(f"{res:4s} {mode:9s} {path}::{kname}  {why}")
    passed = sum(1 for r in t.runs if r[3] == "pass")
    print(f"\n{t.files} files, {t.new} in the new dialect, {t.kernels} @nki.jit kernels; {t.imported} import; "
          f"runs: {passed}/{len(t.runs)} pass (kernel x mode)")
    print("\nNot-supported names used, by @nki.jit kernels in the files using them (files; a helper file without "
          "kernels counts 0 kernels):")
    for name, k in t.feature_kernels.most_common():
        print(f"  {k:4d} kernels ({t.feature_files[name]:3d} files)  {name}")
    fails = Counter(r[5] for r in t.runs if r[3] == "FAIL")
    if fails or t.import_errors:
        print("\nFirst errors (imports, runs):")
        for why, k in (t.import_errors + fails).most_common():
            print(f"  {k:4d}  {why}")


def main(argv: list[str]) -> int:
    modes = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--mode=")), ["interpret", "jit"])
    tally = Tally()
    for root in [Path(a) for a in argv if not a.startswith("--")]:
        for path in sorted(root.rglob("*.py")):
            check_file(path, root, modes, tally, "--files" in argv, "--traceback" in argv)
    summary(tally)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
