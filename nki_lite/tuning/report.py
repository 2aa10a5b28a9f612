"""What an autotune sweep measured: one row per config, the choice, and where it came from.

Contract: `Row(index, config, time_ns, reason)` — `time_ns` is the engine model's device time
(by="model") or the median JIT wall time (by="cpu"), None when the config was skipped, with the
first line of the reason (a verification error such as SBUF capacity, or any other failure).
`Report(key, by, target, rows, choice, source)`: `source` is "tuned" (swept in this process),
"disk" (read from the store) or "memory"; `str(report)` is a table; `to_json` / `from_json` are the
stored form.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Row:
    index: int
    config: dict
    time_ns: float | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.time_ns is not None


@dataclass
class Report:
    key: dict
    by: str
    target: str
    rows: list[Row]
    choice: int
    source: str = "tuned"
    extra: dict = field(default_factory=dict)

    @property
    def best(self) -> dict:
        return self.rows[self.choice].config

    def to_json(self) -> dict:
        return {"key_values": self.key, "by": self.by, "target": self.target, "choice": self.choice,
                "rows": [[r.index, r.config, r.time_ns, r.reason] for r in self.rows]}

    @classmethod
    def from_json(cls, d: dict, source: str) -> "Report":
        rows = [Row(int(i), dict(c), None if t is None else float(t), str(why)) for i, c, t, why in d["rows"]]
        return cls(dict(d["key_values"]), str(d["by"]), str(d["target"]), rows, int(d["choice"]), source)

    def __str__(self) -> str:
        unit = "model us" if self.by == "model" else "cpu ms"
        scale = 1e-3 if self.by == "model" else 1e-6
        where = {"tuned": "swept now", "disk": "remembered on disk", "memory": "remembered"}[self.source]
        lines = [f"autotune by={self.by} target={self.target} key={self.key} ({where})",
                 f"  {'#':>3} {'config':40s} {unit:>12s}  status"]
        for r in self.rows:
            t = f"{r.time_ns * scale:12.3f}" if r.time_ns is not None else f"{'-':>12s}"
            status = "chosen" if r.index == self.choice else ("ok" if r.ok else f"skipped: {r.reason}")
            lines.append(f"  {r.index:3d} {str(r.config)[:40]:40s} {t}  {status}")
        return "\n".join(lines)
