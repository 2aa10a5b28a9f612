"""NL-E505 (lower/verify_alloc.py): directly allocated tiles at overlapping addresses while both are live.

The two lifetime conflicts of NKI's direct allocation guide ("Common Errors", #3) are errors at the
write that destroys a live value: two tensors at partly overlapping addresses, and a rotating tensor
with fewer physical tiles than blocks alive at once. The guide's legal reuses run unchanged in both
modes: modulo rotation where each block lives within its iteration, a tensor declared inside its
loop, tensors at one address with disjoint lifetimes, a tile rewritten every iteration next to
another one, partitions that do not intersect, separate SPMD programs, PSUM banks used in turn.
"""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.compiler as ncc
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors

from .markers import marker_helpers, spec

HERE, line_of, expect = marker_helpers(__file__)
W = 512                                     # fp32 columns per tile: 2048 bytes per partition
A = spec((128, 8 * W))
RNG = np.random.default_rng(11)


def _tile(a, addr, name):
    """One [128, W] SBUF tile of a's dtype placed at byte `addr`."""
    return nl.ndarray((nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=addr), name=name)


def _conflict(kernel, marker, args=(A,)):
    e = expect(kernel, args, errors.MemoryCapacityError, "allocation_overlap", marker)
    assert e.code == "NL-E505"
    return str(e)


@nki.jit
def too_few_tiles(a):
    # the guide's example: all eight blocks are alive after the first loop, two physical tiles hold them
    out = nl.ndarray((128, 8 * W), a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for i in nl.affine_range(8):
        t[i] = nl.load(a[:, i * W:(i + 1) * W])  # MARK-ROTATE
    for i in nl.affine_range(8):
        r = _tile(a, 2 * 4 * W, "r")
        r[...] = nl.exp(t[i])
        nl.store(out[:, i * W:(i + 1) * W], value=r)
    return out


def test_rotating_tensor_with_too_few_tiles_is_an_error_at_the_overwriting_load():
    msg = _conflict(too_few_tiles, "MARK-ROTATE")
    assert "block (0,) and block (2,) of 't'" in msg and "share a physical tile" in msg
    assert "num_free_tiles" in msg                                          # the hint
    assert f"test_alloc_overlap.py:{line_of('MARK-ROTATE')}" in msg


@nki.jit
def declared_per_iteration(a):
    # the guide's correct way: the tensor is declared inside the outer loop, its blocks die within it
    out = nl.ndarray((128, 8 * W), a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(4):
        t = nl.ndarray((2, nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.affine_range(2):
            r = _tile(a, 2 * 4 * W, "r")
            t[i] = nl.load(a[:, (2 * j + i) * W:(2 * j + i + 1) * W])
            r[...] = nl.exp(t[i])
            nl.store(out[:, (2 * j + i) * W:(2 * j + i + 1) * W], value=r)
    return out


@nki.jit
def rotation_within_iterations(a):
    # 8 logical blocks over 2 physical tiles, each block written and read in its own iteration
    out = nl.ndarray((128, 8 * W), a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for i in nl.affine_range(8):
        t[i] = nl.load(a[:, i * W:(i + 1) * W])
        r = _tile(a, 2 * 4 * W, "r")
        r[...] = nl.exp(t[i])
        nl.store(out[:, i * W:(i + 1) * W], value=r)
    return out


@nki.jit
def shared_scratch_each_iteration(a):
    # x and y share one address, declared outside the loop: in every iteration x is written and read,
    # then y is written (x is dead) and read; the next iteration rewrites x whole before reading it
    out = nl.ndarray((128, 8 * W), a.dtype, buffer=nl.shared_hbm)
    x = _tile(a, 0, "x")
    y = _tile(a, 0, "y")
    z = _tile(a, 4 * W, "z")
    for i in nl.sequential_range(8):
        x[...] = nl.load(a[:, i * W:(i + 1) * W])
        z[...] = nl.multiply(x, 2.0)
        y[...] = nl.add(z, 1.0)
        nl.store(out[:, i * W:(i + 1) * W], value=y)
    return out


@nki.jit
def in_place_between_blocks(a):
    # one physical tile for two blocks: the instruction reads block 0 and writes block 1 at the same place
    out = nl.ndarray((128, W), a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[0] = nl.load(a[:, 0:W])
    t[1] = nl.exp(t[0])
    nl.store(out, value=t[1])
    return out


@nki.jit
def disjoint_partitions(a):
    # the same bytes in partitions 0..63 and 64..127 do not overlap
    out = nl.ndarray((128, W), a.dtype, buffer=nl.shared_hbm)
    lo = nl.ndarray((nl.par_dim(64), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, base_partition=0))
    hi = nl.ndarray((nl.par_dim(64), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, base_partition=64))
    lo[...] = nl.load(a[0:64, 0:W])
    hi[...] = nl.load(a[64:128, 0:W])
    nl.store(out[0:64, :], value=lo)
    nl.store(out[64:128, :], value=hi)
    return out


@nki.jit
def per_program(a):
    # every SPMD program is its own launch: their tiles at one address never meet
    out = nl.ndarray((128, 2 * W), a.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    t = nl.ndarray((2, nl.par_dim(128), W), a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[p] = nl.load(a[:, p * W:(p + 1) * W])
    nl.store(out[:, p * W:(p + 1) * W], value=t[p])
    return out


def _matmul_operands(a, b):
    """The PSUM kernels' SBUF tiles, placed directly: x = a, y = b loaded, r a result tile."""
    x = nl.ndarray((nl.par_dim(128), 128), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))
    r = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512 + 2048))
    x[...] = nl.load(a)
    y[...] = nl.load(b)
    return x, y, r


@nki.jit
def psum_in_turn(a, b):
    # p, q and acc share bank 3, one value at a time; acc is declared first but its value starts at its
    # first `+=` matmul (the group's overwrite), once q is dead (nki-samples' allocated attention
    # declares its accumulators so)
    out = nl.ndarray((3, 128, 512), nl.float32, buffer=nl.shared_hbm)
    x, y, r = _matmul_operands(a, b)
    acc = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
    p = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
    q = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
    for k, t in enumerate((p, q)):
        t[...] = nisa.nc_matmul(x, y)
        r[...] = nl.copy(t)
        nl.store(out[k], value=r)
    for i in nl.affine_range(2):
        acc[...] += nisa.nc_matmul(x, y)
    r[...] = nl.copy(acc)
    nl.store(out[2], value=r)
    return out


@nki.jit
def read_in_first_iteration_only(a):
    # first's last read is in iteration 0 (the mask selects it), so second may take its address after it
    out = nl.ndarray((128, 4 * W), a.dtype, buffer=nl.shared_hbm)
    first, second = _tile(a, 0, "first"), _tile(a, 0, "second")
    first[...] = nl.load(a[:, 0:W])
    for i in nl.sequential_range(4):
        nl.store(out[:, 0:W], value=first, mask=(i < 1))
        second[...] = nl.load(a[:, i * W:(i + 1) * W])
        nl.store(out[:, i * W:(i + 1) * W], value=second, mask=(i > 0))
    return out


@pytest.mark.parametrize("mode", ["interpret", "jit"])
@pytest.mark.parametrize("kernel, want", [
    (read_in_first_iteration_only, lambda a: a[:, :4 * W]),
    (declared_per_iteration, lambda a: np.exp(a)),
    (rotation_within_iterations, lambda a: np.exp(a)),
    (shared_scratch_each_iteration, lambda a: a * 2 + 1),
    (in_place_between_blocks, lambda a: np.exp(a[:, :W])),
    (disjoint_partitions, lambda a: a[:, :W]),
])
def test_legal_reuse_runs(kernel, want, mode):
    a = RNG.random((128, 8 * W), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, mode=mode), want(a), rtol=1e-6)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_programs_are_separate_launches(mode):
    a = RNG.random((128, 2 * W), dtype=np.float32)
    np.testing.assert_array_equal(per_program[2](a, mode=mode), a)


@pytest.mark.parametrize("mode", ["interpret", "jit"])
def test_one_psum_bank_used_in_turn_runs(mode):
    a = RNG.random((128, 128), dtype=np.float32)
    b = RNG.random((128, 512), dtype=np.float32)
    got = psum_in_turn(a, b, mode=mode)
    np.testing.assert_allclose(got, np.stack([a.T @ b, a.T @ b, 2 * (a.T @ b)]), rtol=1e-4)


@nki.jit
def overlapping_tensors(a):
    # as the guide's t0/t1: t1 starts at byte 1024, inside t0's bytes, while t0's value is still needed
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    t0 = nl.ndarray((nl.par_dim(128), 1024), nl.bfloat16, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t1 = nl.ndarray((nl.par_dim(128), 512), nl.bfloat16, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    r = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=8192))
    t0[...] = nl.load(a[:, 0:1024])
    t1[...] = nl.load(a[:, 1024:1536])  # MARK-T1
    r[...] = nl.add(t0[:, 0:512], t1, dtype=nl.float32)
    nl.store(out, value=r)
    return out


def test_partly_overlapping_tensors_both_live_are_an_error():
    msg = _conflict(overlapping_tensors, "MARK-T1", (spec((128, 2048), np.float32),))
    assert "'t0'" in msg and "'t1'" in msg and "overlapping addresses" in msg
    assert "bytes 0..2047" in msg and "bytes 1024..2047" in msg


def _psum_both_live(a, b):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    x, y, r = _matmul_operands(a, b)
    p = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
    q = nl.ndarray((nl.par_dim(128), 128), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
    p[...] = nisa.nc_matmul(x, y)
    q[...] = nisa.nc_matmul(x, x)  # MARK-PSUM-BOTH
    r[...] = nl.add(p, q[:, 0:1])
    nl.store(out, value=r)
    return out


def test_two_psum_tiles_live_in_one_bank_are_an_error():
    msg = _conflict(nki.jit(_psum_both_live), "MARK-PSUM-BOTH",
                    (spec((128, 128)), spec((128, 512))))
    assert "PSUM bank 3" in msg


@nki.jit
def carried_value_overwritten(a):
    # acc's value written in one iteration is read in the next (a sequential loop carries it): u, at
    # acc's address, written later in the same iteration destroys it
    out = nl.ndarray((128, 4 * W), a.dtype, buffer=nl.shared_hbm)
    acc = _tile(a, 0, "acc")
    tmp = _tile(a, 4 * W, "tmp")
    u = _tile(a, 0, "u")
    acc[...] = nl.load(a[:, 0:W])
    for i in nl.sequential_range(3):
        tmp[...] = nl.load(a[:, (i + 1) * W:(i + 2) * W])
        acc[...] = nl.add(acc, tmp)
        u[...] = nl.multiply(tmp, 2.0)  # MARK-CARRIED
        nl.store(out[:, i * W:(i + 1) * W], value=u)
    nl.store(out[:, 3 * W:4 * W], value=acc)
    return out


def test_value_carried_across_iterations_is_live_between_them():
    msg = _conflict(carried_value_overwritten, "MARK-CARRIED")
    assert "'acc'" in msg and "'u'" in msg and "read again" in msg
