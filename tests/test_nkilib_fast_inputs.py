"""tutorials/nkilib_fast_inputs.py (check_nkilib.py --fast-mx-inputs): the vectorised MX test-data generator
puts one element of the format's largest exponent in every 8x4 group, where the library's loop does (the
group's first 7 rows x 3 columns), and hands the data to the library's own cast and dequantisation. The
library's module is stood in for (the library is not part of this repository)."""
from __future__ import annotations

import sys
import types

import numpy as np

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "tutorials"))
import nkilib_fast_inputs  # noqa: E402


def test_every_group_gets_one_max_exponent_element_in_the_librarys_positions(monkeypatch):
    seen = {}

    def static_cast(x, dtype):
        seen["data"] = x
        return x

    tg = types.SimpleNamespace(get_mx_fp_max=lambda d: 1.0, get_mx_max_exp=lambda d: 8, NL_TO_DT_DTYPE={},
                               static_cast=static_cast, dequantize_mx_golden=lambda q, s: ("deq", q, s),
                               generate_stabilized_mx_data=None)
    pkg = types.ModuleType("test.integration.nkilib.utils")
    pkg.tensor_generators = tg
    for name in ("test", "test.integration", "test.integration.nkilib"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "test.integration.nkilib.utils", pkg)
    monkeypatch.setitem(sys.modules, "test.integration.nkilib.utils.tensor_generators", tg)
    nkilib_fast_inputs.install()
    np.random.seed(0)
    fp, q, scale = tg.generate_stabilized_mx_data("e4m3", (64, 32), val_range=1.0)
    assert fp[0] == "deq" and q is seen["data"] and scale.shape == (8, 8) and scale.dtype == np.uint8
    # the stand-in's max_val 1 keeps the random data below 1, so only the planted elements reach 2^8
    big = np.abs(seen["data"]).reshape(8, 8, 8, 4) >= 2 ** 8                      # [row group, row, col group, col]
    assert (big.sum(axis=(1, 3)) == 1).all()                                      # exactly one per group
    assert not big[:, 7].any() and not big[..., 3].any()                          # never the last row / column
    assert (np.abs(seen["data"]) < 1.5 * 2 ** 8).all()                            # mantissa in [1, 1.5)
    upper = 127                                                                   # log2(val_range / max_val) + 127
    assert scale.min() >= upper - 10 and scale.max() <= upper
