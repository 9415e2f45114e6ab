"""A cold restart (cluster only; before node_failure): a pod on every node, then every daemon of the
suite and of OVS/OVN on every node and in central killed at once and started again as they ran
(nodeenv/cluster/coldrestart.py), the API double and PlasmaCloud's LightningStor kept (k3s's
datastore, a PlasmaCloud service: neither restarts with the nodes). The pods were never touched:
they talk across nodes again, keep their addresses and ports, no chassis is re-registered, and the
shared invariants hold (nodeenv/cluster/invariants.py)."""

from __future__ import annotations

from nodeenv.cluster import faults
from nodeenv.cluster.churn import ClusterPods, LivePod, wait_cross_node
from nodeenv.cluster.coldrestart import KEEP, cold_restart
from nodeenv.cluster.invariants import rows, settle
from nodeenv.node import read_env_file
from nodeenv.scenario import Scenario

NS = "sandbox-coldrestart"
LIGHTNINGSTOR = "lightningstor-double"
"""The sandbox's PlasmaCloud LightningStor (nodeenv/sandbox.py's LightningStorComponent)"""


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None or len(cluster.nodes) < 2:
        return
    pods = ClusterPods(cluster, tag="c")

    def delete_pods() -> None:
        """DEL through each node's plugin, saying why one failed (the plugin's CNI error)."""
        nodes, failed = {n.name: n for n in cluster.nodes}, []
        for pod in list(pods.live.values()):
            node = nodes.get(pod.node)
            if node is None:
                continue
            call = pods.runtime(node).delete(pod.ref.container_id, f"/run/netns/{pod.netns}", pod.result,
                                             args=pod.args)  # fmt: skip
            if call.rc != 0:
                failed.append(f"{pod.ref.name}: {call.out.get('msg', '')} {call.stderr.strip()[-200:]}")
            pods.delete(pod)  # forgotten and its namespace removed either way
        if failed:
            raise RuntimeError(f"DEL failed: {failed}")

    scn.defer(delete_pods)
    every = ",".join(n.name for n in cluster.nodes)
    probes: list[LivePod] = []
    with scn.step("cold restart: a pod on every node, talking across nodes", on=every):
        for n in cluster.nodes:
            pod, outcome = pods.add(n, NS, f"probe-{n.name}")
            if pod is None:
                raise RuntimeError(f"ADD on {n.name}: {outcome.error}")
            probes.append(pod)
        wait_cross_node(probes, 0.0, timeout=20)
    sb = read_env_file(cluster.env_file)["OVN_SB_DB"]
    chassis = sorted(str(c["_uuid"]) for c in rows("ovn-sbctl", sb, "Chassis", ["_uuid"]))
    what = "cold restart: every daemon but the API and LightningStor killed at once, started again"
    with scn.step(what, on="all") as step:
        got = cold_restart(cluster, (*KEEP, LIGHTNINGSTOR))
        whole = faults.wait_whole(cluster, timeout=90)
        back = wait_cross_node(probes, got.at, timeout=90)
        problems = settle(cluster, pods.pods(), [NS], timeout=30)
        if problems:
            raise RuntimeError("; ".join(problems))
        if sorted(str(c["_uuid"]) for c in rows("ovn-sbctl", sb, "Chassis", ["_uuid"])) != chassis:
            raise RuntimeError("chassis re-registered after the restart")
        step.detail = (f"{len(got.killed)} daemons killed; all running {got.started_s:.1f} s after the kill, "
                       f"OVN whole {whole:.1f} s later, pods across nodes {back:.1f} s after the kill; "
                       "same addresses, ports, chassis")  # fmt: skip
