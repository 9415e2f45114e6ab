"""What one pod costs the node's OVN, counted (not timed): the guard of issue 21's design.

Per ADD into an existing namespace the agent commits exactly one NB transaction (the port, its
address and the node's egress set together) and one OVS transaction (the port on the bridge);
ovn-controller handles the new port incrementally (no full recompute of its flow engines);
ovn-northd 23.03 recomputes on every change it sees (no incremental path for ports in that
release) and is held to what one pod needs; ovs-vswitchd, which reconfigures every bridge on
each link change in its namespace, sees at most 4 changes of the pod's host link.
Counts come from independent observers: raw OVSDB monitors, the daemons' own engine
counters (`inc-engine/show-stats`) and `ip monitor link`.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.cni_floor import RawOvsdb
from bench.ovn_counters import engine_stats
from tests.integration.cni.conftest import Agent, Pods

N = 8
NORTHD_RECOMPUTES_PER_ADD = 5
"""What wakes northd for one pod, each seen alone when ADDs come one at a time (measured 4.2 per
ADD here): our NB commit, the echo of its own SB Port_Binding insert, ovn-controller's claim and
its `up`, the echo of northd's own NB `up` write. One more NB write per pod from the agent would
take it past 5. Concurrent ADDs share recomputes (`make bench BENCH=cni`, density run)."""
HOST_LINK_CHANGES_PER_ADD = 4


def _settle(rundir: Path, deadline: float = 5.0) -> None:
    """Until northd's `northd` and `lflow` nodes have not worked for 0.3 s (the previous pod's binding
    and `up` are processed). Not its engine runs: 25.03's northd runs its engine on every wake-up,
    this poll's own `ovn-appctl` included, so those never stop (each settle took its whole 5 s).

    ovn-controller's engine also runs on wake-ups with nothing to do, so only northd is waited for."""
    last, quiet_since, end = engine_stats(rundir)["ovn-northd"].work(), time.monotonic(), time.monotonic()
    while time.monotonic() - quiet_since < 0.3 and time.monotonic() - end < deadline:
        time.sleep(0.1)
        now = engine_stats(rundir)["ovn-northd"].work()
        if now != last:
            last, quiet_since = now, time.monotonic()


def test_one_pod_costs_one_transaction_per_database_and_no_controller_recompute(
    agent: Agent, pods: Pods
) -> None:
    e = agent.node.endpoints
    rundir = Path(e["OVN_RUNDIR"])
    pods.add("cost", "warm")  # the namespace's switch and router port exist from here on
    nb = RawOvsdb(
        e["OVN_NB_DB"],
        "OVN_Northbound",
        {
            "Logical_Switch": ["ports"],
            "Logical_Switch_Port": ["name", "addresses", "port_security", "external_ids"],
            "Address_Set": ["addresses"],
        },
    )
    ovs = RawOvsdb(e["OVS_DB"], "Open_vSwitch", {"Bridge": ["ports"], "Port": ["name"]})
    links = subprocess.Popen(["ip", "-o", "monitor", "link"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        _settle(rundir)
        before, nb0, ovs0 = engine_stats(rundir), nb.updates, ovs.updates
        host_ifs = []
        for i in range(N):
            _, _, result = pods.add("cost", f"p{i}")
            host_ifs.append(str(result["interfaces"][0]["name"]))  # type: ignore[index]
            _settle(rundir)
        after = engine_stats(rundir)
        nb_txns, ovs_txns = nb.updates - nb0, ovs.updates - ovs0
    finally:
        links.terminate()
        seen = links.communicate()[0].splitlines()
        nb.close()
        ovs.close()
    assert nb_txns == N, f"{nb_txns} NB transactions for {N} ADDs"
    assert ovs_txns == N, f"{ovs_txns} OVS transactions for {N} ADDs"
    controller = (after["ovn-controller"] - before["ovn-controller"]).recomputes()
    assert controller == {"runtime_data": 0, "lflow_output": 0, "pflow_output": 0}, controller
    northd = (after["ovn-northd"] - before["ovn-northd"]).recomputes()
    assert northd["northd"] <= NORTHD_RECOMPUTES_PER_ADD * N, northd
    for host_if in host_ifs:
        changes = [line for line in seen if f" {host_if}@" in line]
        assert 1 <= len(changes) <= HOST_LINK_CHANGES_PER_ADD, changes
