"""A node of a running cluster rebooted, or reinstalled, and brought back under its name and address.

`reboot(cluster, n)` is what a power cycle does to a node: every daemon of it killed at once
(faults.kill_node), its network namespace with its devices and its run dir gone (`Cluster.remove`:
/run is a tmpfs), but its OVS database file kept, as a real node keeps /etc/openvswitch/conf.db on
its disk. `rejoin(cluster, n)` boots it again: the same name, index and underlay address, its kept
database put back before ovsdb-server starts (so the same system-id, bridges and the interfaces of
its pods of the previous boot, whose devices are gone), its Node registered again as kubelet does,
its chassis, agent and services started as cluster-up starts them.

`reinstall=True` is a node whose disk was wiped and reinstalled under the old name: no database kept,
a new system-id. Its new ovn-controller cannot register while the old Chassis holds the node's Encap
address; node-controller removes that one once the node's agent reports its new chassis
(controllers/nodes/release.py), so the node's start does not wait for its Chassis row.

The pods are the caller's: a rebooted node's kubelet recreates them (new sandboxes, new container
ids) through the installed CNI, and its CNI GC with the valid attachments removes the previous
boot's (tests/integration/cluster/test_node_rejoin.py).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
import uuid
from pathlib import Path

from nodeenv.cluster.chassis import NodeChassis
from nodeenv.cluster.cluster import Cluster, ClusterNode, require_up
from nodeenv.cluster.faults import kill_node
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.node import Component, Node, read_env_file

log = logging.getLogger(__name__)

OVS_DB = Path("ovs") / "ovs.db"
"""The node's Open_vSwitch database file, under its run dir."""


def disk(cluster: Cluster, name: str) -> Path:
    """What survives node `name`'s reboot (its /etc/openvswitch): in the cluster's run dir, not the
    node's, so cluster-down removes it with the rest."""
    return cluster.run_dir / "disks" / name


def reboot(cluster: Cluster, n: ClusterNode) -> float:
    """Node `n` loses power: its daemons killed, its OVS database file kept on its disk, the rest
    (namespace, devices, run dir) gone; the time of the kill."""
    at = kill_node(n)
    kept = disk(cluster, n.name)
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copy2(n.node.run_dir / OVS_DB, kept / OVS_DB.name)
    cluster.remove(n)
    return at


class KeptOvsDatabase:
    """Component: the node's OVS database file from its disk back in place before ovsdb-server
    starts (nothing if the disk has none: a reinstalled node)."""

    name = "kept-ovs-db"

    def __init__(self, source: Path) -> None:
        self.source = source

    def start(self, node: Node) -> dict[str, str]:
        if self.source.exists():
            shutil.copy2(self.source, node.path(*OVS_DB.parts))
        return {}

    def cleanup(self, node: Node) -> None:
        """Nothing: the file is the node's (removed with its run dir)."""


def rejoin(cluster: Cluster, index: int, name: str, *, reinstall: bool = False) -> ClusterNode:
    """Boot node `name` (index `index`) again into the running cluster, on what its disk kept
    (`reinstall`: its disk wiped, a new system-id); the node, in the cluster again."""
    require_up(cluster)
    env = cluster.load()
    central = read_env_file(cluster.central.env_file)
    n = cluster.new_node(index, name)
    kept = disk(cluster, name) / OVS_DB.name
    if reinstall:
        kept.unlink(missing_ok=True)
        settings = dataclasses.replace(n.node.settings, system_id=f"{name}-{uuid.uuid4().hex[:8]}")
        n = ClusterNode(name, index, n.address, Node(settings, []))
    components: list[Component] = [KeptOvsDatabase(kept), *cluster.components_of(n, central)]
    if reinstall:
        for c in components:
            if isinstance(c, NodeChassis):
                c.registered = False  # registers once node-controller removed the stale chassis
    t0 = time.monotonic()
    try:
        cluster.underlay.attach(n.index, n.name)
        register_node(KubeClient.from_kubeconfig(Path(env["KUBECONFIG"])), n.name, n.address,
                      {"k8shost.plasmacloud.io/cluster": cluster.settings.prefix})  # fmt: skip
        n.node.components = components
        n.node.up()
    except BaseException:
        log.error("%s failed to rejoin; removing it", n.name)
        cluster.remove(n)
        raise
    cluster.nodes = sorted([*(m for m in cluster.nodes if m.name != name), n], key=lambda m: m.index)
    cluster.rewrite_files()
    log.info("%s rejoined the cluster in %.1f s", n.name, time.monotonic() - t0)
    return n
