"""A Pod's network sandbox as containerd's CRI plugin makes it for kubelet: a network namespace
(`/run/netns/cni-<pod uid>`), the node's CNI network config (the first `.conflist`/`.conf`/`.json`
in the conf dir, in name order, as libcni picks it) run with CNI_COMMAND=ADD, CNI_CONTAINERID (the
sandbox id), CNI_NETNS, CNI_IFNAME=eth0 and CNI_ARGS naming the pod (K8S_POD_NAMESPACE, K8S_POD_NAME,
K8S_POD_INFRA_CONTAINER_ID, K8S_POD_UID), the containers' hostPorts as the `portMappings`
capability; the pod IP is the result's first address. Teardown: CNI DEL with the ADD's result as
prevResult, then the netns is deleted.

No config in the conf dir: kubelet's NetworkPluginNotReady ("cni plugin not initialized")."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeenv.cni_component import CniRuntime
from nodeenv.kubelet.nodeview import NodeCniRuntime
from nodeenv.kubelet.volumes import NodeRoot

Obj = dict[str, Any]
NOT_READY = (
    "network is not ready: container runtime network not ready: "
    "NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized"
)
CONF_SUFFIXES = (".conflist", ".conf", ".json")


class SandboxError(Exception):
    """Why the sandbox could not be made (kubelet's FailedCreatePodSandBox message)."""


@dataclass(frozen=True, slots=True)
class CniConfig:
    conf_dir: Path
    bin_dirs: tuple[str, ...]
    node_root: Path | None = None
    """Set: conf_dir and bin_dirs are the node's paths (under this root, volumes.NodeRoot), as the
    DaemonSet's installer wrote them, and the plugins run in the node's view (nodeview.py)."""

    def network(self) -> Obj | None:
        """The network config libcni would load (a single-plugin `.conf` wrapped as a list)."""
        conf_dir = NodeRoot(self.node_root).host(str(self.conf_dir)) if self.node_root else self.conf_dir
        files = sorted(p for p in conf_dir.glob("*") if p.suffix in CONF_SUFFIXES and p.is_file())
        for path in files:
            try:
                conf: Obj = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if "plugins" not in conf:
                conf = {"name": conf.get("name"), "cniVersion": conf.get("cniVersion"), "plugins": [conf]}
            if conf["plugins"]:
                return conf
        return None


def port_mappings(pod: Obj) -> list[Obj]:
    """The `portMappings` runtime config containerd sends: every container port with a hostPort."""
    return [
        {"hostPort": p["hostPort"], "containerPort": p["containerPort"],
         "protocol": p.get("protocol", "TCP").lower(), "hostIP": p.get("hostIP", "")}
        for c in pod["spec"]["containers"] for p in c.get("ports") or [] if p.get("hostPort")
    ]  # fmt: skip


@dataclass
class PodSandbox:
    pod: Obj
    config: CniConfig
    ip: str = ""
    result: Obj = field(default_factory=dict)
    network: Obj | None = None

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    @property
    def netns_name(self) -> str:
        return f"cni-{self.uid}"

    @property
    def netns(self) -> str:
        return f"/run/netns/{self.netns_name}"

    @property
    def sandbox_id(self) -> str:
        return hashlib.sha256(f"sandbox:{self.uid}".encode()).hexdigest()

    def cni_args(self) -> str:
        m = self.pod["metadata"]
        return (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={m['namespace']};K8S_POD_NAME={m['name']};"
                f"K8S_POD_INFRA_CONTAINER_ID={self.sandbox_id};K8S_POD_UID={self.uid}")  # fmt: skip

    def _runtime(self) -> CniRuntime:
        assert self.network is not None
        if self.config.node_root is not None:
            return NodeCniRuntime(NodeRoot(self.config.node_root), self.network, list(self.config.bin_dirs))
        return CniRuntime(self.network, list(self.config.bin_dirs), {})

    def create(self) -> str:
        """The netns and the CNI ADD; the pod IP. Raises SandboxError (the netns is then gone)."""
        self.network = self.config.network()
        if self.network is None:
            raise SandboxError(NOT_READY)
        proc = subprocess.run(["ip", "netns", "add", self.netns_name], capture_output=True, text=True)
        if proc.returncode and not Path(self.netns).exists():
            raise SandboxError(f"failed to create network namespace {self.netns_name}: {proc.stderr.strip()}")
        try:
            ports: dict[str, object] = {"portMappings": port_mappings(self.pod)}
            call = self._runtime().add(self.sandbox_id, self.netns, "eth0", self.cni_args(), ports)
        except (OSError, ValueError) as e:
            call = None
            why = str(e)
        if call is None or call.rc:
            if call is not None:
                why = (
                    f"{call.out.get('msg', '')} {call.out.get('details', '')}".strip() or call.stderr.strip()
                )
            self.destroy()
            raise SandboxError(
                f'failed to setup network for sandbox "{self.sandbox_id[:12]}": '
                f'plugin type="{self.network["plugins"][0]["type"]}" failed (add): {why}'
            )
        self.result = call.out
        ips: Any = call.out.get("ips") or []
        if not ips or not isinstance(ips, list) or "address" not in ips[0]:
            self.destroy()
            raise SandboxError(f"CNI result for sandbox {self.sandbox_id[:12]} has no IP: {call.out}")
        self.ip = str(ips[0]["address"]).split("/")[0]
        return self.ip

    def destroy(self) -> str:
        """CNI DEL (if a network was loaded) and the netns deleted; '' or why DEL failed."""
        why = ""
        if self.network is not None:
            try:
                ports: dict[str, object] = {"portMappings": port_mappings(self.pod)}
                call = self._runtime().delete(
                    self.sandbox_id, self.netns, self.result or None, "eth0", self.cni_args(), ports
                )
                why = "" if call.rc == 0 else f"CNI DEL failed: {call.out or call.stderr.strip()}"
            except (OSError, ValueError) as e:
                why = f"CNI DEL failed: {e}"
        subprocess.run(["ip", "netns", "del", self.netns_name], capture_output=True)
        self.ip, self.result = "", {}
        return why


def node_cni(env: Mapping[str, str]) -> CniConfig:
    """The CNI config of a node environment's env file (PRISMNET_CNI_CONFLIST, PRISMNET_CNI_BIN):
    its conf dir, and the plugin dirs (ours, then Debian's reference plugins for portmap)."""
    conf = Path(env["PRISMNET_CNI_CONFLIST"]).parent
    return CniConfig(conf, (str(Path(env["PRISMNET_CNI_BIN"]).parent), "/usr/lib/cni"))
