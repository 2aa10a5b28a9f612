"""A compiled fp32 FMA k-chain for the interpreter's matmul (issue #13: the oracle fast enough for
full-size NKIBench kernels).

Contract: `fma_chain_f32(s, m, acc, start)` returns exactly what `fma.fma_outer_chain_f32(s, m, acc,
start)` returns: for every output element (i, j), `acc[i, j] = fmaf(s[k, i], m[k, j], acc[i, j])` for
k = start .. K-1 in that order (one IEEE single rounding per step), then NaNs canonicalised to
0x7FC00000. `available()` says whether the compiled routine can be used; when it cannot (llvmlite
missing or failing), callers use the numpy chain.

Independence from the JIT (why the oracle can still check the JIT): the routine is a tiny
hand-written LLVM IR text in this module (`_IR`), calling only the `llvm.fma.f32` intrinsic; it shares
nothing with nki_lite/lower/llvm's code generator, its rules or its launch path. Only the llvmlite
library (and the process-wide compile lock, since LLVM's pass pipelines are not thread-safe) is
common. Its result is pinned bit for bit against the numpy definition in tests/test_interpret_fma_kernel.py.

Why it is exact: `llvm.fma.f32` / `llvm.fma.v8f32` are the correctly rounded fused multiply-add
(per lane) on every target (a hardware FMA, or libm's fmaf); every element's chain runs k ascending:
the blocked part (four rows x 32 columns, `_block_ir`) keeps each element's accumulator in one vector
lane for the whole k loop (the lanes are different elements, never parts of one sum), the column
tail (N mod 32) runs the plain row / k / column loop; and no fast-math flags are set, so LLVM may
not contract, reassociate or flush subnormals. Blocking is for speed only (issue #13: each
accumulator is loaded and stored once per block instead of once per k, and each operand load
feeds several FMAs; ~3x on a loaded Xeon). NaN payloads
may differ from the numpy path's canonical NaN until the final canonicalisation, which is why it
is done once at the end (a NaN stays NaN through every later fma).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = ["available", "fma_chain_f32"]

_W = 8           # vector lanes: native on AVX2 and AVX-512, legalised by LLVM elsewhere
_Q = 4           # vectors per row in a block
_R = 4           # rows per block: R x Q = 16 independent FMA chains (AVX-512 has 32 vector registers)
_COLS = _W * _Q  # columns of one block


def _rows_ir() -> str:
    """Rows i0 .. i0+R-1 of a block, those past the last row clamped to it (computed twice, the same
    values stored twice), and their offsets in acc."""
    lines = ["  %rb0 = mul i64 %i0, %N"]
    for r in range(1, _R):
        lines += [f"  %i{r}.try = add nuw nsw i64 %i0, {r}",
                  f"  %i{r}.ok = icmp slt i64 %i{r}.try, %M",
                  f"  %i{r} = select i1 %i{r}.ok, i64 %i{r}.try, i64 %mlast",
                  f"  %rb{r} = mul i64 %i{r}, %N"]
    return "\n".join(lines)


def _block_ir() -> str:
    """The register-blocked part: R rows (`_rows_ir`) x 32 columns per block held in R x Q vector
    registers across the whole k loop, so each accumulator is loaded and stored once per block
    instead of once per k."""
    v = f"<{_W} x float>"
    chains = [(r, q) for r in range(_R) for q in range(_Q)]     # accumulator c{r}{q}: row r, vector q
    lines = ["blk:", "  %jb = phi i64 [ 0, %prow ], [ %jb.next, %blk.end ]"]
    for r, q in chains:
        lines += [f"  %o{r}{q} = add i64 %rb{r}, %jb",
                  f"  %o{r}{q}.x = add i64 %o{r}{q}, {q * _W}",
                  f"  %pc{r}{q} = getelementptr inbounds float, ptr %acc, i64 %o{r}{q}.x",
                  f"  %c{r}{q}.init = load {v}, ptr %pc{r}{q}, align 4"]
    lines += ["  br label %kl", "kl:", "  %kk = phi i64 [ %start, %blk ], [ %kk.next, %kl ]"]
    lines += [f"  %c{r}{q} = phi {v} [ %c{r}{q}.init, %blk ], [ %c{r}{q}.n, %kl ]" for r, q in chains]
    lines.append("  %sk = mul i64 %kk, %M")
    for r in range(_R):                 # s[k, row r], broadcast to every lane
        lines += [f"  %si{r} = add i64 %sk, %i{r}",
                  f"  %sp{r} = getelementptr inbounds float, ptr %s, i64 %si{r}",
                  f"  %a{r} = load float, ptr %sp{r}, align 4",
                  f"  %a{r}.e = insertelement {v} poison, float %a{r}, i64 0",
                  f"  %a{r}.v = shufflevector {v} %a{r}.e, {v} poison, <{_W} x i32> zeroinitializer"]
    lines += ["  %mk = mul i64 %kk, %N", "  %mj = add i64 %mk, %jb"]
    for q in range(_Q):                 # m[k, block columns of vector q]
        lines += [f"  %mo{q} = add i64 %mj, {q * _W}",
                  f"  %pm{q} = getelementptr inbounds float, ptr %m, i64 %mo{q}",
                  f"  %b{q} = load {v}, ptr %pm{q}, align 4"]
    lines += [f"  %c{r}{q}.n = call {v} @llvm.fma.v{_W}f32({v} %a{r}.v, {v} %b{q}, {v} %c{r}{q})"
              for r, q in chains]
    lines += ["  %kk.next = add nsw i64 %kk, 1", "  %kkdone = icmp eq i64 %kk.next, %K",
              "  br i1 %kkdone, label %blk.end, label %kl", "blk.end:"]
    lines += [f"  store {v} %c{r}{q}.n, ptr %pc{r}{q}, align 4" for r, q in chains]
    lines += [f"  %jb.next = add nuw nsw i64 %jb, {_COLS}", "  %jbdone = icmp eq i64 %jb.next, %J0",
              "  br i1 %jbdone, label %prow.end, label %blk"]
    return "\n".join(lines)


# The column tail (N mod 32) runs the plain loop: per element k ascending, one fma per step.
_IR = r"""
declare float @llvm.fma.f32(float, float, float)
declare <W x float> @llvm.fma.vWf32(<W x float>, <W x float>, <W x float>)

define void @fma_chain(ptr noalias readonly %s, ptr noalias readonly %m, ptr noalias %acc,
                       i64 %K, i64 %M, i64 %N, i64 %start) {
entry:
  %any_m = icmp sgt i64 %M, 0
  %any_k = icmp slt i64 %start, %K
  %any_n = icmp sgt i64 %N, 0
  %go0 = and i1 %any_m, %any_k
  %go = and i1 %go0, %any_n
  br i1 %go, label %pre, label %done
pre:
  %tail = urem i64 %N, COLS
  %J0 = sub i64 %N, %tail
  %mlast = sub i64 %M, 1
  %any_blk = icmp sgt i64 %J0, 0
  br i1 %any_blk, label %prow, label %scalar
prow:
  %i0 = phi i64 [ 0, %pre ], [ %i0.next, %prow.end ]
ROWS
  br label %blk
BLOCK
prow.end:
  %i0.next = add nuw nsw i64 %i0, NROWS
  %i0done = icmp sge i64 %i0.next, %M
  br i1 %i0done, label %scalar, label %prow
scalar:
  %any_tail = icmp sgt i64 %tail, 0
  br i1 %any_tail, label %row, label %done
row:
  %i = phi i64 [ 0, %scalar ], [ %i.next, %row.end ]
  %rowbase = mul i64 %i, %N
  %accrow = getelementptr inbounds float, ptr %acc, i64 %rowbase
  br label %kloop
kloop:
  %k = phi i64 [ %start, %row ], [ %k.next, %k.end ]
  %sidx0 = mul i64 %k, %M
  %sidx = add i64 %sidx0, %i
  %sp = getelementptr inbounds float, ptr %s, i64 %sidx
  %a = load float, ptr %sp, align 4
  %mbase = mul i64 %k, %N
  %mrow = getelementptr inbounds float, ptr %m, i64 %mbase
  br label %col
col:
  %j = phi i64 [ %J0, %kloop ], [ %j.next, %col ]
  %mp = getelementptr inbounds float, ptr %mrow, i64 %j
  %b = load float, ptr %mp, align 4
  %cp = getelementptr inbounds float, ptr %accrow, i64 %j
  %c = load float, ptr %cp, align 4
  %r = call float @llvm.fma.f32(float %a, float %b, float %c)
  store float %r, ptr %cp, align 4
  %j.next = add nuw nsw i64 %j, 1
  %jdone = icmp eq i64 %j.next, %N
  br i1 %jdone, label %k.end, label %col
k.end:
  %k.next = add nsw i64 %k, 1
  %kdone = icmp eq i64 %k.next, %K
  br i1 %kdone, label %row.end, label %kloop
row.end:
  %i.next = add nuw nsw i64 %i, 1
  %idone = icmp eq i64 %i.next, %M
  br i1 %idone, label %done, label %row
done:
  ret void
}
""".replace("NROWS", str(_R)).replace("ROWS", _rows_ir()).replace("BLOCK", _block_ir()).replace("<W x", f"<{_W} x").replace("vWf32", f"v{_W}f32").replace(
    "COLS", str(_COLS))

_LOCK = threading.Lock()
_STATE: dict = {}
_QNAN = np.float32(np.nan)
_P = ctypes.POINTER(ctypes.c_float)


def _build():
    import llvmlite.binding as llvm
    try:                                  # share LLVM's process-wide compile lock with the JIT
        from ..lower.llvm.target import _COMPILE_LOCK as compile_lock
    except Exception:                     # pragma: no cover - the lock is an optimisation of safety only
        compile_lock = threading.Lock()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    with compile_lock:
        target = llvm.Target.from_triple(llvm.get_process_triple())
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(), opt=3)
        mod = llvm.parse_assembly(_IR)
        mod.verify()
        pb = llvm.create_pass_builder(tm, llvm.PipelineTuningOptions(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
    addr = engine.get_function_address("fma_chain")
    fn = ctypes.CFUNCTYPE(None, _P, _P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64)(addr)
    return engine, fn


def _fn():
    with _LOCK:
        if "fn" not in _STATE:
            try:
                _STATE["engine"], _STATE["fn"] = _build()
            except Exception:              # no usable llvmlite: the numpy chain is the fallback
                _STATE["fn"] = None
        return _STATE["fn"]


def available() -> bool:
    return _fn() is not None


def fma_chain_f32(s: np.ndarray, m: np.ndarray, acc: np.ndarray, start: int = 0,
                  overwrite: bool = False) -> np.ndarray:
    """The compiled k-chain (see the module contract). s: [K, M], m: [K, N], acc: [M, N]. With
    `overwrite` the caller gives acc up: a C-contiguous float32 acc becomes the result (no copy);
    otherwise acc is untouched."""
    fn = _fn()
    if fn is None:
        from ..numerics.fma import fma_outer_chain_f32
        return fma_outer_chain_f32(s, m, acc, start)
    s = np.ascontiguousarray(s, dtype=np.float32)
    m = np.ascontiguousarray(m, dtype=np.float32)
    out = (acc if overwrite and acc.dtype == np.float32 and acc.flags.c_contiguous and acc.flags.writeable
           else np.array(acc, dtype=np.float32, order="C"))
    K, M = s.shape
    N = m.shape[1]
    if m.shape[0] != K or out.shape != (M, N):
        raise ValueError(f"fma_chain_f32: shapes {s.shape} {m.shape} {out.shape} do not chain")
    if start >= K or M == 0 or N == 0:
        return out
    fn(s.ctypes.data_as(_P), m.ctypes.data_as(_P), out.ctypes.data_as(_P), K, M, N, start)
    nan = np.isnan(out)
    if nan.any():                  # `out` is this call's own array: canonicalise in place
        out[nan] = _QNAN
    return out
