"""What the scale bench samples of a running cluster: each part's CPU seconds and RSS from /proc (by
the PIDs in the parts' daemon tables), and the size of the NB and SB databases in cells (`ovsdb-server`'s
`memory/show`: one cell per column value of every row, what its memory and a full recompute grow with).

Parts: `fiberlb` and `netpol` (both replicas of each controller: the follower keeps its caches warm,
so both pay per object), `flashdns` (one per node, each watching every Service), `api` (the Kubernetes
API double: its cost is not ours and is printed so that it is not mistaken for ours), `northd` (both),
`nb`/`sb` (the three RAFT members each).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.ovn_central import central_dir

TICK = 1 / os.sysconf("SC_CLK_TCK")
PARTS: dict[str, Callable[[str], bool]] = {
    "fiberlb": lambda name: name == "fiberlb-controller",
    "netpol": lambda name: name == "netpol-controller",
    "flashdns": lambda name: name == "flashdns-controller",
    "api": lambda name: name == "kubeapi",
    "northd": lambda name: name.startswith("ovn-northd"),
    "nb": lambda name: name.startswith("ovsdb-server-nb"),
    "sb": lambda name: name.startswith("ovsdb-server-sb"),
}
_CELLS = re.compile(r"\bcells:(\d+)")


def part_pids(c: Cluster) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {p: [] for p in PARTS}
    for node in c.parts().values():
        for record in node.daemons.load():
            for part, match in PARTS.items():
                if match(record.name):
                    out[part].append(record.pid)
    return out


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK


def rss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    m = re.search(r"^VmRSS:\s+(\d+)", text, re.M)
    return int(m.group(1)) / 1024 if m else 0.0


@dataclass(frozen=True)
class Usage:
    cpu: dict[str, float]
    """part -> CPU seconds of all its processes"""
    rss: dict[str, float]
    """part -> the largest RSS of its processes, MB"""

    def cpu_since(self, before: Usage) -> dict[str, float]:
        return {p: v - before.cpu.get(p, 0.0) for p, v in self.cpu.items()}


def usage(c: Cluster) -> Usage:
    pids = part_pids(c)
    return Usage(
        {p: sum(map(cpu_seconds, ps)) for p, ps in pids.items()},
        {p: max(map(rss_mb, ps), default=0.0) for p, ps in pids.items()},
    )


def cells(c: Cluster, key: str) -> int:
    """Cells of the NB (`key` "nb") or SB ("sb") database, from its first RAFT member."""
    ctl = central_dir(c.central) / f"ovsdb-{key}1.ctl"
    out = subprocess.run(["ovs-appctl", "-t", str(ctl), "memory/show"], capture_output=True, text=True,
                         timeout=30).stdout  # fmt: skip
    m = _CELLS.search(out)
    return int(m.group(1)) if m else 0


def costs(
    c: Cluster,
    part: str,
    load: tuple[Usage, Usage],
    timed: tuple[Usage, Usage],
    added: int,
    changes: int,
    took: float,
) -> dict[str, float]:
    """A step's cost columns: `part`'s (the controller the curve loads) RSS, CPU per object added
    over the `load` window and per change over the `timed` one; northd's per change; the NB/SB cells;
    the API double's own (not ours); the load's wall time."""
    per_obj = {p: v * 1000 / max(added, 1) for p, v in load[1].cpu_since(load[0]).items()}
    per_change = {p: v * 1000 / changes for p, v in timed[1].cpu_since(timed[0]).items()}
    return {
        f"{part} MB": timed[1].rss[part],
        f"{part} ms/obj": per_obj[part],
        f"{part} ms/chg": per_change[part],
        "northd ms/chg": per_change["northd"],
        "NB kcells": cells(c, "nb") / 1000,
        "SB kcells": cells(c, "sb") / 1000,
        "api MB": timed[1].rss["api"],
        "api ms/obj": per_obj["api"],
        "load s": took,
    }
