"""`nki_lite.compare_targets(kernel, *args, prices=...)`: one kernel call's device time and cost on
trn1 / trn2 / trn3 (estimates from runtime/profile.py, prices and the table from runtime/pricing.py).

Contract: every target in `targets` is estimated; a target with an entry in `prices` gets its cost
per call, the others their time only; a price for a target not estimated is an error (NL-E901).
"""
from __future__ import annotations

from .. import errors
from .pricing import TargetComparison, TargetRow, as_price, call_cost
from .profile import estimate


def compare_targets(kernel, *args, prices: dict | None = None, targets=("trn1", "trn2", "trn3"),
                    cores_used: int = 1, **kwargs) -> TargetComparison:
    """Estimate `kernel(*args)` on each target; device time and, for targets with a price, the cost
    per call and per million calls, each with the model's validated uncertainty (`table()`).

    `prices`: target -> `Price`, dict of Price's fields, `(price_per_hour, instance_cores)`, or a
    price per NeuronCore-hour; none is built in (`EXAMPLE_PRICES` is an example with date and source)."""
    prices = prices or {}
    unknown = sorted(set(prices) - set(targets))
    if unknown:
        raise errors.make("argument", f"prices given for {unknown}, which are not among targets {list(targets)}")
    rows = []
    for t in targets:
        est = estimate(kernel, *args, target=t, record_events=False, **kwargs)
        cost = None
        if t in prices:
            p = as_price(t, prices[t])
            cost = call_cost(est.total_time, p.price_per_hour, cores_used, p.instance_cores)
        rows.append(TargetRow(t, est.total_time, est.bottleneck, cost))
    return TargetComparison(rows)
