"""The database soak's compaction report (bench/db_compactions.py): a file that shrank between two
samples is a compaction, with its ovsdb-server's RSS in both samples, the time since that member's
previous one, and ovsdb-server's log lines about it between the two samples' wall-clock times."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from bench.db_bounds import FILE, LIVE, RSS, DbSample
from bench.db_compactions import LONGEST_WAIT, attach_logs, found, log_lines, overdue, report

MiB = 2**20
T0 = datetime.fromisoformat("2026-11-28T04:40:00+00:00").timestamp()


def sample(t: float, nb1: float, sb1: float, sb1_rss: float) -> DbSample:
    return DbSample(t, {(FILE, "nb1.db"): nb1, (FILE, "sb1.db"): sb1, (LIVE, "OVN_Southbound"): 0.2 * MiB,
                        (RSS, "central/ovsdb-server-sb1"): sb1_rss,
                        (RSS, "central/ovsdb-server-sb10"): 99 * MiB}, wall=T0 + t)  # fmt: skip


SAMPLES = [
    sample(0, 1 * MiB, 5 * MiB, 20 * MiB),
    sample(10, 1.1 * MiB, 10.5 * MiB, 40 * MiB),
    sample(20, 1.2 * MiB, 0.4 * MiB, 22 * MiB),  # sb1 compacted
    sample(30, 1.15 * MiB, 0.5 * MiB, 23 * MiB),  # nb1 5 % smaller: not a compaction
    sample(80, 1.2 * MiB, 10.6 * MiB, 41 * MiB),
    sample(90, 1.3 * MiB, 0.3 * MiB, 21 * MiB),  # sb1 again
]


def test_a_file_that_shrank_by_more_than_a_tenth_is_a_compaction_with_its_rss() -> None:
    seen = found(SAMPLES)
    assert [(c.member, c.t) for c in seen] == [("sb1", 20), ("sb1", 90)]
    first, second = seen
    assert (first.file_before, first.file_after) == (10.5 * MiB, 0.4 * MiB)
    assert (first.rss_before, first.rss_after) == (40 * MiB, 22 * MiB)  # not sb10's
    assert first.since_previous is None and second.since_previous == 70


def test_no_compaction_in_a_file_that_only_grew_or_barely_shrank() -> None:
    assert found(SAMPLES[:2]) == [] and found(SAMPLES[2:4]) == []


TOOK = "Database compaction took"
LOG = "\n".join([
    "2026-11-28T04:40:05.000Z|00031|ovsdb|DBG|OVN_Southbound: Compaction thread started.",
    "2026-11-28T04:40:12.500Z|00032|raft|INFO|Transferring leadership to write a snapshot.",
    "2026-11-28T04:40:13.100Z|00002|ovsdb(compaction3)|DBG|OVN_Southbound: Compaction thread finished.",
    f"2026-11-28T04:40:13.200Z|00034|ovsdb|DBG|OVN_Southbound: {TOOK} 420ms (init: 5ms, write: 105ms)",
    "2026-11-28T04:40:14.000Z|00035|jsonrpc|WARN|unix#3: receive error: Connection reset by peer",
    "not a log line about a compaction",
    f"2026-11-28T04:41:29.000Z|00036|ovsdb|INFO|OVN_Southbound: {TOOK} 1200ms (init: 9ms, write: 800ms)",
])  # fmt: skip


def test_log_lines_about_compaction_between_two_wall_clock_times() -> None:
    lines = log_lines(LOG.splitlines(), T0 + 10, T0 + 20)
    assert lines == [
        "2026-11-28T04:40:12.500Z raft: Transferring leadership to write a snapshot.",
        "2026-11-28T04:40:13.100Z ovsdb(compaction3): OVN_Southbound: Compaction thread finished.",
        f"2026-11-28T04:40:13.200Z ovsdb: OVN_Southbound: {TOOK} 420ms (init: 5ms, write: 105ms)",
    ]


def test_each_compaction_gets_its_own_members_log_lines_and_a_report_line(tmp_path: Path) -> None:
    (tmp_path / "ovsdb-sb1.log").write_text(LOG)
    seen = found(SAMPLES)
    attach_logs(seen, SAMPLES, {"sb1": tmp_path / "ovsdb-sb1.log", "nb1": tmp_path / "missing.log"})
    assert len(seen[0].log) == 4 and seen[1].log == [
        f"2026-11-28T04:41:29.000Z ovsdb: OVN_Southbound: {TOOK} 1200ms (init: 9ms, write: 800ms)"
    ]
    out = report(seen)
    assert out[0] == "  compactions seen: 2"
    assert out[1] == "    0.3 min sb1: file 10752 -> 410 KiB, ovsdb-server RSS 40.0 -> 22.0 MiB"
    assert (
        "1.5 min sb1: file 10854 -> 307 KiB, ovsdb-server RSS 41.0 -> 21.0 MiB, 1.2 min after its previous"
        in out[6]
    )


def test_a_file_over_the_rule_is_overdue_only_past_the_rules_longest_wait() -> None:
    grown = [(0.0, 0.3 * MiB), (600.0, 6 * MiB), (1200.0, 11 * MiB)]
    assert overdue("sb1.db", grown, slack=10) == []  # over 10 MiB but 20 min in: may still wait
    late = [*grown, (LONGEST_WAIT + 11, 12 * MiB)]
    assert overdue("sb1.db", late, slack=10) == ["sb1.db 12288 KiB at 22.2 min, 22.2 min since compacted"]
    compacted = [*grown, (1300.0, 0.3 * MiB), (1300 + LONGEST_WAIT - 60, 10.5 * MiB)]
    assert overdue("sb1.db", compacted, slack=10) == []  # the wait counts from the compaction


def test_a_file_under_twice_its_compacted_size_is_not_overdue_above_the_floor() -> None:
    big = [(0.0, 6 * MiB), (1500.0, 11 * MiB), (3000.0, 11.5 * MiB)]
    assert overdue("nb1.db", big, slack=10) == []
    assert overdue("nb1.db", [(0.0, 4 * MiB), (3000.0, 10.2 * MiB)], slack=10) != []
