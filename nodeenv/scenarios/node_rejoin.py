"""A node reboots, then is reinstalled, and rejoins each time (cluster only; before node_failure, after
every earlier part's cleanup). The last node (no controller replica) with two pods: its daemons
killed, its namespace and run dir gone, its OVS database kept (nodeenv/cluster/reboot.py); back under
its name and address, kubelet's work done through the installed plugin (the same pods in new
sandboxes, then CNI GC with the sandboxes it has): its chassis is the same row, the previous boot's
ports are gone, its pods reach the others both ways. Then the same node reinstalled (its database
lost, a new system-id): node-controller removes its stale chassis once its agent reports the new one,
and the others' tunnels follow. The shared invariants hold after each (nodeenv/cluster/invariants.py)."""

from __future__ import annotations

import time
from dataclasses import replace

from nodeenv.cluster import invariants, reboot
from nodeenv.cluster.churn import ClusterPods, LivePod, cross_node_ok
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.node import read_env_file
from nodeenv.scenario import Scenario

NS = "sandbox-rejoin"


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None or len(cluster.nodes) < 3:
        return  # one node: nothing to rejoin
    with scn.step("cleanup: every earlier part's pods, Services and volumes removed", on="all"):
        errors = scn.run_cleanups()
        if errors:
            raise RuntimeError("; ".join(errors))
    pods = ClusterPods(cluster, tag="r")
    scn.defer(pods.delete_all)
    victim = cluster.nodes[-1]
    probes = [_add(pods, n, f"rj-{n.name}") for n in cluster.nodes] + [_add(pods, victim, "rj-second")]
    for reinstall in (False, True):
        what = "reinstalled (new system-id)" if reinstall else "rebooted (OVS database kept)"
        with scn.step(f"node rejoin: {victim.name} {what}, its pods back", on=victim.name) as step:
            before = _chassis(cluster, victim.name)
            reboot.reboot(cluster, victim)
            gone = pods.drop_node(victim.name)
            t0 = time.monotonic()
            victim = reboot.rejoin(cluster, victim.index, victim.name, reinstall=reinstall)
            scn.places[:] = [replace(p, env=victim.env) if p.name == victim.name else p for p in scn.places]
            again = [_add(pods, victim, p.name) for p in gone]
            call = pods.runtime(victim).gc((p.ref.container_id, "eth0") for p in again)
            if call.rc != 0:
                raise RuntimeError(f"CNI GC on {victim.name}: {call.out}")
            probes = [p for p in probes if p.node != victim.name] + again
            deadline = time.monotonic() + 30
            while bad := cross_node_ok(probes, tries=1):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"after {victim.name} came back these pairs do not answer: {bad}")
            back = time.monotonic() - t0
            after = _chassis(cluster, victim.name)
            if len(after) != 1 or (after == before) == reinstall:
                raise RuntimeError(f"{victim.name}'s chassis were {before}, are {after}")
            if problems := invariants.settle(cluster, pods.pods(), [NS]):
                raise RuntimeError("; ".join(problems))
            step.detail = (f"chassis {after[0]} ({'new' if reinstall else 'kept'}); pods reachable both ways "
                           f"{back:.1f} s after its start; the previous boot's ports collected")  # fmt: skip


def _add(pods: ClusterPods, node: ClusterNode, name: str) -> LivePod:
    pod, outcome = pods.add(node, NS, name)
    if pod is None:
        raise RuntimeError(f"ADD {name} on {node.name}: {outcome.error}")
    return pod


def _chassis(cluster: Cluster, node: str) -> list[str]:
    """The node's Chassis rows (by hostname) as `name uuid`."""
    sb = read_env_file(cluster.env_file)["OVN_SB_DB"]
    rows = invariants.rows("ovn-sbctl", sb, "Chassis", ["_uuid", "name", "hostname"])
    return sorted(f"{c['name']} {c['_uuid']}" for c in rows if c["hostname"] == node)
