"""benchmarks/matmul_variants.py: each variant is compiled with its own register block and group depth,
and the outputs of different geometries are bit-identical (no timing is asserted)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import matmul_variants as V  # noqa: E402

from nki_lite.lower.llvm import matmul_chain as MC, matmul_kernel as MK  # noqa: E402


def test_variant_is_compiled_with_its_geometry_and_kc_and_restores_them():
    import numpy as np
    import nki_lite.stdlib as S
    a = np.ones((256, 256), np.float32)
    call = S.matmul.plan(a, a)
    kir = call.kernel.trace(*call.args)
    before = MK.host_geometry(), MC.KC
    ck = V.compile_variant(kir, "8,6,2:128")
    assert "_g8x6x2" in ck.module.llvm_ir and "_128x1f_" in ck.module.llvm_ir
    assert (MK.host_geometry(), MC.KC) == before


@pytest.mark.parametrize("fp8", [False, True])
def test_variants_agree_bitwise(fp8):
    res = V.run(["16,12,2:256", "8,6,2:128"], n=256, reps=1, fp8=fp8)
    assert set(res) == {"16,12,2:256", "8,6,2:128", "numpy"}
    assert all(same for _, _, same in res.values())


def test_nofwd_variant_keeps_the_panel_copy_and_restores_the_trait():
    import numpy as np
    import nki_lite.stdlib as S
    from nki_lite.core.ops import OPS
    a, b = np.ones((256, 256), np.float32), np.ones((256, 512), np.float32)   # N = 512: the panel load is unmasked
    call = S.matmul.plan(a, b)
    kir = call.kernel.trace(*call.args)
    fwd, nofwd = (V.compile_variant(kir, s).module.llvm_ir for s in ("16,12,2:256", "16,12,2:256:nofwd"))
    assert fwd != nofwd                                   # the panel's copy loop is emitted only without forwarding
    assert OPS["nc_matmul"].plain_reads
    res = V.run(["16,12,2:256", "16,12,2:256:nofwd"], n=256, reps=1, fp8=False)
    assert all(same for _, _, same in res.values())
