"""Percentiles as the benches print them: nearest rank on the sorted samples."""

from __future__ import annotations


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) of `values`; NaN when there are none."""
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")
