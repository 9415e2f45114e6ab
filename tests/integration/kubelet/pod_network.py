"""What the runner's pod-network boot tests share on the session's OVN node with PrismNET installed
(the `agent` fixture): the API double served on the node's management-port address, which pods
reach over PrismNET (standing in for kube-proxy's `kubernetes` Service), and the overlay cut down to
the workloads a test boots."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig
from tests.cni_agent_fixture import Agent
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet.conftest import NS
from tests.kubeapi_fixture import KubeApiHandle


def management_ip(agent: Agent) -> str:
    """The node's management-port address: pods reach the node there."""
    dev = agent.component.settings(agent.node).management_if
    out = subprocess.run(["ip", "-4", "-j", "addr", "show", "dev", dev], capture_output=True, text=True)
    addr = json.loads(out.stdout or "[]")
    assert addr and addr[0]["addr_info"], f"management port {dev} has no address: {out.stderr}"
    host: str = addr[0]["addr_info"][0]["local"]
    return host


@contextlib.contextmanager
def api_on_management_port(agent: Agent, tmp_path: Path, config: ApiConfig) -> Iterator[KubeApiHandle]:
    """The API double on the management port's address (pods reach it; its certificate names it)."""
    host = management_ip(agent)
    threaded = ThreadedKubeApi(tmp_path / "kubeapi", config, host=host, server_names=("localhost", host))
    threaded.start()
    try:
        yield KubeApiHandle(threaded)
    finally:
        threaded.stop()


def keep_only(api: KubeApiHandle, keep: Iterable[str], replicas: int = 1) -> None:
    """Delete every workload of the applied overlay but `keep` (`deployment.apps/<name>`, ...); the
    kept Deployments get `replicas` (one node: a second host-port or anti-affine replica would stay
    Pending)."""
    keep = set(keep)
    for kind in ("daemonset", "deployment", "statefulset"):
        names = kubectl(api, "-n", NS, "get", kind, "-o", "name").split()
        drop = [n for n in names if n not in keep]
        if drop:
            kubectl(api, "-n", NS, "delete", *drop)
    for w in sorted(k for k in keep if k.startswith("deployment.apps/")):
        patch = json.dumps({"spec": {"replicas": replicas}})
        kubectl(api, "-n", NS, "patch", w.replace(".apps", ""), "--type=merge", "-p", patch)
