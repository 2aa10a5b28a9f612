"""What a kernel call costs: `Estimate.cost(...)` and `compare_targets(kernel, *args, prices=...)`.

Contract:
- `call_cost(seconds, price_per_hour, cores_used=1, instance_cores=1)` -> `Cost`: a call that keeps
  `cores_used` of an instance's `instance_cores` NeuronCores busy for `seconds` is charged that share
  of the instance's hourly price for that time (the other cores can serve other calls). With the
  defaults, `price_per_hour` is the price of one NeuronCore-hour.
- `TargetComparison` (built by runtime/compare.py's `compare_targets`): rows of device time and cost
  per target, `table()` as text.
  `prices` maps a target name to a `Price` (or a dict / (price_per_hour, instance_cores) pair); a
  target without a price gets its time only. No price is built in: `EXAMPLE_PRICES` is an example
  table with its date and source, for users who pass it explicitly.
- Every time and cost is shown with the model's uncertainty from its validation on measured kernels
  (lower/cost/validation_nkibench.uncertainty(): the band holding 80% of the measured/estimated ratios).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import errors
from ..lower.cost import validation_nkibench as _val


@dataclass(frozen=True)
class Price:
    """An instance's hourly price and its NeuronCore count."""
    price_per_hour: float
    instance_cores: int = 1
    instance: str = ""
    date: str = ""
    source: str = ""


# Example only (never used unless passed): on-demand price, us-east-1, as published on the page
# below; trn2 and trn3 prices were not found in the sources checked, so they are not listed.
EXAMPLE_PRICES: dict[str, Price] = {
    "trn1": Price(21.50, 32, "trn1.32xlarge (16 Trainium chips x 2 NeuronCores)", "2026-06-25",
                  "https://www.usage.ai/blogs/aws/ai-ml-cost/trainium-vs-gpu-instances/ (on-demand $21.50/hr)"),
}


@dataclass(frozen=True)
class Cost:
    seconds: float
    price_per_hour: float
    cores_used: int
    instance_cores: int

    @property
    def dollars_per_call(self) -> float:
        return self.seconds * self.price_per_hour / 3600.0 * self.cores_used / self.instance_cores

    @property
    def dollars_per_million_calls(self) -> float:
        return self.dollars_per_call * 1e6

    @property
    def uncertainty(self) -> tuple[float, float, int]:
        return _val.uncertainty()

    def range_per_million(self) -> tuple[float, float]:
        lo, hi, n = _val.uncertainty()
        d = self.dollars_per_million_calls
        return (d * lo, d * hi) if n else (float("nan"), float("nan"))

    def __str__(self) -> str:
        return (f"${self.dollars_per_call:.3e} per call, ${self.dollars_per_million_calls:,.2f} per million calls "
                f"({_val.uncertainty_text()})")


def call_cost(seconds: float, price_per_hour: float, cores_used: int = 1, instance_cores: int = 1) -> Cost:
    if not (price_per_hour >= 0):
        raise errors.make("argument", f"price_per_hour must be a non-negative number of dollars, got {price_per_hour!r}")
    if not (isinstance(cores_used, int) and isinstance(instance_cores, int) and 1 <= cores_used <= instance_cores):
        raise errors.make("argument", f"cores_used ({cores_used!r}) must be an int in 1..instance_cores "
                          f"({instance_cores!r})")
    return Cost(float(seconds), float(price_per_hour), cores_used, instance_cores)


def as_price(name: str, p) -> Price:
    if isinstance(p, Price):
        return p
    if isinstance(p, dict):
        return Price(**p)
    if isinstance(p, (tuple, list)) and len(p) == 2:
        return Price(float(p[0]), int(p[1]))
    if isinstance(p, (int, float)):
        return Price(float(p), 1)
    raise errors.make("argument", f"prices[{name!r}] must be a Price, a dict, (price_per_hour, instance_cores) "
                      f"or a per-NeuronCore-hour number, got {type(p).__name__}")


@dataclass(frozen=True)
class TargetRow:
    target: str
    seconds: float
    bottleneck: str
    cost: Cost | None


class TargetComparison:
    def __init__(self, rows: list[TargetRow]):
        self.rows = rows

    def __getitem__(self, target: str) -> TargetRow:
        for r in self.rows:
            if r.target == target:
                return r
        raise KeyError(target)

    def table(self) -> str:
        lo, hi, n = _val.uncertainty()
        band = (f"model uncertainty {_val.uncertainty_text()}: measured time within "
                f"[x{lo:.2f}, x{hi:.2f}] of the estimate" if n else "model unvalidated")
        lines = ["| target | device time | range | $ per call | $ per million calls | range per million |",
                 "|---|---:|---:|---:|---:|---:|"]
        for r in self.rows:
            us = r.seconds * 1e6
            rng = f"{us * lo:,.1f}-{us * hi:,.1f} us" if n else "?"
            if r.cost is None:
                lines.append(f"| {r.target} | {us:,.1f} us | {rng} | (no price) | (no price) | |")
                continue
            a, b = r.cost.range_per_million()
            lines.append(f"| {r.target} | {us:,.1f} us | {rng} | {r.cost.dollars_per_call:.3e} | "
                         f"{r.cost.dollars_per_million_calls:,.2f} | {a:,.2f}-{b:,.2f} |")
        return "\n".join(lines) + "\n\n" + band

    def __str__(self) -> str:
        return self.table()
