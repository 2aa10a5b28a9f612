"""What every benchmark shares: `interleaved` timing, and the header every table carries: CPU model, the BLAS numpy uses (library, version, core
type as threadpoolctl reports it), thread counts, and whether the OPENBLAS_* overrides are set.

Benchmarks compare with numpy as users have it: run them with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
unset (`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/...`); `header()` says so
when either is set, because they slow numpy's BLAS on some processors.
"""
from __future__ import annotations

import os
import time

from nki_lite.tools.bench import interleaved, settle_seconds, SETTLE_SECONDS  # noqa: F401  (re-exported: one timing loop for the CLI and the scripts)
from nki_lite.tools.sysinfo import cpu_model  # the one reader of the CPU's model name


def _cpuinfo() -> dict:
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (x.strip() for x in line.split(":", 1))
                    info.setdefault(k, v)
                elif info:
                    break                                   # the first processor's block is enough
    except OSError:
        pass
    return info


_PEAK: list = []


def fma_peak_gflops() -> tuple[float, str] | None:
    """One core's fp32 FMA peak in GFLOP/s, measured: a JIT-compiled loop (llvmlite, host CPU) of 12
    independent fused multiply-add chains one register wide (16 lanes with AVX-512, 8 with AVX2: wider
    chains would not fit the register file and the probe would time spills), best of 5 timed runs of
    2e6 iterations. The clock
    /proc/cpuinfo reports on a VM is the nominal one (here 2.6 GHz), below the boost clock the core
    really runs at, so a peak computed from it is too low; the measured one is the bound a correct
    one-thread figure cannot exceed."""
    if _PEAK:
        return _PEAK[0]
    try:
        lanes = _native_lanes()
        _PEAK.append((_measure_fma(lanes=lanes), f"measured: 12 independent <{lanes} x float> FMA chains, best of 5"))
    except Exception:                                  # no llvmlite / no JIT on this host
        _PEAK.append(None)
    return _PEAK[0]


def _native_lanes() -> int:
    """fp32 lanes of one vector register of this CPU, as LLVM sees it."""
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features()
    return 16 if feats.get("avx512f") else 8 if feats.get("avx") else 4


def _measure_fma(chains: int = 12, n: int = 2_000_000, lanes: int = 16) -> float:
    import ctypes

    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    vec = f"<{lanes} x float>"
    half = "<" + ", ".join(["float 5.000000e-01"] * lanes) + ">"
    ir = ["define void @probe(i64 %n, ptr %out) {", "entry:", "  br label %loop", "loop:",
          "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for k in range(chains):
        start = "<" + ", ".join([f"float {1.0 + k * 0.125:e}"] * lanes) + ">"
        ir.append(f"  %a{k} = phi {vec} [{start}, %entry], [%b{k}, %loop]")
    for k in range(chains):
        ir.append(f"  %b{k} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{k}, {vec} {half}, {vec} {half})")
    ir += ["  %i1 = add i64 %i, 1", "  %c = icmp ult i64 %i1, %n", "  br i1 %c, label %loop, label %done", "done:"]
    acc = "%b0"
    for k in range(1, chains):                          # keep every chain live
        ir.append(f"  %s{k} = fadd {vec} {acc}, %b{k}")
        acc = f"%s{k}"
    ir += [f"  store {vec} {acc}, ptr %out, align 4", "  ret void", "}",
           f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})"]
    mod = llvm.parse_assembly("\n".join(ir))
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(ee.get_function_address("probe"))
    out = (ctypes.c_float * lanes)()
    fn(1000, ctypes.addressof(out))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        fn(n, ctypes.addressof(out))
        best = min(best, time.perf_counter() - t0)
    return n * chains * lanes * 2 / best * 1e-9


def threads_line(nki_threads: int) -> str:
    """The thread counts one table was measured with: nki_lite's and numpy's BLAS (as threadpoolctl
    reports it at that moment)."""
    blas = "?"
    try:
        from threadpoolctl import threadpool_info
        counts = [str(lib.get("num_threads")) for lib in threadpool_info() if lib.get("user_api") == "blas"]
        blas = ",".join(counts) or "none"
    except ImportError:
        pass
    mine = "all cores" if nki_threads == 0 else str(nki_threads)
    return f"threads: nki_lite {mine} (NKI_LITE_NUM_THREADS={nki_threads}), numpy BLAS {blas}"


def blas_lines() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["BLAS: unknown (threadpoolctl not installed; `make bench` installs it)"]
    out = []
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            out.append(f"BLAS: {lib.get('internal_api')} {lib.get('version')} core type "
                       f"{lib.get('architecture', '?')}, {lib.get('num_threads')} threads ({lib.get('filepath')})")
    return out or ["BLAS: none found by threadpoolctl"]


def header(title: str) -> str:
    import numpy as np
    info = _cpuinfo()
    ident = f"{info.get('vendor_id', '?')} family {info.get('cpu family', '?')} model {info.get('model', '?')}"
    lines = [f"== {title}", f"CPU: {cpu_model()} ({ident}; {os.cpu_count()} logical cores), numpy {np.__version__}"]
    lines += blas_lines()
    peak = fma_peak_gflops()
    if peak:
        lines.append(f"one core's fp32 FMA peak: {peak[0]:.0f} GFLOP/s ({peak[1]}); a one-thread figure above it is "
                     "a measurement error")
    overrides = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if overrides:
        lines.append(f"WARNING: {overrides} set: numpy's BLAS is not running as users have it; rerun with "
                     "`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...`")
    else:
        lines.append("OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: unset (numpy's BLAS on its native kernel)")
    return "\n".join(lines)
