"""The engine model: per-target hardware data, per-op cost rules, a schedule, and reports.

Importing this package registers the "cost" rule of every op (lower/ops.py).
"""
from . import rules, rules_indirect  # noqa: F401  (registers @rule("cost", op) for every op)
from ...core.targets import TARGETS, Target
