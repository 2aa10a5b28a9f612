"""Verifier rules 1 (partition dimension) and 2 (per-instruction free-size limits)."""

import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec
from nki_lite.loc import Loc
from nki_lite.core import ir
from nki_lite.core.affine import Affine
from nki_lite.lower.verify import verify

HERE, line_of, _expect = marker_helpers(__file__)
TARGETS = ("trn1", "trn2", "trn3")


expect = _expect


# ------------------------------------------------------------------------------ rule 1: partitions

@nki.jit
def store_rows(x, rows):
    out = nl.ndarray((rows, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, 0:64])
    ip = nl.arange(rows)[:, None]
    iy = nl.arange(64)[None, :]
    nl.store(out[ip, iy], value=t[ip, iy])  # MARK-P256
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_partition_over_128_is_an_error(target):
    e = expect(store_rows, (spec((128, 64)), 256), errors.ShapeError, "partition_limit", "MARK-P256", target)
    assert "256 partitions" in str(e) and "128" in str(e) and isinstance(e, ValueError)
    assert "nl.affine_range(2)" in e.hint


@pytest.mark.parametrize("target", TARGETS)
def test_partition_128_passes(target):
    store_rows.trace(spec((128, 64)), 128, target=target)


@nki.jit
def block_exp(x, indexed):
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    blk = nl.ndarray((2, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(2):
        blk[b] = nl.load(x[b * 128:(b + 1) * 128, :])
    if indexed:
        for b in nl.affine_range(2):
            nl.store(out[b], value=nl.exp(blk[b]))
    else:
        y = nl.exp(blk)  # MARK-BLOCK
        nl.store(out, value=y)
    return out


def test_block_dimension_in_front_of_partition_is_not_a_tile():
    e = expect(block_exp, (spec((256, 64)), False), errors.ShapeError, "partition_axis", "MARK-BLOCK")
    assert "blk" in str(e) and "tile axis 1" in str(e)
    assert "blk[i]" in e.hint


@pytest.mark.parametrize("target", TARGETS)
def test_block_dimension_indexed_away_passes(target):
    block_exp.trace(spec((256, 64)), True, target=target)


def test_block_tensor_zeros_passes():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((4, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)   # memset of a block tensor: legal
        nl.store(out, value=nl.add(acc[0], acc[3]))
        return out
    k.trace(spec((1, 1)), target="trn1")


# ------------------------------------------------------------------------------ rule 2: free sizes

@nki.jit
def wide_exp(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.exp(t)  # MARK-SBUF-FREE
    nl.store(out, value=y)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_vector_scalar_read_over_64k_from_sbuf(target):
    e = expect(wide_exp, (spec((128, 65537), nl.float8_e4m3),), errors.ShapeError, "free_size_limit",
               "MARK-SBUF-FREE", target)
    assert "65537" in str(e) and "65536" in str(e) and "SBUF" in str(e)


@pytest.mark.parametrize("target", TARGETS)
def test_vector_scalar_read_of_64k_passes(target):
    wide_exp.trace(spec((128, 65536), nl.float8_e4m3), target=target)


@nki.jit
def psum_copy(x, n):
    out = nl.ndarray((128, n), nl.bfloat16, buffer=nl.shared_hbm)
    ps = nl.zeros((128, n), nl.bfloat16, buffer=nl.psum)
    c = nl.copy(ps)  # MARK-PSUM-FREE
    nl.store(out, value=c)
    return out


# trn3: on trn1/trn2 a PSUM tile holds one 2 KiB bank (test_capacity_liveness.py), far below 4K elements
def test_vector_read_over_4k_from_psum():
    e = expect(psum_copy, (spec((1, 1)), 8192), errors.ShapeError, "free_size_limit", "MARK-PSUM-FREE", "trn3")
    assert "8192" in str(e) and "4096" in str(e) and "PSUM" in str(e)


def test_vector_read_of_4k_from_psum_passes():
    psum_copy.trace(spec((1, 1)), 4096, target="trn3")


@nki.jit
def stats(x):
    out = nl.ndarray((128, 6), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nisa.bn_stats(t)  # MARK-BN
    nl.store(out, value=s)
    return out


def test_bn_stats_over_512():
    e = expect(stats, (spec((128, 1024)),), errors.ShapeError, "free_size_limit", "MARK-BN", "trn1")
    assert "1024" in str(e) and "512" in str(e) and "bn_aggr" in e.hint


def test_bn_stats_512_passes():
    stats.trace(spec((128, 512)), target="trn1")


@nki.jit
def vec_transpose(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.transpose(t, engine=nisa.vector_engine)  # MARK-VT
    nl.store(out, value=y)
    return out


def test_vector_transpose_over_32x32():
    e = expect(vec_transpose, (spec((64, 64)),), errors.ShapeError, "free_size_limit", "MARK-VT")
    assert "32x32" in str(e) and "64x64" in str(e)


def test_vector_transpose_32x32_passes():
    vec_transpose.trace(spec((32, 32)), target="trn2")


@nki.jit
def bcast_transpose(x, rows):
    out = nl.ndarray((64, rows), nl.float32, buffer=nl.shared_hbm)
    row = nl.load(x[0:1, 0:64])
    t = nl.transpose(row.broadcast_to((rows, 64)))  # MARK-TE
    nl.store(out, value=t)
    return out


def test_tensor_engine_transpose_over_128x128():
    e = expect(bcast_transpose, (spec((1, 64)), 256), errors.ShapeError, "free_size_limit", "MARK-TE")
    assert "128x128" in str(e) and "256x64" in str(e)


def test_tensor_engine_transpose_128_rows_passes():
    bcast_transpose.trace(spec((1, 64)), 128, target="trn2")


def _transpose_ir(p, f):
    """Hand-built IR: a Tensor Engine transpose of an SBUF [p, f] view (the frontend cannot build one
    with f > 128 because the result tile would have f partitions)."""
    loc = Loc(HERE, line_of("MARK-TT"), 4)  # MARK-TT
    x = ir.Buffer("x", ir.Space.HBM, (p, f), "float32", "input", loc=loc)
    src = ir.Buffer("src", ir.Space.SBUF, (min(p, 128), f), "float32", loc=loc)
    dst = ir.Buffer("dst", ir.Space.SBUF, (min(f, 128), p), "float32", loc=loc)
    out = ir.Buffer("out", ir.Space.HBM, (min(f, 128), p), "float32", "output", hbm_kind="shared_hbm", loc=loc)
    a = ir.Access.full
    at = (("engine", "tensor"),)
    srcv = ir.Access("src", (Affine.var("@0"), Affine.var("@1")), (p, f))
    dstv = ir.Access("dst", (Affine.var("@0"), Affine.var("@1")), (f, p))
    body = (ir.Instr("alloc", (a(src),), (), (), None, loc),
            ir.Instr("dma_copy", (a(src),), (a(x),), (("engine", "dma"),), None, loc),
            ir.Instr("alloc", (a(dst),), (), (), None, loc),
            ir.Instr("transpose", (dstv,), (srcv,), at, None, loc),
            ir.Instr("dma_copy", (a(out),), (a(dst),), (("engine", "dma"),), None, loc))
    return ir.Kernel("tt", ("x",), ("out",), (x, src, dst, out), body, target="trn2")


def test_tensor_engine_transpose_over_128x128_hand_built_ir():
    with pytest.raises(errors.ShapeError) as ei:
        verify(_transpose_ir(128, 256))
    assert ei.value.name == "free_size_limit" and "128x256" in str(ei.value)
    assert f"{HERE}:{line_of('MARK-TT')}:" in str(ei.value)


def test_tensor_engine_transpose_128x128_hand_built_ir_passes():
    verify(_transpose_ir(128, 128))
