"""OVN's incremental-processing engine counters, read from the daemons' control sockets.

`ovn-appctl inc-engine/show-stats` prints, per engine node, how often it was fully recomputed
(`recompute`), updated incrementally by its change handlers (`compute`) and aborted. The nodes
that carry the expensive work are northd's `northd` and `lflow` and ovn-controller's
`runtime_data`, `lflow_output` and `pflow_output`: a recompute there redoes the whole database,
a compute only what changed. An input node (`NB_nb_global`, `SB_sb_global`) is counted on every
engine run, so it says how many times the daemon ran its engine.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

KEY_NODES = {
    "ovn-northd": ("northd", "lflow"),
    "ovn-controller": ("runtime_data", "lflow_output", "pflow_output"),
}
RUN_NODE = {"ovn-northd": "NB_nb_global", "ovn-controller": "SB_sb_global"}
_NODE = re.compile(r"^Node: (\S+)$")
_COUNT = re.compile(r"^- (recompute|compute|abort):\s+(\d+)$")


@dataclass(frozen=True)
class EngineStats:
    daemon: str
    nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    """engine node -> {"recompute": n, "compute": n, "abort": n}"""

    def __sub__(self, other: EngineStats) -> EngineStats:
        return EngineStats(
            self.daemon,
            {
                node: {k: v - other.nodes.get(node, {}).get(k, 0) for k, v in counts.items()}
                for node, counts in self.nodes.items()
            },
        )

    def __add__(self, other: EngineStats) -> EngineStats:
        nodes = {n: dict(c) for n, c in self.nodes.items()}
        for node, counts in other.nodes.items():
            mine = nodes.setdefault(node, {})
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
        return EngineStats(self.daemon, nodes)

    def runs(self) -> int:
        return self.nodes.get(RUN_NODE.get(self.daemon, ""), {}).get("recompute", 0)

    def work(self) -> int:
        """Recomputes and computes of the expensive nodes: what moves only when an input changed
        (25.03's northd runs its engine on every wake-up, an `ovn-appctl` to it included)."""
        return sum(
            c.get("recompute", 0) + c.get("compute", 0)
            for n, c in self.nodes.items()
            if n in KEY_NODES.get(self.daemon, ())
        )

    def recomputes(self) -> dict[str, int]:
        """Full recomputes of the expensive nodes."""
        return {n: self.nodes.get(n, {}).get("recompute", 0) for n in KEY_NODES.get(self.daemon, ())}

    def summary(self) -> str:
        parts = [f"{self.runs()} engine runs"]
        for node in KEY_NODES.get(self.daemon, ()):
            c = self.nodes.get(node, {})
            parts.append(f"{node} {c.get('recompute', 0)} recomputed / {c.get('compute', 0)} incremental")
        return ", ".join(parts)


def parse_show_stats(daemon: str, text: str) -> EngineStats:
    nodes: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        if m := _NODE.match(line.strip()):
            current = nodes.setdefault(m.group(1), {})
        elif (m := _COUNT.match(line.strip())) and current is not None:
            current[m.group(1)] = int(m.group(2))
    return EngineStats(daemon, nodes)


def control_sockets(rundir: Path) -> dict[str, Path]:
    """northd's socket and ovn-controller's (`ovn-controller.<pid>.ctl`, OVN 23.03 has no --unixctl)."""
    out = {}
    if (rundir / "ovn-northd.ctl").exists():
        out["ovn-northd"] = rundir / "ovn-northd.ctl"
    pidfile = rundir / "ovn-controller.pid"
    if pidfile.exists():
        ctl = rundir / f"ovn-controller.{pidfile.read_text().strip()}.ctl"
        if ctl.exists():
            out["ovn-controller"] = ctl
    return out


def engine_stats(rundir: Path) -> dict[str, EngineStats]:
    out = {}
    for daemon, ctl in control_sockets(rundir).items():
        proc = subprocess.run(
            ["ovn-appctl", "-t", str(ctl), "inc-engine/show-stats"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if proc.returncode == 0:
            out[daemon] = parse_show_stats(daemon, proc.stdout)
    return out
