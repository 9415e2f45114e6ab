"""The LightningStor CSI driver in the node environment: `lightningstor-csi --mode all` with the
local backend, its state dir, socket and kubelet-style paths all inside the run dir.

node.env gains CSI_CONTROLLER_ENDPOINT and CSI_NODE_ENDPOINT (the same unix socket: one
process serves Identity, Controller and Node), CSI_NODE_ID, CSI_STATE_DIR, CSI_KUBELET_DIR
(where staging and pod target paths go), CSI_METRICS_URL and CSI_PLUGINS_REGISTRY.

kubelet finds the driver the way it does in a cluster: a registrar (nodeenv/csi_registrar.py,
standing in for node-driver-registrar) serves kubelet's plugin registration API on
`<install_root>/var/lib/kubelet/plugins_registry/stor.plasmacloud.io-reg.sock`, naming the
driver's socket; nothing but that directory is needed to reach the Node service.

On a cluster node (`NodeSettings.netns`) both run in the node's namespace, with node id = node name
and the registration directory under the node's own install root (nodeenv/cluster/control.py).
`CsiComponent(lightningstor_endpoint=...)` runs the driver on the `lightningstor` backend against
that VolumeService instead (the sandbox cluster's: one service for every node, so a volume moves
between nodes); node.env then also names LIGHTNINGSTOR_ENDPOINT.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import grpc

from common.plasmacloud_grpc import PlasmaCloudAuth
from csi.cleanup import release_under
from csi.settings import DRIVER_NAME
from nodeenv.csi_registrar import registration_socket
from nodeenv.daemons import free_port, start_foreground, unix_listening, wait_for
from nodeenv.node import Node
from protos import csi_pb2, csi_pb2_grpc


def _probe_ready(endpoint: str) -> bool:
    with grpc.insecure_channel(endpoint) as channel:
        try:
            reply = csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return bool(reply.ready.value)


class CsiComponent:
    name = "csi"

    def __init__(self, lightningstor_endpoint: str = "", plasmacloud: PlasmaCloudAuth | None = None) -> None:
        self.lightningstor_endpoint, self.plasmacloud = lightningstor_endpoint, plasmacloud
        """The CA and IAM token file the driver's LightningStor calls present (TLS + token)."""

    def start(self, node: Node) -> dict[str, str]:
        cdir = node.path("csi", "state", "x").parent.parent
        endpoint = f"unix://{cdir / 'csi.sock'}"
        port = free_port()
        argv = [
            sys.executable, "-m", "csi.main",
            "--mode", "all",
            "--endpoint", endpoint,
            "--node-id", node.settings.system_id,
            *self._backend(),
            "--state-dir", str(cdir / "state"),
            "--metrics-address", f"127.0.0.1:{port}",
            # xfs where this machine cannot grow ext4 online (no CAP_SYS_RESOURCE), else ext4
            "--default-fs-type", "auto",
        ]  # fmt: skip
        env = {k: v for k, v in node.process_env().items() if not k.startswith("CSI_")}
        netns = node.settings.netns  # a cluster node's: its /metrics on that namespace's loopback
        # its mounts are the machine's (kubelet's and the pods' view), as the DaemonSet's Bidirectional
        # mount propagation makes them: the node's network namespace only, not a mount namespace
        _, proc = start_foreground("lightningstor-csi", argv, cdir / "csi.log", env, node.daemons, netns,
                                   host_mounts=True)  # fmt: skip
        wait_for(lambda: _probe_ready(endpoint), "lightningstor-csi Probe ready", proc=proc)
        (cdir / "kubelet").mkdir(exist_ok=True)
        registry = self._register(node, endpoint)
        backend = (
            {"LIGHTNINGSTOR_ENDPOINT": self.lightningstor_endpoint} if self.lightningstor_endpoint else {}
        )
        return {
            **backend,
            "CSI_CONTROLLER_ENDPOINT": endpoint,
            "CSI_NODE_ENDPOINT": endpoint,
            "CSI_NODE_ID": node.settings.system_id,
            "CSI_STATE_DIR": str(cdir / "state"),
            "CSI_KUBELET_DIR": str(cdir / "kubelet"),
            "CSI_METRICS_URL": f"http://127.0.0.1:{port}/metrics",
            "CSI_PLUGINS_REGISTRY": str(registry),
        }

    def _backend(self) -> list[str]:
        if self.lightningstor_endpoint:
            auth = self.plasmacloud
            creds = (
                ["--plasmacloud-ca", str(auth.ca), "--plasmacloud-token-file", str(auth.token_file)]
                if auth
                else []
            )
            return [
                "--backend",
                "lightningstor",
                "--lightningstor-endpoint",
                self.lightningstor_endpoint,
                *creds,
            ]
        return ["--backend", "local"]

    def _register(self, node: Node, endpoint: str) -> Path:
        """Start the registrar; the registry directories it makes are recorded for cleanup."""
        registry = node.settings.install_root / "var" / "lib" / "kubelet" / "plugins_registry"
        created, parent = [], registry
        while not parent.exists():
            created.append(str(parent))
            parent = parent.parent
        node.path("csi", "installed.json").write_text(json.dumps(created))  # deepest first
        argv = [sys.executable, "-m", "nodeenv.csi_registrar", "--csi-address", endpoint,
                "--kubelet-registration-path", endpoint.removeprefix("unix://"),
                "--registration-dir", str(registry)]  # fmt: skip
        log = node.path("csi", "registrar.log")
        netns = node.settings.netns
        _, proc = start_foreground("csi-registrar", argv, log, node.process_env(), node.daemons, netns)
        sock = registration_socket(registry, DRIVER_NAME)
        wait_for(lambda: unix_listening(sock), "csi-registrar's registration socket", proc=proc)
        return registry

    def cleanup(self, node: Node) -> None:
        """After the driver stopped: unmount what is mounted under the run dir and detach the
        loop devices backed by files in it (only those), so removing the run dir leaks nothing."""
        if node.run_dir.exists():
            release_under(node.run_dir)
        registry = node.settings.install_root / "var" / "lib" / "kubelet" / "plugins_registry"
        registration_socket(registry, DRIVER_NAME).unlink(missing_ok=True)  # a killed registrar's
        installed = node.run_dir / "csi" / "installed.json"
        for path in map(Path, json.loads(installed.read_text()) if installed.exists() else []):
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
