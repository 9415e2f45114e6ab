"""bench/scale's arithmetic: the IDL floor's group commit, the stage breakdown of one port, the
stage named for the p99, and the growth exponent the curve prints."""

from __future__ import annotations

import threading
import time

import pytest

from bench.bench_scale import CURVES, LOCK, OVN_LOCK, locks
from bench.scale.floor import GroupCommit, PortTimes, StageClock, stage_run
from bench.scale.pods import CURVE, numbers, sizes_from, stages_line


def test_group_commit_writes_waiting_items_together_and_hands_errors_back() -> None:
    release, calls = threading.Event(), []

    def write(items: list[int]) -> None:
        calls.append(list(items))
        release.wait(5)
        if 99 in items:
            raise RuntimeError("refused")

    g = GroupCommit(write)
    threads = [threading.Thread(target=g, args=(i,)) for i in range(5)]
    threads[0].start()
    time.sleep(0.05)  # item 0 is being written; 1-4 queue behind it
    for t in threads[1:]:
        t.start()
    time.sleep(0.05)
    release.set()
    for t in threads:
        t.join(5)
    assert calls[0] == [0] and sorted(calls[1]) == [1, 2, 3, 4] and g.sizes == [1, 4]
    with pytest.raises(RuntimeError, match="refused"):
        g(99)
    g.close()


def test_stages_follow_the_critical_path_of_one_port() -> None:
    t = PortTimes(nb=1.000, pb=1.050, iface=1.010, ofport=1.200, claimed=1.080, installed=1.300)
    st = t.stages()
    assert st is not None
    assert st == pytest.approx({"northd": 50, "vswitchd attach": 190, "claim": 30, "flows": 100})
    assert PortTimes(nb=1.0).stages() is None  # not installed: no breakdown
    late = PortTimes(nb=1.0, pb=1.05, iface=1.01, ofport=1.1, claimed=1.4, installed=1.3).stages()
    assert late == pytest.approx({"northd": 50, "vswitchd attach": 90, "claim": 250, "flows": 0}), (
        "a claim committed after ovn-installed (RAFT SB) ends at ovn-installed: no negative stage"
    )


def test_the_p99_is_named_by_the_slowest_ports_largest_stage() -> None:
    clock = StageClock.__new__(StageClock)  # no monitors: times given by hand
    clock.times, clock._lock, clock._dbs, clock._seen = {}, threading.Lock(), [], []
    for i in range(20):
        flows = 0.9 if i == 19 else 0.01  # one slow port, held by its flows
        clock.times[f"p{i}"] = PortTimes(
            nb=0.0, pb=0.02, iface=0.0, ofport=0.01, claimed=0.03, installed=0.03 + flows
        )
    run = stage_run(clock, {f"p{i}": 0.0 for i in range(20)}, wall=2.0)
    assert len(run.total) == 20 and run.per_s == 10
    assert run.p99_stage() == "flows" and run.slowest["flows"] == pytest.approx(900)


def test_the_pods_curve_is_in_the_frame_with_its_stages_printed_not_tabled() -> None:
    assert CURVE in CURVES and CURVE.sizes == (100, 300, 1000)
    row = {"ADD p99 ms": 80.0, "ours stage-p99 northd": 40.0, "floor stage-p99 flows": 12.0}
    assert numbers(row) == {"ADD p99 ms": 80.0}
    assert stages_line(300, row) == "  at 300: ours stage-p99 northd 40 ms; floor stage-p99 flows 12 ms"


def test_the_ovn_lock_is_taken_first_and_only_for_the_pods_curve() -> None:
    assert locks(["services", "policies"]) == [LOCK]
    assert locks(["services", "pods"]) == [OVN_LOCK, LOCK]  # the order tests/conftest.py takes them in


def test_scale_max_bounds_the_sizes() -> None:
    assert sizes_from("100,300,1000", 300) == [100, 300]
