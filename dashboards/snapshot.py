"""python -m dashboards.snapshot (`make dashboard-snapshot`): the overview's panels drawn from the booted
cluster's Prometheus (the run dir's monitoring.json says where), one PNG laid out as Grafana lays the
dashboard, for a newcomer without Grafana (none is installable here). Each panel's query over the last
--range: time series as lines (legend from the panel's legend format), stat panels as their last value.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.axes import Axes

from dashboards.catalogue import OVERVIEW, Dashboard, Panel
from dashboards.grafana import PER_ROW
from nodeenv.promapi import NetnsPrometheusApi, Series
from nodeenv.prometheus import PrometheusApiError

ROOT = Path(__file__).resolve().parents[1]
UNITS = {"s": "seconds", "ops": "/s", "reqps": "req/s", "percentunit": "fraction"}


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dashboards.snapshot", description=__doc__)
    p.add_argument("--run-dir", default=env.get("K8SHOST_BOOT_DIR", ".run-boot"),
                   help="the boot's run dir (env K8SHOST_BOOT_DIR; default .run-boot)")  # fmt: skip
    png = ROOT / "docs" / "dashboards" / "overview.png"
    p.add_argument("--out", default=env.get("K8SHOST_SNAPSHOT", str(png)),
                   help="the PNG (env K8SHOST_SNAPSHOT; default docs/dashboards/overview.png)")  # fmt: skip
    p.add_argument("--range", default=env.get("K8SHOST_SNAPSHOT_RANGE", "15m"),
                   help="how far back: 15m, 900s, 1h (env K8SHOST_SNAPSHOT_RANGE; default 15m)")  # fmt: skip
    return p


def seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    if not m:
        raise ValueError(f"--range must be like 15m, 900s or 1h, not {duration!r}")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def legend(panel: Panel, labels: Mapping[str, str]) -> str:
    if panel.legend:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), panel.legend).strip()
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"


def draw(ax: Axes, panel: Panel, points: list[Series], end: float) -> int:
    """One panel; the number of series drawn."""
    ax.set_title(panel.title, fontsize=10)
    ax.tick_params(labelsize=7)
    if not points:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        return 0
    if panel.kind == "stat":
        last = [vals[-1][1] for _, vals in points if vals]
        shown = ", ".join("—" if math.isnan(v) else f"{v:g}" for v in last[:4])
        ax.text(0.5, 0.5, shown, ha="center", va="center", transform=ax.transAxes, fontsize=28)
        ax.set_xticks([])
        ax.set_yticks([])
        return len(points)
    for labels, vals in points[:8]:
        ax.plot([(t - end) / 60 for t, _ in vals], [v for _, v in vals], label=legend(panel, labels)[:28])
    ax.set_xlabel("minutes before the snapshot", fontsize=7)
    ax.set_ylabel(UNITS.get(panel.unit, ""), fontsize=7)
    ax.legend(fontsize=6, loc="upper left")
    return len(points)


def render(api: NetnsPrometheusApi, d: Dashboard, out: Path, span: float) -> dict[str, int]:
    """The dashboard's panels over the last `span` seconds into `out`; series per panel."""
    end = time.time()
    start = end - span
    rows = math.ceil(len(d.panels) / PER_ROW)
    fig, axes = plt.subplots(rows, PER_ROW, figsize=(5 * PER_ROW, 3 * rows), squeeze=False)
    drawn = {}
    for i, panel in enumerate(d.panels):
        series = api.query_range(panel.expr, start, end, max(span / 120, 5))
        drawn[panel.title] = draw(axes[i // PER_ROW][i % PER_ROW], panel, series, end)
    for j in range(len(d.panels), rows * PER_ROW):
        axes[j // PER_ROW][j % PER_ROW].axis("off")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(end))
    fig.suptitle(f"{d.title} — make boot, {stamp}", fontsize=13)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=60)
    plt.close(fig)
    return drawn


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser(os.environ).parse_args(argv)
    where = Path(a.run_dir) / "monitoring.json"
    if not where.exists():
        print(f"dashboard-snapshot: {where} not found: `make boot` first", file=sys.stderr)
        return 1
    try:
        drawn = render(NetnsPrometheusApi.from_file(where), OVERVIEW, Path(a.out), seconds(a.range))
    except (PrometheusApiError, OSError, ValueError) as e:
        print(f"dashboard-snapshot: {e}", file=sys.stderr)
        return 1
    empty = [t for t, n in drawn.items() if not n]
    print(f"dashboard-snapshot: {a.out}: {len(drawn) - len(empty)}/{len(drawn)} panels with data"
          + (f"; no data: {', '.join(empty)}" if empty else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
