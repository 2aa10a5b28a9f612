"""A vectorised `generate_stabilized_mx_data` for the NKI Library's MX tests (tutorials/nkilib_pytest_plugin.py).

The library's generator (test/integration/nkilib/utils/tensor_generators.py at d2ad3a5) picks, for every 8x4
scaling group, one element to carry the format's largest exponent, in a Python loop of four numpy calls per
group: ~10^7 groups for moe_block_tkg's first fast case (128 experts), over 500 s before the kernel runs.
This version draws the same quantities (a uniform position in the group's first 7 x 3 elements, as the
library's `randint(0, 7)` / `randint(0, 3)`, a random sign, a mantissa in [1, 1.5)) for all groups at once,
then runs the library's own remaining steps (its static_cast, scale bounds and dequantize_mx_golden), so the
data keep the property the tests rely on (MX data that dequantize exactly to the fp data); only the random
stream differs. Installed only when $NKILIB_FAST_MX_INPUTS=1 (check_nkilib.py --fast-mx-inputs).
"""
from __future__ import annotations

import numpy as np


def install() -> None:
    from test.integration.nkilib.utils import tensor_generators as tg
    original = tg.generate_stabilized_mx_data

    def generate_stabilized_mx_data(mx_dtype, shape, val_range=1.0):
        if val_range == 0:
            return original(mx_dtype, shape, val_range)
        P, F = shape
        assert P % 8 == 0 and F % 4 == 0, f"shape {shape} must be a multiple of (8, 4)"
        max_val, max_exp = tg.get_mx_fp_max(mx_dtype), tg.get_mx_max_exp(mx_dtype)
        data = (np.random.random(shape) * 2 - 1) * max_val
        groups = (P // 8, F // 4)
        rows = 8 * np.arange(groups[0])[:, None] + np.random.randint(0, 7, size=groups)
        cols = 4 * np.arange(groups[1])[None, :] + np.random.randint(0, 3, size=groups)
        sign = np.random.choice([-1, 1], size=groups)
        data[rows, cols] = sign * (1.0 + np.random.random(groups) * 0.5) * (2 ** max_exp)
        q = tg.static_cast(data.astype(np.float32), tg.NL_TO_DT_DTYPE.get(mx_dtype, mx_dtype))
        upper = min(255, int(np.log2(val_range / max_val) + 127))
        scale = np.random.randint(max(0, upper - 10), upper + 1, size=groups, dtype=np.uint8)
        return tg.dequantize_mx_golden(q, scale), q, scale

    tg.generate_stabilized_mx_data = generate_stabilized_mx_data
