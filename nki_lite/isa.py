"""nki_lite.isa (nisa): NKI ISA calls (legacy form: each returns its result tile)."""
from .lang.ops_isa import (activation, engine, get_nc_version, gpsimd_engine, memset, nc_matmul,  # noqa: F401
                           nc_version, scalar_engine, sync_engine, tensor_copy, tensor_engine, tensor_reduce,
                           tensor_scalar, tensor_tensor, unknown_engine, vector_engine)
