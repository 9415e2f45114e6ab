"""A cluster of nodes on one machine: the control plane, OVN central, N nodes; up, down, files.

`Cluster.up()` builds the underlay (nodeenv/cluster/underlay.py), starts the API double in this
namespace on loopback, also serving the nodes on the underlay (`control`, nodeenv/cluster/control.py),
OVN central (NB, SB, northd; standalone or RAFT) in the
underlay namespace listening on unix sockets (for this namespace) and on the underlay (for the
nodes), then each node: its Node object in the API (first, as kubelet registers), its namespace on
the underlay, its chassis (nodeenv/cluster/chassis.py), its PrismNET agent with plugin and conflist
under its own install root, its routes to the VIPs, its node-local FlashDNS listener and CSI plugin,
and on the first `controller_replicas` nodes a replica of each cluster-wide controller (FiberLB,
NetworkPolicy, node-controller; leader-elected). Each of those is a `Node` (nodeenv/node.py) with its
own run dir and daemon table, so a node is the same value the single-node environment is made of. It
writes `<run>/nodes/<n>/node.env` per node and the cluster files `<run>/cluster.json` and
`<run>/cluster.env`.
`Cluster.down()` stops every node, central and control by PID, deletes the namespaces by name
prefix and removes the run dir. Its parts work in the run dir through its short alias
(`cluster.run_dir`, nodeenv/runtime_dir.py): a node's sockets fit whatever the checkout's depth.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nodeenv.central_exporter_component import CentralExporters
from nodeenv.cluster.chassis import NodeChassis
from nodeenv.cluster.control import (
    CONTROLLERS,
    LEASE_NAMESPACE,
    control_components,
    controller_replicas,
    node_services,
)
from nodeenv.cluster.monitoring import ClusterPrometheus, write_targets
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import Underlay, learn_neighbours, list_netns, netns_pids
from nodeenv.cni_component import CniComponent
from nodeenv.daemons import DaemonError
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.node import Component, Node, NodeSettings, read_env_file, write_env_file
from nodeenv.ovn_central import OvnCentral
from nodeenv.ovn_pki import OvnPki
from nodeenv.runtime_dir import link_run_dir, make_run_dir, remove_run_dir, short_path

log = logging.getLogger(__name__)


@dataclass
class ClusterNode:
    name: str
    index: int
    address: str
    """Underlay address: its Geneve endpoint and the Node object's InternalIP."""
    node: Node

    @property
    def netns(self) -> str:
        return self.node.settings.netns

    @property
    def env(self) -> dict[str, str]:
        return self.node.endpoints

    @property
    def env_file(self) -> Path:
        return self.node.env_file

    @property
    def vswitchd_ctl(self) -> str:
        """The node's ovs-vswitchd unixctl socket (`ovs-appctl -t`)."""
        return str(self.node.run_dir / "ovs" / "ovs-vswitchd.ctl")


class Cluster:
    def __init__(self, settings: ClusterSettings) -> None:
        settings.validate()
        self.settings = s = settings
        self.run_dir = short_path(s.run_dir, s.runtime_dir)
        """The run dir by its short alias: every part's run dir is below it."""
        self.underlay = Underlay(s.prefix, s.central_address, s.underlay.prefixlen)
        self.control = Node(NodeSettings(run_dir=self.run_dir / "control", runtime_dir=s.runtime_dir),
                            [*control_components(self.underlay.netns, s.central_address, s.api_data),
                             ClusterPrometheus(s.scrape_interval)])  # fmt: skip
        pki = OvnPki(s.run_dir / "pki" / "ovn")  # the cluster's, made once (as kubeadm's)
        self.central_component = OvnCentral(s.ovn_central, listen_ip=s.central_address, pki=pki,
                                            db_dir=s.central_db_dir)  # fmt: skip
        central = NodeSettings(
            run_dir=self.run_dir / "central",
            netns=self.underlay.netns,
            ovn_central=s.ovn_central,
            runtime_dir=s.runtime_dir,
        )
        self.central = Node(central, [self.central_component, CentralExporters(self.central_component)])
        self.nodes = [self.new_node(i, name) for i, name in enumerate(s.node_names(), 1)]

    def new_node(self, index: int, name: str = "") -> ClusterNode:
        """Node `index` (1..) of this cluster, not started: its settings, netns and address."""
        name = name or f"node{index}"
        s, run = self.settings, self.run_dir / "nodes" / name
        ns = NodeSettings(run_dir=run, bridge="br-int", system_id=name, encap_ip=s.node_address(index),
                          install_root=run / "root", netns=self.underlay.node_netns(name),
                          runtime_dir=s.runtime_dir)  # fmt: skip
        return ClusterNode(name, index, s.node_address(index), Node(ns, []))

    def node_components(self, central: dict[str, str]) -> list[Component]:
        """What runs on every node, in order (the cluster's central endpoints known)."""
        cni = CniComponent(cluster_cidr=self.settings.cluster_cidr,
                           kubeconfig=self.control.endpoints.get("NODES_KUBECONFIG", ""))  # fmt: skip
        chassis = NodeChassis(central, self.settings.underlay.prefixlen)
        return [chassis, cni, *node_services(self.control.endpoints)]

    def components_of(self, n: ClusterNode, central: dict[str, str]) -> list[Component]:
        """What node `n` runs: what every node runs, then a replica of each cluster-wide controller
        if it is one of the nodes that run them."""
        replicas = controller_replicas() if self.settings.runs_controllers(n.index) else []
        every = self.node_components(central)
        for c in every:  # the node's name, whatever its OVS system-id (a reinstalled node's is new)
            if isinstance(c, NodeChassis | CniComponent):
                c.node_name = n.name
        return [*every, *replicas]

    def controller_nodes(self) -> list[ClusterNode]:
        """The nodes that run a replica of each cluster-wide controller."""
        return [n for n in self.nodes if self.settings.runs_controllers(n.index)]

    @property
    def cluster_file(self) -> Path:
        return self.settings.run_dir / "cluster.json"

    @property
    def env_file(self) -> Path:
        return self.settings.run_dir / "cluster.env"

    def is_up(self) -> bool:
        parts = [self.control, self.central, *(n.node for n in self.nodes)]
        return self.cluster_file.exists() and all(p.is_up() for p in parts)

    def _foreign_live_netns(self) -> list[str]:
        """This prefix's namespaces that still hold processes (another run dir's live cluster)."""
        return [ns for ns in list_netns(self.settings.prefix) if netns_pids(ns)]

    def up(self) -> dict[str, str]:
        """Start the whole cluster (nothing if it is up); on failure stop what was started."""
        if self.is_up():
            return self.load()
        if not self.settings.run_dir.exists() and (live := self._foreign_live_netns()):
            raise DaemonError(
                f"another cluster with prefix {self.settings.prefix} is running (processes in "
                f"{', '.join(live)}) and its run dir is not {self.settings.run_dir}: stop it with its "
                "own cluster-down, or choose another --prefix"
            )
        if self.settings.run_dir.exists() or list_netns(self.settings.prefix):
            log.info(
                "stale cluster (prefix %s) in %s; cleaning it first",
                self.settings.prefix,
                self.settings.run_dir,
            )
            self.down()
        make_run_dir(self.settings.run_dir, self.settings.runtime_dir)
        t0 = time.monotonic()
        try:
            self.underlay.create()
            control = self.control.up()
            central = self.central.up()
            for n in self.nodes:
                register_node(KubeClient.from_kubeconfig(Path(control["KUBECONFIG"])), n.name, n.address,
                              {"k8shost.plasmacloud.io/cluster": self.settings.prefix})  # fmt: skip
                self.underlay.attach(n.index, n.name)
                n.node.components = self.components_of(n, central)
                n.node.up()
            self._learn_tunnel_neighbours()
        except BaseException:
            log.error("cluster-up failed; stopping what was started")
            self.down()
            raise
        env = self._write_files(control, central)
        log.info("cluster of %d nodes up in %.1f s", len(self.nodes), time.monotonic() - t0)
        return env

    def join(self) -> ClusterNode:
        """A new node joins the running cluster: the next index after every node there is (or was
        on disk), its namespace on the underlay, its Node object (first, as kubelet registers before
        its network is ready: a node-controller never sees its agent's state without its Node), its
        chassis and agent; the tunnels learned both ways and the cluster files rewritten."""
        require_up(self)
        env = self.load()
        central = self._central_env()
        known = [n for n in self._nodes_on_disk() if n.node.run_dir.exists()]
        index = max((n.index for n in known), default=0) + 1
        n = self.new_node(index)
        if index > min(self.settings.underlay.num_addresses - 12, 99):
            raise DaemonError(
                f"{n.name} cannot join: no address left on the underlay {self.settings.underlay}"
            )
        t0 = time.monotonic()
        try:
            self.underlay.attach(n.index, n.name)
            register_node(KubeClient.from_kubeconfig(Path(env["KUBECONFIG"])), n.name, n.address,
                          {"k8shost.plasmacloud.io/cluster": self.settings.prefix})  # fmt: skip
            n.node.components = self.components_of(n, central)
            n.node.up()
        except BaseException:
            log.error("%s failed to join; removing it", n.name)
            self.remove(n)
            raise
        self.nodes = [*known, n]
        self._learn_tunnel_neighbours()
        self._write_files(read_env_file(self.control.env_file), central)
        log.info("%s joined the cluster in %.1f s", n.name, time.monotonic() - t0)
        return n

    def remove(self, n: ClusterNode) -> list[str]:
        """Take a node out of this machine: its daemons stopped (dead ones forgotten), its files
        and namespace removed (its underlay link with it). Its Node object and OVN state stay: what
        a node-controller releases when the Node is deleted."""
        from nodeenv.daemons import is_alive  # here, not at the top: keeps merges with other branches easy

        n.node.components = n.node.components or self.components_of(n, self._central_env())
        for rec in n.node.daemons.load():
            if not is_alive(rec):  # killed on purpose: forgotten, not kept as a fault's evidence
                n.node.daemons.stop(rec.name)
        stopped = n.node.down()
        self.underlay.detach(n.index, n.name)
        self.nodes = [m for m in self.nodes if m.name != n.name]
        if self.cluster_file.exists():
            self._write_files(read_env_file(self.control.env_file), self._central_env())
        return stopped

    def rewrite_files(self) -> None:
        """After a node came back by other means (nodeenv/cluster/reboot.py): the tunnels learned
        both ways and the cluster files written for the nodes there are now."""
        self._learn_tunnel_neighbours()
        self._write_files(read_env_file(self.control.env_file), self._central_env())

    def _central_env(self) -> dict[str, str]:
        return read_env_file(self.central.env_file)

    def _learn_tunnel_neighbours(self) -> None:
        learn_neighbours([(n.netns, n.address) for n in self.nodes])

    def _write_files(self, control: dict[str, str], central: dict[str, str]) -> dict[str, str]:
        nodes = [{"name": n.name, "netns": n.netns, "address": n.address, "env_file": str(n.env_file)}
                 for n in self.nodes]  # fmt: skip
        doc = {
            "prefix": self.settings.prefix,
            "underlay": {"netns": self.underlay.netns, "cidr": self.settings.underlay_cidr,
                         "central_address": self.settings.central_address},
            "central": central,
            "kubeconfig": control["KUBECONFIG"],
            "nodes_kubeconfig": control["NODES_KUBECONFIG"],
            "audit_log": control["KUBE_AUDIT_LOG"],
            "nodes": nodes,
            "controllers": {"names": list(CONTROLLERS), "nodes": [n.name for n in self.controller_nodes()],
                            "lease_namespace": LEASE_NAMESPACE},
        }  # fmt: skip
        self.cluster_file.write_text(json.dumps(doc, indent=1))
        env = {
            "K8SHOST_CLUSTER_DIR": str(self.settings.run_dir),
            "K8SHOST_CLUSTER_NODES": " ".join(n.name for n in self.nodes),
            **{f"K8SHOST_NODE_{n.index}": f"{n.name} {n.netns} {n.address}" for n in self.nodes},
            "K8SHOST_UNDERLAY_NETNS": self.underlay.netns,
            # usable from this namespace: the members' unix sockets (nodes use the *_SSL lists)
            **{k: v for k, v in central.items() if k.startswith("OVN_")},
            "KUBECONFIG": control["KUBECONFIG"],
            "KUBE_API_URL": control["KUBE_API_URL"],
            # the same API from inside the nodes' namespaces (the underlay listener)
            "NODES_KUBECONFIG": control["NODES_KUBECONFIG"],
            "NODES_KUBE_API_URL": control["NODES_KUBE_API_URL"],
            # every request to the API double as an audit.k8s.io/v1 Event per line
            "KUBE_AUDIT_LOG": control["KUBE_AUDIT_LOG"],
            # the IAM webhook the API double authenticates tokens through, and its dev signing key
            **{k: v for k, v in control.items() if k.startswith(("WEBHOOK_", "IAM_"))},
            "K8SHOST_CONTROLLER_NODES": " ".join(n.name for n in self.controller_nodes()),
            # the cluster's Prometheus (nodeenv/cluster/monitoring.py)
            **{k: v for k, v in control.items() if k.startswith("PROMETHEUS_")},
        }
        write_env_file(self.env_file, env)
        write_targets(self)
        return env

    def load(self) -> dict[str, str]:
        """The endpoints of a running cluster (its env files read back)."""
        for part in (self.control, self.central, *(n.node for n in self.nodes)):
            part.endpoints = read_env_file(part.env_file)
        return read_env_file(self.env_file)

    def down(self) -> list[str]:
        """Stop everything by PID (nodes with their controller replicas, central, control), delete
        the namespaces, remove the run dir; the names of the daemons stopped, `<part>/<daemon>`."""
        stopped: list[str] = []
        link_run_dir(self.settings.run_dir, self.settings.runtime_dir)  # lost with /run (a reboot)
        for label, part in self._parts_newest_first():
            if part.run_dir.exists():
                stopped += [f"{label}/{name}" for name in part.down()]
        self.underlay.destroy()
        remove_run_dir(self.settings.run_dir, self.settings.runtime_dir)
        return stopped

    def _parts_newest_first(self) -> Iterable[tuple[str, Node]]:
        for n in reversed(self._nodes_on_disk()):
            if n.node.run_dir.exists():
                self._restore_components(n)
            yield n.name, n.node
        yield "central", self.central
        yield "control", self.control

    def _nodes_on_disk(self) -> list[ClusterNode]:
        """This cluster's nodes plus any other node whose run dir is there (one started by a
        cluster-up with more nodes, or a test's extra node): down() stops them all."""
        known = {n.name for n in self.nodes}
        found = sorted(p.name for p in (self.settings.run_dir / "nodes").glob("node*") if p.name not in known)
        extra = [self.new_node(int(name.removeprefix("node")), name) for name in found if name[4:].isdigit()]
        return sorted([*self.nodes, *extra], key=lambda n: n.index)

    def _restore_components(self, n: ClusterNode) -> None:
        """A node's components need the central endpoints (for cleanup after a crash as well)."""
        central_env = self.settings.run_dir / "central" / "node.env"
        central = read_env_file(central_env) if central_env.exists() else {}
        n.node.components = self.components_of(n, central)

    def parts(self) -> dict[str, Node]:
        """Every part of the cluster by label: control, central and each node (the controllers'
        replicas are daemons of the nodes that run them)."""
        return {"control": self.control, "central": self.central, **{n.name: n.node for n in self.nodes}}

    def faults(self) -> Sequence[str]:
        """Dead or wedged daemons anywhere in the cluster, each `<part>: <fault>`."""
        return [f"{label}: {f}" for label, part in self.parts().items() for f in part.check()]


def require_up(cluster: Cluster) -> None:
    if not cluster.is_up():
        raise DaemonError(f"no cluster is up in {cluster.settings.run_dir} (make cluster-up)")
