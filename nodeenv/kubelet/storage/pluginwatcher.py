"""kubelet's plugin watcher and CSI plugin manager for the runner's node: every socket in
`<kubelet dir>/plugins_registry` is asked GetInfo and told NotifyRegistrationStatus
(nodeenv/csi_registrar.kubelet_register, the protocol node-driver-registrar serves); a registered CSI
driver is asked NodeGetInfo and written into the node's CSINode (`drivers[]`: name, nodeID,
topologyKeys, allocatable.count), the Node's `csi.volume.kubernetes.io/nodeid` annotation and its
topology labels, as kubelet writes them. A socket that goes away deregisters its driver."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from nodeenv.csi_registrar import kubelet_register
from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.volumes import NodeRoot
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CSINODES = "/apis/storage.k8s.io/v1/csinodes"
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Driver:
    name: str
    endpoint: Path
    """The driver's socket on this machine."""
    node_id: str
    topology: dict[str, str]
    socket: tuple[str, int]
    """The registration socket and its inode (a re-created socket is registered again)."""
    max_volumes: int = 0


class PluginWatcher:
    def __init__(self, client: KubeClient, node: str, root: NodeRoot, kubelet_dir: Path) -> None:
        self.client, self.node, self.root = client, node, root
        self.registry = kubelet_dir / "plugins_registry"
        self.drivers: dict[str, Driver] = {}

    def endpoint(self, driver: str) -> Path | None:
        d = self.drivers.get(driver)
        return d.endpoint if d else None

    def sync(self) -> None:
        seen: dict[str, int] = {}
        for sock in sorted(self.registry.glob("*.sock")) if self.registry.is_dir() else []:
            if sock.is_socket():
                seen[str(sock)] = sock.stat().st_ino
        for name, d in list(self.drivers.items()):
            if seen.get(d.socket[0]) != d.socket[1]:
                log.info("plugin %s deregistered (%s gone)", name, d.socket[0])
                del self.drivers[name]
                self.write_csinode()
        known = {d.socket for d in self.drivers.values()}
        for path, ino in seen.items():
            if (path, ino) not in known:
                self.register(Path(path), ino)

    def register(self, sock: Path, ino: int) -> None:
        try:
            info = kubelet_register(sock, lambda p: self.root.host(p))
            if info is None:
                return
            endpoint = self.root.host(info.endpoint)
            with grpc.insecure_channel(f"unix://{endpoint}") as ch:
                got = csi_pb2_grpc.NodeStub(ch).NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=5)
        except grpc.RpcError as e:
            log.info("plugin at %s not registered yet: %s", sock, e.details())
            return
        topology = dict(got.accessible_topology.segments) if got.HasField("accessible_topology") else {}
        driver = Driver(
            info.name, endpoint, got.node_id, topology, (str(sock), ino), int(got.max_volumes_per_node)
        )
        self.drivers[info.name] = driver
        self.label_node(driver)
        self.write_csinode()
        log.info("registered CSI driver %s (node id %s, topology %s)", info.name, got.node_id, topology)

    def label_node(self, d: Driver) -> None:
        node = self.client.request("GET", f"/api/v1/nodes/{self.node}")
        ids = json.loads(
            (node["metadata"].get("annotations") or {}).get("csi.volume.kubernetes.io/nodeid", "{}")
        )
        ids[d.name] = d.node_id
        meta = {"labels": d.topology, "annotations": {"csi.volume.kubernetes.io/nodeid": json.dumps(ids)}}
        self.client.request("PATCH", f"/api/v1/nodes/{self.node}", {"metadata": meta}, MERGE)

    def write_csinode(self) -> None:
        try:
            cn = self.client.request("GET", f"{CSINODES}/{self.node}")
        except ApiError as e:
            if e.code != 404:
                raise
            node = self.client.request("GET", f"/api/v1/nodes/{self.node}")
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node["metadata"]["uid"]}
            cn = {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": self.node, "ownerReferences": [owner]},
                "spec": {"drivers": []},
            }
            cn = self.client.request("POST", CSINODES, cn)
        drivers = []
        for name, d in sorted(self.drivers.items()):
            entry: Obj = {"name": name, "nodeID": d.node_id, "topologyKeys": sorted(d.topology) or None}
            if d.max_volumes:
                entry["allocatable"] = {"count": d.max_volumes}
            drivers.append(entry)
        cn["spec"]["drivers"] = drivers
        self.client.request("PUT", f"{CSINODES}/{self.node}", cn)
