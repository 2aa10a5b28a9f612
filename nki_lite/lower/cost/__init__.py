"""The engine model: per-target hardware data, per-op cost rules, a schedule, and reports."""
