"""Per-instruction cost rules (issue 6, point 2): coverage, cycle counts as literals, monotonicity.

Every literal below is the documented formula evaluated by hand (shared/NKI_REFERENCE.md §4.7,
with the per-generation rules of §3.1 / §4.7 / §4.8); the formula is in the comment.
"""
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.lower.cost.rules import CostCtx, cost_of
from nki_lite.core.targets import TARGETS
from nki_lite.core.ir import walk
from nki_lite.core.ops import BACKENDS, OPS, missing_rules


def _costs(kernel, *args, target="trn1"):
    k = kernel.trace(*args, target=target)
    ctx = CostCtx(TARGETS[target], k.buffer_map)
    return [(ins, cost_of(ins, ctx)) for ins, _ in walk(k.body) if ins.op != "alloc"]


def _one(kernel, op, *args, target="trn1", **match):
    found = [c for ins, c in _costs(kernel, *args, target=target)
             if ins.op == op and all(ins.attr(k) == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


# ------------------------------------------------------------------------------ coverage

def test_every_op_has_a_cost_rule():
    assert "cost" in BACKENDS
    assert [n for n, op in OPS.items() if "cost" not in op.rules] == []
    assert missing_rules() == []


# ------------------------------------------------------------------------------ kernels

@nki.jit
def one_matmul(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.nc_matmul(nl.load(a), nl.load(b))
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def two_inputs(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def unary(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    e = nl.exp(t)                                              # activation on ScalarE
    c = nisa.tensor_copy(t)                                    # tensor_copy on VectorE
    s = nl.sum(t, axis=1)                                      # tensor_reduce
    z = nl.zeros(a.shape, dtype=a.dtype, buffer=nl.sbuf)       # memset 0
    i = nisa.iota(nl.arange(a.shape[1])[None, :], dtype=nl.int32)   # iota on GpSimd
    nl.store(out, nl.add(nl.add(e, c), z))
    s_out = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i_out = nl.ndarray((1, a.shape[1]), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(s_out, s)
    nl.store(i_out, i)
    return out, s_out, i_out


@nki.jit
def psum_plus_sbuf(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.nc_matmul(nl.load(a), nl.load(b))
    res = nl.add(acc, nl.load(b))
    nl.store(out, res)
    return out


F32, BF16 = nl.float32, nl.bfloat16


def P(shape, dt):
    return nt.tensor[list(shape), dt]


# ------------------------------------------------------------------------------ TensorE

@pytest.mark.parametrize("K,M,N,dt,cycles", [
    (128, 128, 512, BF16, 512),    # max(min(64, M=128), N=512) = 512
    (128, 128, 32, BF16, 64),      # max(min(64, 128), 32) = 64 (MM_INIT_LATENCY)
    (128, 32, 16, BF16, 32),       # max(min(64, 32), 16) = 32
    (128, 128, 512, F32, 2048),    # 512 x 4 (fp32)
    (64, 128, 512, BF16, 512),     # K does not change the time: the PE rows are idle
])
def test_matmul_cycles(K, M, N, dt, cycles):
    c = _one(one_matmul, "nc_matmul", P((K, M), dt), P((K, N), dt))
    assert c.engine == "tensor"
    assert c.cycles == cycles
    assert c.ns == pytest.approx(cycles / 2.8)               # TensorE clock 2.8 GHz on trn1
    # the profiler counts an fp32 matmul twice in hardware_flops (measured on trn1, rules.py)
    assert c.flops == 2 * K * M * N * (2 if dt == F32 else 1)


def test_fp32_hardware_flops_count_twice_and_adjusted_flops_stay_4x_the_macs():
    # NKIBench trn1 fp32 profiles: hardware_flops = 2 x (2·K·M·N + transposes); time stays 4x bf16
    bf = _one(one_matmul, "nc_matmul", P((128, 128), BF16), P((128, 512), BF16))
    fp = _one(one_matmul, "nc_matmul", P((128, 128), F32), P((128, 512), F32))
    macs2 = 2 * 128 * 128 * 512
    assert bf.flops == macs2 and fp.flops == 2 * macs2
    assert bf.adjusted_flops == macs2 and fp.adjusted_flops == 4 * macs2      # §6.4 BF16-equivalent
    # an fp32 kernel's HFU therefore tops out at half the bf16 one for the same busy TensorE
    assert (fp.flops / fp.ns) / (bf.flops / bf.ns) == pytest.approx(0.5)


def test_matmul_fp32_is_4x_bf16_on_every_target():
    for t in TARGETS:
        bf = _one(one_matmul, "nc_matmul", P((128, 128), BF16), P((128, 512), BF16), target=t)
        fp = _one(one_matmul, "nc_matmul", P((128, 128), F32), P((128, 512), F32), target=t)
        assert fp.ns == pytest.approx(4 * bf.ns)


def test_matmul_monotone_in_moving_size():
    ns = [_one(one_matmul, "nc_matmul", P((128, 128), BF16), P((128, n), BF16)).ns for n in (1, 64, 128, 256, 512)]
    assert ns == sorted(ns)


@nki.jit
def fp8_matmul(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row")
    nl.store(out, nl.copy(acc))
    return out


def test_fp8_double_row_doubles_throughput_on_trn2_only():
    fp8 = nl.float8_e4m3
    for t, speed in (("trn1", 1.0), ("trn2", 2.0), ("trn3", 2.0)):
        bf = _one(one_matmul, "nc_matmul", P((128, 128), BF16), P((128, 512), BF16), target=t)
        f8 = _one(fp8_matmul, "nc_matmul", P((128, 128), fp8), P((128, 512), fp8), target=t)
        assert (f8.flops / f8.ns) / (bf.flops / bf.ns) == pytest.approx(speed)


def test_transpose_on_tensor_engine():
    # nl.matmul(x, y) with transpose_x=False transposes x [128, 128] on TensorE first:
    # max(P=128, min(64, F=128)) = 128 cycles, x4 for fp32 on trn1 = 512
    @nki.jit
    def mm(x, y):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.matmul(nl.load(x), nl.load(y))))
        return out
    c = _one(mm, "transpose", P((128, 128), BF16), P((128, 512), BF16))
    assert c.cycles == 128 and c.transpose_flops == 2 * 128 * 128 * 128
    c32 = _one(mm, "transpose", P((128, 128), F32), P((128, 512), F32))
    assert c32.cycles == 512
    assert c32.transpose_flops == c32.flops == 2 * (2 * 128 * 128 * 128)   # fp32 counted twice (rules.py)
    c32_trn2 = _one(mm, "transpose", P((128, 128), F32), P((128, 512), F32), target="trn2")
    assert c32_trn2.cycles == 256                             # transpose mode: 2x faster fp32 (v3)


# ------------------------------------------------------------------------------ Vector / Scalar / GpSimd

def test_tensor_tensor_cycles():
    # both inputs fp32 in SBUF: max(MIN_II, 2N) = 2 x 512 = 1024 cycles at 1.12 GHz
    c = _one(two_inputs, "tensor_tensor", P((128, 512), F32), P((128, 512), F32))
    assert (c.engine, c.cycles) == ("vector", 1024)
    assert c.ns == pytest.approx(1024 / 1.12)
    # all bf16 in SBUF, add, unit stride: max(MIN_II, N) = 512
    assert _one(two_inputs, "tensor_tensor", P((128, 512), BF16), P((128, 512), BF16)).cycles == 512
    # ... and on trn2 the perf mode halves it (§4.7): 512 / 2 = 256
    assert _one(two_inputs, "tensor_tensor", P((128, 512), BF16), P((128, 512), BF16), target="trn2").cycles == 256
    # one input in PSUM, the other in SBUF: max(MIN_II, N) = 512
    c = _one(psum_plus_sbuf, "tensor_tensor", P((128, 128), F32), P((128, 512), F32))
    assert c.cycles == 512
    # tiny: max(MIN_II=64, 2 x 8) = 64
    assert _one(two_inputs, "tensor_tensor", P((128, 8), F32), P((128, 8), F32)).cycles == 64


def test_unary_cycles():
    args = (P((128, 512), BF16),)
    assert _one(unary, "activation", *args).cycles == 512              # max(MIN_II, N=512), ScalarE
    assert _one(unary, "activation", *args).ns == pytest.approx(512 / 1.4)
    assert _one(unary, "tensor_copy", *args).cycles == 512             # max(MIN_II, N) on trn1
    assert _one(unary, "tensor_copy", *args, target="trn2").cycles == 128   # 4x perf mode: bf16 SBUF unit stride
    assert _one(unary, "tensor_reduce", *args).cycles == 256           # bf16 add: max(MIN_II, N/2)
    assert _one(unary, "memset", *args).cycles == 256                  # zero, 16-bit: max(MIN_II, N/2)
    assert _one(unary, "iota", *args).cycles == 150 + 512              # GPSIMD_START + N
    f32 = (P((128, 512), F32),)
    assert _one(unary, "tensor_reduce", *f32).cycles == 512            # fp32: max(MIN_II, N)
    assert _one(unary, "memset", *f32).cycles == 512                   # fp32 zero: max(MIN_II, N)
    assert _one(unary, "activation", P((128, 1), F32)).cycles == 64    # max(MIN_II=64, N=1)


def test_trn3_scalar_engine_two_byte_rate():
    # §3.1: NC-v4 ScalarE processes 256 BF16 elements per cycle (2x): 512 / 2
    assert _one(unary, "activation", P((128, 512), BF16), target="trn3").cycles == 256
    assert _one(unary, "activation", P((128, 512), F32), target="trn3").cycles == 512


def test_strided_access_penalty():
    @nki.jit
    def strided(a):
        out = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.exp(t[:, 0:512:2]))        # innermost stride 2 x 4 B = 8 B: no penalty
        return out

    @nki.jit
    def strided8(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.exp(t[:, 0:512:8]))        # stride 8 x 4 B = 32 B > 16 B: x2 (§3.4)
        return out
    assert _one(strided, "activation", P((128, 512), F32)).cycles == 256     # max(MIN_II, N=256)
    assert _one(strided8, "activation", P((128, 512), F32)).cycles == 128    # max(MIN_II, 64) x 2


# ------------------------------------------------------------------------------ DMA

@nki.jit
def left_columns(a):
    """Loads a's first 64 columns: rows of 64 elements at a stride of a.shape[1] (not adjacent)."""
    out = nl.ndarray((a.shape[0], 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a[:, 0:64]))
    return out


def test_dma_cycles():
    # [128, 512] fp32 HBM -> SBUF on trn1, rows adjacent in HBM: each of the 16 queues serves 8
    # partitions and reads their rows as one descriptor (AWS DMA overview, example 2; perf guide
    # Opt #9: [128, 1024] fp32 = 16 transfers of 32 KiB): (8 x 2048 + 256) B / 17 B/ns = 978.8 ns
    cs = [c for ins, c in _costs(two_inputs, P((128, 512), F32), P((128, 512), F32)) if ins.op == "dma_copy"]
    assert len(cs) == 3
    for c in cs:
        assert (c.engine, c.queues, c.descriptors, c.dma_bytes) == ("dma", 16, 16, 128 * 512 * 4)
        assert c.ns == pytest.approx((8 * 2048 + 256) / 17)
    assert cs[0].hbm_read_bytes == 128 * 512 * 4 and cs[2].hbm_write_bytes == 128 * 512 * 4
    # trn2: 23 B/ns per queue, capped at 362.5 / 16 = 22.656 B/ns by the NC's HBM share
    c2 = [c for ins, c in _costs(two_inputs, P((128, 512), F32), P((128, 512), F32), target="trn2")
          if ins.op == "dma_copy"][0]
    assert c2.ns == pytest.approx((8 * 2048 + 256) / (362.5 / 16))


def test_dma_engines_follow_partition_groups():
    # DMA overview example 1: A[4, 4096] bf16 lands on 4 partitions, all served by DMA engine 0:
    # one 32 KiB transfer on one queue (profiled 1416 ns on trn2)
    c = [c for ins, c in _costs(two_inputs, P((4, 4096), BF16), P((4, 4096), BF16), target="trn2")
         if ins.op == "dma_copy"][0]
    assert (c.queues, c.descriptors) == (1, 1)
    assert c.ns == pytest.approx((32768 + 256) / 23)
    # 40 partitions: groups of 8 -> 5 engines
    c = [c for ins, c in _costs(two_inputs, P((40, 256), F32), P((40, 256), F32)) if ins.op == "dma_copy"][0]
    assert c.queues == 5


def test_dma_small_rows_are_inefficient():
    # [128, 64] bf16 rows at a 256-element stride: 128 B per descriptor -> efficiency 128 / (128 + 256)
    c = [c for ins, c in _costs(left_columns, P((128, 256), BF16)) if ins.op == "dma_copy"][0]
    assert c.descriptors == 128
    assert c.ns == pytest.approx(8 * (128 + 256) / 17)
    assert (c.dma_bytes / c.ns) / (16 * 17) == pytest.approx(1 / 3)


def test_more_data_is_never_cheaper():
    prev = 0.0
    for n in (1, 4, 64, 256, 512, 2048):
        c = [c for ins, c in _costs(two_inputs, P((128, n), F32), P((128, n), F32)) if ins.op == "dma_copy"][0]
        v = [c for ins, c in _costs(two_inputs, P((128, n), F32), P((128, n), F32)) if ins.op == "tensor_tensor"][0]
        assert c.ns >= prev
        assert v.ns > 0
        prev = c.ns
