"""nki_lite.isa (nisa): NKI ISA calls (legacy form: each returns its result tile).

Re-exported from lang/isa_compute.py, isa_reduce.py, isa_data.py and isa_common.py (the enums)."""
from .lang.isa_common import (engine, get_nc_version, gpsimd_engine, nc_version, scalar_engine,  # noqa: F401
                              sync_engine, tensor_engine, unknown_engine, vector_engine)
from .lang.isa_compute import (activation, affine_select, iota, nc_matmul, reciprocal,  # noqa: F401
                               scalar_tensor_tensor, tensor_copy_predicated, tensor_scalar, tensor_tensor)
from .lang.ops_indirect import tensor_copy_dynamic_src  # noqa: F401
from .lang.isa_data import dge_mode, dma_copy, memset, nc_transpose, oob_mode, tensor_copy  # noqa: F401
from .lang.isa_gather import local_gather  # noqa: F401
from .lang.isa_movement import dma_transpose, nc_stream_shuffle  # noqa: F401
from .lang.isa_reduce import (activation_reduce, bn_aggr, bn_stats, max8, nc_find_index8,  # noqa: F401
                              tensor_reduce, tensor_scalar_reduce, tensor_tensor_scan)
from .lang.isa_partition import sequence_bounds, tensor_partition_reduce  # noqa: F401
from .lang.isa_select import nc_match_replace8, range_select, select_reduce  # noqa: F401
from .lang.rng import isa_dropout as dropout  # noqa: F401


class matmul_perf_mode:  # noqa: N801 - NKI's spelling (new API)
    """perf_mode= values for nc_matmul: accepted and recorded for the engine model."""
    none = "none"
    double_row = "double_row"


class reduce_cmd:  # noqa: N801
    idle, reset, reset_reduce, reduce, load_reduce = "idle", "reset", "reset_reduce", "reduce", "load_reduce"


class fp32:  # noqa: N801
    min = -3.4028234663852886e38
