"""The compactions a database soak saw (bench/bench_dbsoak.py): a member's file that shrank between
two samples, with the RSS of that member's ovsdb-server in the same two samples, the time since the
member's previous one, and what ovsdb-server logged about it between them. OVS 3.1 logs an automatic
compaction only at debug level ("Database compaction took N ms", INFO when over 1 s; a RAFT leader
logs "Transferring leadership to write a snapshot." first), so the bench turns the `ovsdb` module's
file log to debug on every member (`debug_compaction_log`)."""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench.db_bounds import FILE, RSS, DbSample

SHRINK = 0.9
"""A file smaller than this fraction of its previous sample: compacted."""
FLOOR = 10 * 1024 * 1024
"""ovsdb-server's automatic-compaction floor (ovsdb_log_grew_lots: over 10 MiB and twice the base)."""
LONGEST_WAIT = (20 + 2) * 60.0
"""The longest an over-grown file may wait for its compaction: the 10-20 min timer after the last
one, then a RAFT member's 1-2 min look again (a leader hands over and compacts at that look)."""
LOG_LINE = re.compile(  # time|sequence|module, "(thread)" after it outside the main one|level|text
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)\|\d+\|(?P<module>[^|]+)\|\w+\|(?P<text>.*)$"
)
ABOUT_COMPACTION = re.compile(r"compaction|snapshot|compacting", re.IGNORECASE)


@dataclass
class Compaction:
    member: str
    """the file's stem: nb1, sb2, ..."""
    t: float
    """seconds into the soak of the first sample that saw the file smaller"""
    file_before: float
    file_after: float
    rss_before: float | None = None
    rss_after: float | None = None
    since_previous: float | None = None
    """seconds since the member's previous compaction seen, None for its first"""
    log: list[str] = field(default_factory=list)


def found(samples: Sequence[DbSample]) -> list[Compaction]:
    """Every file's shrinks (by more than a tenth) between consecutive samples, in time order."""
    out, last_seen = list[Compaction](), dict[str, float]()
    for before, after in itertools.pairwise(samples):
        for (kind, name), size in sorted(after.values.items()):
            prev = before.values.get((kind, name))
            if kind != FILE or prev is None or size >= prev * SHRINK:
                continue
            member = name.removesuffix(".db")
            c = Compaction(member, after.t, prev, size, rss_of(before, member), rss_of(after, member))
            c.since_previous = after.t - last_seen[member] if member in last_seen else None
            last_seen[member] = after.t
            out.append(c)
    return out


def overdue(name: str, points: Sequence[tuple[float, float]], slack: float) -> list[str]:
    """A file past ovsdb-server's rule (over the floor and twice its size after its last compaction)
    while more than LONGEST_WAIT + `slack` seconds passed since that compaction (or the first
    point): the automatic compaction did not come."""
    out, (t0, base), prev = list[str](), points[0], points[0][1]
    for t, size in points[1:]:
        if size < prev * SHRINK:
            t0, base = t, size
        elif size > max(FLOOR, 2 * base) and t - t0 > LONGEST_WAIT + slack:
            out.append(
                f"{name} {size / 1024:.0f} KiB at {t / 60:.1f} min, {(t - t0) / 60:.1f} min since compacted"
            )
        prev = size
    return out


def rss_of(sample: DbSample, member: str) -> float | None:
    """The RSS of the member's ovsdb-server (its key ends in /ovsdb-server-<member>)."""
    return next(
        (v for (k, n), v in sample.values.items() if k == RSS and n.endswith(f"/ovsdb-server-{member}")), None
    )


def log_lines(lines: Iterable[str], since: float, until: float) -> list[str]:
    """The lines about compaction or snapshots logged at wall-clock times in (since, until]."""
    out = []
    for line in lines:
        m = LOG_LINE.match(line.strip())
        if not m or not ABOUT_COMPACTION.search(m["text"]):
            continue
        when = datetime.fromisoformat(m["ts"].replace("Z", "+00:00")).timestamp()
        if since < when <= until:
            out.append(f"{m['ts']} {m['module']}: {m['text']}")
    return out


def attach_logs(compactions: list[Compaction], samples: Sequence[DbSample], logs: dict[str, Path]) -> None:
    """Each compaction's log lines from its member's log file (`logs`: member -> path), between the
    wall-clock times of the second sample before it and its own (a sample's time is taken after its
    files were read; two samples back also covers a compaction logged while the one before read
    them; a member's compactions are minutes apart)."""
    walls = {s.t: s.wall for s in samples}
    before = {s3.t: s1.wall for s1, _, s3 in zip(samples, samples[1:], samples[2:], strict=False)}
    before.update({s.t: 0.0 for s in samples[:2]})
    for c in compactions:
        path = logs.get(c.member)
        if path is None or not path.exists():
            continue
        c.log = log_lines(path.read_text(errors="replace").splitlines(), before[c.t], walls[c.t])


def debug_compaction_log(ctl: Path) -> str:
    """Turns on debug logging to the log file for ovsdb-server's `ovsdb` module (its compaction
    lines); '' if done, else the error."""
    argv = ["ovs-appctl", "-t", str(ctl), "vlog/set", "ovsdb:file:dbg"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def report(compactions: Sequence[Compaction]) -> list[str]:
    """One line per compaction (KiB for files, MiB for RSS) and its log lines indented below."""
    lines = [f"  compactions seen: {len(compactions)}"]
    for c in compactions:
        rss = "?"
        if c.rss_before is not None and c.rss_after is not None:
            rss = f"{c.rss_before / 2**20:.1f} -> {c.rss_after / 2**20:.1f} MiB"
        since = (
            f", {c.since_previous / 60:.1f} min after its previous" if c.since_previous is not None else ""
        )
        lines.append(f"  {c.t / 60:5.1f} min {c.member}: file {c.file_before / 1024:.0f} -> "
                     f"{c.file_after / 1024:.0f} KiB, ovsdb-server RSS {rss}{since}")  # fmt: skip
        lines.extend(f"      log: {line}" for line in c.log)
    return lines
