"""netpol-controller in the node environment: against the API double (KUBECONFIG from the kubeapi
component) and the node's OVN northbound database, with leader election on, as in the Deployment.

node.env gains NETPOL_METRICS (the /metrics URL; /healthz and /readyz beside it).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from nodeenv.daemons import free_port, http_ready, http_ready_in, start_foreground, wait_for
from nodeenv.node import Node
from nodeenv.ovn_pki import tls_env


def start_controller(node: Node, program: str, module: str, flags: Sequence[str]) -> str:
    """Start `python -m module` with the common controller flags; its base URL once /readyz answers."""
    return launch_controller(node, program, module, flags).ready()


@dataclass(frozen=True, slots=True)
class Launched:
    """A controller started and not yet known ready: `ready()` waits for its /readyz."""

    program: str
    base: str
    """http://127.0.0.1:<port>, /metrics, /healthz and /readyz under it"""
    netns: str
    proc: subprocess.Popen[bytes]

    def ready(self, timeout: float = 30) -> str:
        url = f"{self.base}/readyz"
        check = (lambda: http_ready_in(self.netns, url)) if self.netns else lambda: http_ready(url)
        wait_for(check, f"{self.program} /readyz", timeout=timeout, proc=self.proc)
        return self.base


def launch_controller(node: Node, program: str, module: str, flags: Sequence[str]) -> Launched:
    """Start `python -m module` with the common controller flags, without waiting for it.

    On a cluster node (`NodeSettings.netns`) it is one replica of the cluster's controller, a
    host-network pod of that node: started in the node's namespace (in its daemon table, so it dies
    with the node), its /metrics on the node's own loopback, and POD_NAME/POD_NAMESPACE set as the
    downward API sets them (`<program>-<node>`, kube-system), so its Lease identity names it."""
    kubeconfig = node.endpoints.get("KUBECONFIG")
    if not kubeconfig:
        raise RuntimeError(f"{program} needs the API double first (the kubeapi component writes KUBECONFIG)")
    port, netns = free_port(), node.settings.netns
    argv = [sys.executable, "-m", module, "--kubeconfig", kubeconfig, "--leader-elect=true",
            "--leader-elect-lease-namespace=kube-system", f"--metrics-address=127.0.0.1:{port}",
            *flags]  # fmt: skip
    env = {k: v for k, v in node.process_env().items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    env |= tls_env(node.endpoints, program, node.settings.system_id)  # its own OVN certificate
    if netns:
        env |= {"POD_NAME": f"{program}-{node.settings.system_id}", "POD_NAMESPACE": "kube-system"}
    _, proc = start_foreground(program, argv, node.path(program, f"{program}.log"), env, node.daemons, netns)
    return Launched(program, f"http://127.0.0.1:{port}", netns, proc)


class NetpolComponent:
    name = "netpol-controller"

    def start(self, node: Node) -> dict[str, str]:
        flags = ["--ovn-nb-db", node.endpoints["OVN_NB_DB"]]
        base = start_controller(node, self.name, "controllers.netpol.main", flags)
        return {"NETPOL_METRICS": f"{base}/metrics"}

    def cleanup(self, node: Node) -> None:
        """The daemon is stopped by PID; its OVN rows go with the node's databases."""
