"""What the database soak samples and how it judges it (bench/bench_dbsoak.py and the short test
tests/integration/cluster/test_db_bounds.py): every N s the NB and SB file size of each OVN central
member, the RSS of each member's ovsdb-server, of each ovn-northd and of every node's
ovn-controller, and the live data of each database (its first member's file copied, made standalone
and compacted offline: what a compaction would leave, so its slope is the database's own growth);
per series min/max/last, the slope after warm-up (least squares, per hour), the
compactions seen (a file that shrank between two samples) and whether the series has stopped
growing (the last third of its samples within a tolerance of their median)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak_sampler import proc_of, slope_per_hour
from nodeenv.cluster.cluster import Cluster
from nodeenv.daemons import is_alive
from nodeenv.ovn_central import DATABASES, Member, central_dir

FILE, RSS, LIVE = "file", "rss", "live"
OVN_DAEMONS = ("ovsdb-server-", "ovn-northd", "ovn-controller")


@dataclass
class DbSample:
    t: float
    values: dict[tuple[str, str], float] = field(default_factory=dict)
    """(kind, name) -> bytes: (file, "nb1.db"), (rss, "central/ovsdb-server-nb1"), ..."""
    wall: float = 0.0
    """time.time() just after the files were read (to match ovsdb-server's log lines)"""


def take(cluster: Cluster, t: float) -> DbSample:
    s, central = DbSample(t), cluster.central_component
    members = [m for db in DATABASES for m in central.member_list(central_dir(cluster.central), db)]
    for m in members:
        try:
            s.values[FILE, m.dbfile.name] = float(m.dbfile.stat().st_size)
        except OSError:
            continue
    s.wall = time.time()
    for m in members:
        if m.index <= 1 and (FILE, m.dbfile.name) in s.values and (live := live_size(m)) is not None:
            s.values[LIVE, m.db.name] = live
    for label, part in cluster.parts().items():
        for rec in part.daemons.load():
            if not rec.name.startswith(OVN_DAEMONS) or not is_alive(rec):
                continue
            p = proc_of(rec.pid)
            if p is not None:
                s.values[RSS, f"{label}/{rec.name}"] = p.rss_mb * 1024 * 1024
    return s


def live_size(m: Member) -> float | None:
    """Bytes of `m`'s database compacted: a copy of its file made standalone (a clustered one) and
    compacted offline; None if a tool failed (a file caught mid-write is tried at the next sample)."""
    with tempfile.TemporaryDirectory(prefix="dbl") as tmp:
        copy, standalone = Path(tmp) / "copy.db", Path(tmp) / "standalone.db"
        shutil.copyfile(m.dbfile, copy)
        steps = [["ovsdb-tool", "compact", str(copy), str(standalone)]]
        if m.index:
            steps = [["ovsdb-tool", "cluster-to-standalone", str(standalone), str(copy)],
                     ["ovsdb-tool", "compact", str(standalone)]]  # fmt: skip
        for argv in steps:
            if subprocess.run(argv, capture_output=True, timeout=60).returncode:
                return None
        return float(standalone.stat().st_size)


@dataclass(frozen=True)
class Series:
    kind: str
    name: str
    points: list[tuple[float, float]]

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def compactions(self) -> int:
        """Times the value shrank by at least a tenth between two samples (a file: compacted)."""
        return sum(b < a * 0.9 for a, b in zip(self.values, self.values[1:], strict=False))

    def slope(self, warmup: float) -> float:
        """Bytes per hour after `warmup` seconds."""
        return slope_per_hour([p for p in self.points if p[0] >= warmup] or self.points[-2:])

    def settled(self, tolerance: float) -> bool:
        """The last third of the samples within `tolerance` (a fraction) of their median."""
        tail = self.values[-max(2, len(self.values) // 3) :]
        median = statistics.median(tail)
        return all(abs(v - median) <= tolerance * median for v in tail)


def series(samples: Sequence[DbSample]) -> list[Series]:
    keys = sorted({k for s in samples for k in s.values})
    return [Series(kind, name, [(s.t, s.values[kind, name]) for s in samples if (kind, name) in s.values])
            for kind, name in keys]  # fmt: skip


def table(samples: Sequence[DbSample], warmup: float) -> list[str]:
    """Per file and process: min/max/last (KiB for files, MiB for RSS), slope per hour after warm-up,
    compactions seen."""
    lines = [f"  {'series':<34} {'min':>9} {'max':>9} {'last':>9} {'unit':>4} {'slope/h':>10} compactions"]
    for s in series(samples):
        unit, div = ("MiB", 1024.0 * 1024) if s.kind == RSS else ("KiB", 1024.0)
        lo, hi, last = min(s.values) / div, max(s.values) / div, s.values[-1] / div
        seen = s.compactions() if s.kind == FILE else "-"
        lines.append(f"  {s.kind + ' ' + s.name:<34} {lo:9.1f} {hi:9.1f} {last:9.1f} {unit:>4} "
                     f"{s.slope(warmup) / div:10.1f} {seen}")  # fmt: skip
    return lines
