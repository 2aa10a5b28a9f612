"""nki_lite.language (nl): the NKI language namespace (legacy `neuronxcc.nki.language` surface).

Everything here is re-exported from nki_lite/lang; see docs/status.md for what is built.
"""
from .core.dtypes import bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, int8, int16, int32, tfloat32, uint8, uint16, uint32
from .core.dtypes import float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4, float8_e8m0fnu  # noqa: F401  (MX formats)
from .lang.index import arange, ds, mgrid  # noqa: F401
from .core.targets import TARGETS as _TARGETS
from .lang.creation import empty_like, finfo, full, ndarray, ones, ones_like, zeros, zeros_like  # noqa: F401
from .lang.memory import hbm, par_dim, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from .lang.ops_math import (abs, add, all, arctan, bitwise_and, bitwise_or, bitwise_xor, broadcast_to,  # noqa: F401
                            copy, cos, divide, equal, fmod, erf, exp, fp32, gelu, gelu_apprx_tanh, greater, greater_equal,
                            invert, left_shift, less, less_equal, log, logical_and, logical_not, logical_or, logical_xor,
                            loop_reduce, matmul,
                            max, maximum, mean, min, minimum, mish, mod, multiply, negative, not_equal, power, prod,
                            reciprocal, relu, right_shift, rsqrt, sigmoid, sign, silu, silu_dx, sin, softplus, sqrt, square,
                            subtract, sum, tan, tanh, transpose, var, where, floor, ceil, trunc)
from .lang.ops_indirect import atomic_rmw, gather_flattened  # noqa: F401
from .lang import views as _views, views_merge as _views_merge  # noqa: F401  (tensor view methods)
from .lang.ops_memory import (device_print, load, load_transpose2d, shared_constant,  # noqa: F401
                              shared_identity_matrix, static_cast, store)
from .lang.rng import dropout, rand, random_seed  # noqa: F401
from .lang.ranges import nc, spmd_dim, affine_range, num_programs, program_id, program_ndim, sequential_range, static_range  # noqa: F401,E501

bool = bool_  # noqa: A001 - NKI exposes nl.bool_; some code writes nl.bool


_TRN1 = _TARGETS["trn1"]       # NKI's nl.tile_size is a static namespace: the trn1 (NeuronCore-v2) values


class tile_size:  # noqa: N801 - NKI's spelling
    """Hardware tile limits (NKI_REFERENCE §1.6), read from core/targets.py."""
    pmax = _TRN1.partitions
    psum_fmax = _TRN1.psum_bank_bytes // 4              # fp32 elements in one PSUM bank
    gemm_stationary_fmax = _TRN1.matmul_stationary_fmax
    gemm_moving_fmax = _TRN1.matmul_moving_fmax
    bn_stats_fmax = _TRN1.bn_stats_fmax
    psum_bank_fmax = _TRN1.psum_bank_bytes // 4
    psum_num_banks = _TRN1.psum_banks
    psum_min_align = 4                                  # bytes (alignment, not a size limit)
    sbuf_min_align = 4
    total_available_sbuf_size = _TRN1.sbuf_partition_bytes
