"""Cluster configuration: the only reader of the environment for cluster mode."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nodeenv.ovn_central import MODES
from nodeenv.runtime_dir import RUNTIME_DIR, check_room, runtime_dir_from_env

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSettings:
    run_dir: Path = REPO / ".run-cluster"
    nodes: int = 3
    prefix: str = "k8shc"
    """Every network namespace the cluster creates is named `<prefix>-...`, so cleanup is by name."""
    ovn_central: str = "standalone"
    """"standalone" (one NB, one SB, one northd; fastest) or "raft" (3-member clusters, two northd)."""
    underlay_cidr: str = "10.250.0.0/24"
    """The nodes' own network, inside the underlay namespace: central at .1, node i at .(10+i)."""
    cluster_cidr: str = "10.244.0.0/16"
    """The pod network (every node's agent carves namespace subnets from it)."""
    controller_replicas: int = 2
    """Replicas of each cluster-wide controller, one per node on the first nodes (the Deployments'
    replicas: 2 with anti-affinity); fewer nodes, fewer replicas (the others would stay Pending)."""
    runtime_dir: Path = RUNTIME_DIR
    """Where the run dir's short alias is made (nodeenv/runtime_dir.py)."""
    scrape_interval: str = "15s"
    """The cluster's Prometheus: scrape and rule evaluation interval (nodeenv/cluster/monitoring.py)."""
    api_data: bool = False
    """The API double keeps its objects on disk (--data-dir, as k3s's datastore) and listens on a
    fixed port, so it may be restarted with the rest (nodeenv/cluster/coldrestart.py); off: in memory,
    no fsync per write."""
    central_db_dir: Path | None = None
    """Where OVN central's database files live (e.g. a filesystem of their own); None: its run dir."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClusterSettings:
        d = cls()
        return cls(
            run_dir=Path(env.get("K8SHOST_CLUSTER_DIR", d.run_dir)),
            nodes=int(env.get("K8SHOST_NODES", d.nodes)),
            prefix=env.get("K8SHOST_CLUSTER_PREFIX", d.prefix),
            ovn_central=env.get("K8SHOST_OVN_CENTRAL", d.ovn_central),
            underlay_cidr=env.get("K8SHOST_UNDERLAY_CIDR", d.underlay_cidr),
            cluster_cidr=env.get("K8SHOST_CLUSTER_CIDR", d.cluster_cidr),
            controller_replicas=int(env.get("K8SHOST_CONTROLLER_REPLICAS", d.controller_replicas)),
            runtime_dir=runtime_dir_from_env(env),
            scrape_interval=env.get("K8SHOST_SCRAPE_INTERVAL", d.scrape_interval),
            api_data=env.get("K8SHOST_API_DATA", "").lower() in ("1", "true", "yes"),
            central_db_dir=Path(env["K8SHOST_CENTRAL_DB_DIR"]) if env.get("K8SHOST_CENTRAL_DB_DIR") else None,
        )

    def validate(self) -> None:
        net = ipaddress.IPv4Network(self.underlay_cidr)
        if not 1 <= self.nodes <= min(net.num_addresses - 12, 99):
            raise ValueError(f"{self.nodes} nodes: between 1 and {min(net.num_addresses - 12, 99)} on {net}")
        if self.ovn_central not in MODES:
            raise ValueError(f"OVN central {self.ovn_central!r}: one of {', '.join(MODES)}")
        if not self.prefix.replace("-", "").isalnum() or len(self.prefix) > 8:
            raise ValueError(f"prefix {self.prefix!r}: at most 8 letters, digits or '-'")
        if ipaddress.IPv4Network(self.cluster_cidr).overlaps(net):
            raise ValueError(f"the pod network {self.cluster_cidr} overlaps the underlay {net}")
        if self.controller_replicas < 1:
            raise ValueError(f"{self.controller_replicas} controller replicas: at least 1")
        check_room(self.runtime_dir)

    @property
    def underlay(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.underlay_cidr)

    @property
    def central_address(self) -> str:
        return str(self.underlay[1])

    def node_names(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.nodes + 1)]

    def runs_controllers(self, index: int) -> bool:
        """Whether node `index` (1..) runs a replica of each cluster-wide controller."""
        return 1 <= index <= self.controller_replicas

    def node_address(self, index: int) -> str:
        """Underlay address of node `index` (1..)."""
        return str(self.underlay[10 + index])
