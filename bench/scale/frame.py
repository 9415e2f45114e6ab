"""The scale bench's frame: curves stepped through their sizes, a table per curve, growth exponents.

A curve is a name, its sizes (ascending) and `step(ctx, size) -> {metric: value}`: called once per
size in order, it brings the cluster up to `size` objects (the step before left `size` of the previous
one in place) and measures. Metric names say their unit ("vip p99 ms", "fiberlb MB"). The growth
exponent of a metric between two sizes is its log-log slope, log(y2/y1) / log(x2/x1): 1 is linear in
the objects, 0 flat, 2 quadratic. `ours` names the metrics of our own code (the controllers) with
their target: no total of ours growing faster than size^1.2, so a cost per object may grow at most
size^0.2; the others (OVN, the API double) are printed beside them as the floor they are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, float]
Step = Callable[[Any, int], Row]
SLOPE_TARGET = 1.2


@dataclass(frozen=True)
class Curve:
    name: str
    sizes: tuple[int, ...]
    step: Step
    ours: Mapping[str, float] = field(default_factory=dict)
    """Metrics of our own code -> the largest slope allowed: SLOPE_TARGET for a total (RSS), and
    SLOPE_TARGET - 1 for a cost per object or per change (its total then grows at most that fast)."""


def sizes_within(sizes: Sequence[int], limit: int) -> list[int]:
    """The sizes up to `limit` (SCALE_MAX), in order."""
    return [s for s in sorted(sizes) if s <= limit]


def slope(x1: float, y1: float, x2: float, y2: float) -> float:
    """log-log slope between (x1, y1) and (x2, y2); NaN when a value is not positive."""
    if min(x1, x2, y1, y2) <= 0 or x1 == x2 or any(map(math.isnan, (y1, y2))):
        return float("nan")
    return math.log(y2 / y1) / math.log(x2 / x1)


def slopes(rows: Mapping[int, Row]) -> dict[str, list[float]]:
    """Per metric, the slope between each pair of consecutive sizes."""
    sizes = sorted(rows)
    metrics = list(dict.fromkeys(k for s in sizes for k in rows[s]))
    nan = float("nan")
    return {
        m: [slope(a, rows[a].get(m, nan), b, rows[b].get(m, nan)) for a, b in itertools.pairwise(sizes)]
        for m in metrics
    }


def steepest(grown: Mapping[str, Sequence[float]], among: Iterable[str] | None = None) -> tuple[str, float]:
    """The metric with the largest slope (of those `among`, default all); ("", NaN) when none."""
    wanted = set(grown) if among is None else set(among)
    best = ("", float("nan"))
    for metric, values in grown.items():
        for v in values:
            if metric in wanted and not math.isnan(v) and (math.isnan(best[1]) or v > best[1]):
                best = (metric, v)
    return best


def _cell(v: float) -> str:
    if math.isnan(v):
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def table(curve: Curve, rows: Mapping[int, Row]) -> str:
    """Sizes down, metrics across, then a line of slopes per pair of sizes and the steepest."""
    sizes = sorted(rows)
    metrics = list(dict.fromkeys(k for s in sizes for k in rows[s]))
    width = {m: max(len(m), 7) for m in metrics}
    head = f"{curve.name:>14} | " + " | ".join(f"{m:>{width[m]}}" for m in metrics)
    lines = [head, "-" * len(head)]
    for s in sizes:
        lines.append(
            f"{s:>14} | " + " | ".join(f"{_cell(rows[s].get(m, float('nan'))):>{width[m]}}" for m in metrics)
        )
    grown = slopes(rows)
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        label = f"slope {a}->{b}"
        lines.append(f"{label:>14} | " + " | ".join(f"{_cell(grown[m][i]):>{width[m]}}" for m in metrics))
    if len(sizes) > 1:
        metric, value = steepest(grown)
        lines.append(f"steepest: {metric} {_cell(value)}" + _ours_line(curve, grown))
    return "\n".join(lines)


def over_target(curve: Curve, grown: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Our metrics whose steepest slope is above their target -> that slope."""
    out = {}
    for metric, limit in curve.ours.items():
        _, value = steepest(grown, [metric])
        if not math.isnan(value) and value > limit:
            out[metric] = value
    return out


def _ours_line(curve: Curve, grown: Mapping[str, Sequence[float]]) -> str:
    metric, value = steepest(grown, curve.ours)
    if not metric:
        return ""
    over = over_target(curve, grown)
    verdict = (
        "all within target"
        if not over
        else "over target: " + ", ".join(f"{m} {_cell(v)} (> {curve.ours[m]:g})" for m, v in over.items())
    )
    return f"; of ours: {metric} {_cell(value)} ({verdict})"


def run(
    ctx: Any, curves: Sequence[Curve], limit: int, out: Callable[[str], None] = print
) -> dict[str, dict[int, Row]]:
    """Each curve's sizes up to `limit` in order; its table printed after each step (a run cut short
    keeps what it measured)."""
    results: dict[str, dict[int, Row]] = {}
    for curve in curves:
        rows = results.setdefault(curve.name, {})
        for size in sizes_within(curve.sizes, limit):
            rows[size] = curve.step(ctx, size)
            out(table(curve, rows))
    return results
