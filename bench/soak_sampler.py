"""What the soak samples every minute, and the slopes it judges: per daemon of the node environment
(from its daemons.json) RSS, open fds, threads and CPU seconds from /proc; the controllers' work-queue
depths from their /metrics; NB and SB row counts."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.daemons import http_get_in, is_alive
from nodeenv.node import Node

TICK = 1 / os.sysconf("SC_CLK_TCK")
NB_TABLES = ("Logical_Switch", "Logical_Switch_Port", "Load_Balancer", "ACL", "Address_Set", "Port_Group")
SB_TABLES = ("Port_Binding", "Logical_Flow", "Load_Balancer")


@dataclass(frozen=True)
class Proc:
    rss_mb: float
    fds: int
    threads: int
    cpu_s: float


@dataclass
class Sample:
    t: float
    procs: dict[str, Proc] = field(default_factory=dict)
    queues: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)


def proc_of(pid: int) -> Proc | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
        status = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return Proc(
        rss_mb=int(status["VmRSS"].split()[0]) / 1024,
        fds=fds,
        threads=int(status["Threads"]),
        cpu_s=(int(fields[11]) + int(fields[12])) * TICK,
    )


def queue_depths(env: dict[str, str], netns: str = "") -> dict[str, float]:
    """Sum of workqueue_depth per controller (keys *_METRICS of node.env that serve it; a cluster
    node's are on its own loopback, asked from inside its namespace `netns`)."""
    out = {}
    for key, url in env.items():
        if not key.endswith("_METRICS") and key != "CSI_METRICS_URL":
            continue
        try:
            text = (
                http_get_in(netns, url, 2)[1]
                if netns
                else urllib.request.urlopen(url, timeout=2).read().decode()
            )
        except (OSError, http.client.HTTPException):
            continue
        depths = [float(v) for v in re.findall(r"^workqueue_depth(?:\{[^}]*\})? (\S+)$", text, re.M)]
        if depths:
            out[key.removesuffix("_METRICS").lower()] = sum(depths)
    return out


def row_counts(env: dict[str, str]) -> dict[str, int]:
    out = {}
    for tool, db, tables in (
        ("ovn-nbctl", env["OVN_NB_DB"], NB_TABLES),
        ("ovn-sbctl", env["OVN_SB_DB"], SB_TABLES),
    ):
        for table in tables:
            argv = [tool, f"--db={db}", "--timeout=10", "--bare", "--columns=_uuid", "list", table]
            rows = subprocess.run(argv, capture_output=True, text=True).stdout.split()
            out[f"{'NB' if tool == 'ovn-nbctl' else 'SB'} {table}"] = len(rows)
    return out


def take(node: Node, t: float) -> Sample:
    return take_parts({"": node}, node.endpoints, t)


def take_parts(parts: Mapping[str, Node], env: dict[str, str], t: float) -> Sample:
    """One sample of every daemon of `parts` (named `<label>/<daemon>` where the label is not
    empty: the nodes of a cluster, its central and control), queues of every part, rows from `env`."""
    s = Sample(t)
    for label, part in parts.items():
        for rec in part.daemons.load():
            p = proc_of(rec.pid) if is_alive(rec) else None
            if p is not None:
                s.procs[f"{label}/{rec.name}" if label else rec.name] = p
        depths = queue_depths(part.endpoints, part.settings.netns)
        s.queues.update({f"{label}/{k}" if label else k: v for k, v in depths.items()})
    s.rows = row_counts(env)
    return s


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt, mv = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    var = sum((p[0] - mt) ** 2 for p in points)
    return 0.0 if var == 0 else sum((p[0] - mt) * (p[1] - mv) for p in points) / var * 3600


def ours(name: str) -> bool:
    """A daemon of ours, not of OVS/OVN (`name` may carry a `<part>/` label)."""
    return not name.rsplit("/", 1)[-1].startswith(("ovs", "ovn"))


def verdict_table(samples: list[Sample], warmup: float) -> tuple[list[str], bool]:
    """Per daemon: RSS and fds first/last after warm-up, slopes per hour, CPU; and whether every
    daemon of ours met the targets (RSS <= 5 MB/h, no fd growth)."""
    after = [s for s in samples if s.t >= warmup] or samples[-2:]
    lines, ok = [], True
    names = sorted({n for s in samples for n in s.procs})
    lines.append(
        f"  {'daemon':<26} {'RSS MB':>13} {'MB/h':>7} {'fds':>9} {'fds/h':>7} {'thr':>4} {'CPU s':>7} verdict"
    )
    for name in names:
        pts = [(s.t, s.procs[name]) for s in after if name in s.procs]
        if not pts:
            continue
        rss = slope_per_hour([(t, p.rss_mb) for t, p in pts])
        fds = slope_per_hour([(t, p.fds) for t, p in pts])
        first, last = pts[0][1], pts[-1][1]
        good = not ours(name) or (rss <= 5 and last.fds <= first.fds)
        ok &= good
        lines.append(
            f"  {name:<26} {first.rss_mb:6.1f}>{last.rss_mb:6.1f} {rss:7.1f} {first.fds:4d}>{last.fds:4d} "
            f"{fds:7.1f} {last.threads:4d} {last.cpu_s:7.1f}  "
            + ("-" if not ours(name) else "OK" if good else "OVER TARGET")
        )
    return lines, ok


def print_errors_and_rows(errors: Counter[str], samples: list[Sample]) -> None:
    """The five commonest churn errors and the NB/SB row counts of the first and last sample."""
    for err, n in errors.most_common(5):
        print(f"  churn error x{n}: {err}")
    first, last = samples[0], samples[-1]
    print(
        "  NB/SB rows first > last: "
        + ", ".join(f"{k} {first.rows.get(k, 0)}>{v}" for k, v in last.rows.items())
    )
