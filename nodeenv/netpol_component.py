"""netpol-controller in the node environment: against the API double (KUBECONFIG from the kubeapi
component) and the node's OVN northbound database, with leader election on, as in the Deployment.

node.env gains NETPOL_METRICS (the /metrics URL; /healthz and /readyz beside it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from nodeenv.daemons import free_port, http_ready, start_foreground, wait_for
from nodeenv.node import Node


def start_controller(node: Node, program: str, module: str, flags: Sequence[str]) -> str:
    """Start `python -m module` with the common controller flags; its base URL once /readyz answers."""
    kubeconfig = node.endpoints.get("KUBECONFIG")
    if not kubeconfig:
        raise RuntimeError(f"{program} needs the API double first (the kubeapi component writes KUBECONFIG)")
    port = free_port()
    argv = [sys.executable, "-m", module, "--kubeconfig", kubeconfig, "--leader-elect=true",
            "--leader-elect-lease-namespace=kube-system", f"--metrics-address=127.0.0.1:{port}",
            *flags]  # fmt: skip
    env = {k: v for k, v in node.process_env().items() if k not in ("POD_NAME", "POD_NAMESPACE")}
    _, proc = start_foreground(program, argv, node.path(program, f"{program}.log"), env, node.daemons)
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ready(f"{base}/readyz"), f"{program} /readyz", timeout=30, proc=proc)
    return base


class NetpolComponent:
    name = "netpol-controller"

    def start(self, node: Node) -> dict[str, str]:
        flags = ["--ovn-nb-db", node.endpoints["OVN_NB_DB"]]
        base = start_controller(node, self.name, "controllers.netpol.main", flags)
        return {"NETPOL_METRICS": f"{base}/metrics"}

    def cleanup(self, node: Node) -> None:
        """The daemon is stopped by PID; its OVN rows go with the node's databases."""
