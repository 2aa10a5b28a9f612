"""nki_lite.language (nl): the NKI language namespace (legacy `neuronxcc.nki.language` surface).

Everything here is re-exported from nki_lite/lang; see docs/status.md for what is built.
"""
from .lang.api import api as _api
from .core.dtypes import bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, int8, int16, int32, tfloat32, uint8, uint16, uint32
from .lang.index import arange, ds, mgrid  # noqa: F401
from .lang.memory import (empty_like, finfo, full, hbm, ndarray, ones, ones_like, par_dim, private_hbm, psum,  # noqa: F401
                          sbuf, shared_hbm, zeros, zeros_like)
from .lang.ops_isa_ext import device_print  # noqa: F401
from .lang.ops_math import (abs, add, all, arctan, bitwise_and, bitwise_or, bitwise_xor, broadcast_to,  # noqa: F401
                            copy, cos, divide, equal, fmod, erf, exp, fp32, gelu, gelu_apprx_tanh, greater, greater_equal,
                            invert, left_shift, less, less_equal, log, logical_and, logical_or, logical_xor, matmul,
                            max, maximum, mean, min, minimum, mish, mod, multiply, negative, not_equal, power, prod,
                            reciprocal, relu, right_shift, rsqrt, sigmoid, sign, silu, sin, softplus, sqrt, square,
                            subtract, sum, tan, tanh, transpose, var, where)
from .lang.ops_legacy import loop_reduce  # noqa: F401
from .lang.ops_memory import (load, load_transpose2d, shared_constant, shared_identity_matrix,  # noqa: F401
                              static_cast, store)
from .lang.ranges import nc, spmd_dim, affine_range, num_programs, program_id, program_ndim, sequential_range, static_range  # noqa: F401,E501

bool = bool_  # noqa: A001 - NKI exposes nl.bool_; some code writes nl.bool


@_api("nl.logical_not")
def logical_not(x, *, dtype=None, mask=None):
    """nl.logical_not: 1 where x == 0, else 0."""
    return equal(x, 0, dtype=dtype if dtype is not None else "bool", mask=mask)


class tile_size:  # noqa: N801 - NKI's spelling
    """Hardware tile limits (NKI_REFERENCE §1.6)."""
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_bank_fmax = 512
    psum_num_banks = 8
    psum_min_align = 4
    sbuf_min_align = 4
    total_available_sbuf_size = 192 * 1024 - 16 * 1024
