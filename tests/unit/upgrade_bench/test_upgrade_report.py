"""`make bench BENCH=upgrade`'s figures: each probe event, write gap and failed ADD counted in the
window of the component being rolled when it happened, and the probe's own refusals."""

from __future__ import annotations

import pytest

from bench.bench_upgrade import NETDEV_SHORT, Window, print_table, report


def test_events_land_in_the_window_they_happened_in() -> None:
    windows = [
        Window("baseline", 0, 10),
        Window("daemonset/ovs-node", 10, 40),
        Window("statefulset/x", 40, 50),
    ]
    events = [
        {"t": 5, "kind": "stall", "stream": "a", "seconds": 0.4},
        {"t": 12, "kind": "reset", "stream": "clusterip", "error": "ECONNRESET"},
        {"t": 13, "kind": "stall", "stream": "a", "seconds": 2.5},
        {"t": 20, "kind": "dns_fail", "name": "echo"},
        {"t": 45, "kind": "connected", "stream": "a"},
    ]
    rows = {
        r["component"]: r for r in report(windows, events, [(11, 0.2), (30, 1.7), (41, 0.0)], [39.0, 55.0])
    }
    base, ovs, sts = rows["baseline"], rows["daemonset/ovs-node"], rows["statefulset/x"]
    assert (base["resets"], base["stream_stall_s"], base["rollout_s"]) == (0, 0.4, 0.0)
    assert (ovs["resets"], ovs["dns_failures"], ovs["stream_stall_s"], ovs["write_stall_s"]) == (
        1,
        1,
        2.5,
        1.7,
    )
    assert (ovs["add_failures"], ovs["rollout_s"], ovs["reset_streams"]) == (1, 30, ["clusterip"])
    assert (sts["resets"], sts["add_failures"], sts["write_stall_s"]) == (0, 0, 0.0)  # 55: after every window


def test_a_workload_not_rolled_is_a_row_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    skipped = Window("daemonset/ovs-node", 10, 10, not_rolled=NETDEV_SHORT)
    rows = report([Window("baseline", 0, 10), skipped], [{"t": 10, "kind": "reset", "stream": "a"}], [], [])
    assert rows[1] == {"component": "daemonset/ovs-node", "not_rolled": NETDEV_SHORT}
    print_table(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split()[:3] == ["daemonset/ovs-node", "not", "rolled:"], out
    assert "netdev" in out[-1]


def test_liveness_kills_are_named_in_the_window_they_happened_in() -> None:
    windows = [Window("baseline", 0, 10), Window("deployment/fiberlb-controller", 10, 40)]
    kills = [(12.0, "ovs-node-abc/openvswitch"), (50.0, "ovn-central-0/nb")]
    rows = report(windows, [], [], [], kills)
    assert rows[0]["liveness_kills"] == [] and rows[1]["liveness_kills"] == ["ovs-node-abc/openvswitch"]
