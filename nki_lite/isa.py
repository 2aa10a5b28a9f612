"""nki_lite.isa (nisa): NKI ISA calls (legacy form: each returns its result tile)."""
from .lang.ops_isa import (engine, get_nc_version, gpsimd_engine, memset, nc_matmul, nc_version,  # noqa: F401
                           scalar_engine, sync_engine, tensor_copy, tensor_engine, tensor_reduce, tensor_scalar,
                           tensor_tensor, unknown_engine, vector_engine)
from .lang.ops_legacy import dge_mode, dma_copy, oob_mode  # noqa: F401
from .lang.ops_isa_ext import (activation, activation_reduce, affine_select, bn_aggr, bn_stats, iota,  # noqa: F401
                               max8, nc_find_index8, nc_transpose, reciprocal, scalar_tensor_tensor,
                               tensor_copy_predicated, tensor_scalar_reduce, tensor_tensor_scan)


class matmul_perf_mode:  # noqa: N801 - NKI's spelling (new API)
    """perf_mode= values for nc_matmul: accepted and recorded for the engine model."""
    none = "none"
    double_row = "double_row"


class reduce_cmd:  # noqa: N801
    idle, reset, reset_reduce, reduce, load_reduce = "idle", "reset", "reset_reduce", "reduce", "load_reduce"


class fp32:  # noqa: N801
    min = -3.4028234663852886e38
