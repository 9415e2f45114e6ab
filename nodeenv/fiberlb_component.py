"""fiberlb-controller in the node environment: started against the Kubernetes API double (the
kubeapi component's KUBECONFIG) with the `ovn` backend on this node's NB database, `--default-class`
as on k3s, and an external IP pool from TEST-NET-2 (never a real network). The node gets routes to
the pool and the service CIDR through the CNI's management port, so `curl <external IP>` works
from the node.

node.env gains EXTERNAL_IP_POOL and FIBERLB_METRICS.
"""

from __future__ import annotations

import json
import sys

from nodeenv.cni_component import CniComponent
from nodeenv.daemons import free_port, http_ready, start_foreground, wait_for
from nodeenv.fiberlb_routes import delete_host_routes, ensure_host_routes, pool_prefixes
from nodeenv.node import Node

DEFAULT_POOL = "198.51.100.0/24"
DEFAULT_SERVICE_CIDR = "10.96.0.0/16"


class FiberlbComponent:
    name = "fiberlb-controller"

    def __init__(self, pool: str = DEFAULT_POOL) -> None:
        self.pool = pool

    def start(self, node: Node) -> dict[str, str]:
        e = node.endpoints
        if "KUBECONFIG" not in e:
            raise RuntimeError(
                "fiberlb-controller needs the Kubernetes API double (KUBECONFIG) started first"
            )
        port = free_port()
        argv = [sys.executable, "-m", "controllers.fiberlb.main", "--kubeconfig", e["KUBECONFIG"],
                "--backend", "ovn", "--ovn-nb-db", e["OVN_NB_DB"], "--external-ip-pool", self.pool,
                "--default-class", "--leader-elect=false",
                "--metrics-address", f"127.0.0.1:{port}"]  # fmt: skip
        log = node.path("fiberlb", "controller.log")
        _, proc = start_foreground("fiberlb-controller", argv, log, node.process_env(), node.daemons)
        wait_for(
            lambda: http_ready(f"http://127.0.0.1:{port}/readyz"),
            "fiberlb-controller /readyz",
            timeout=30,
            proc=proc,
        )
        routes = [*pool_prefixes(self.pool), e.get("KUBE_SERVICE_CIDR", DEFAULT_SERVICE_CIDR)]
        mgmt = CniComponent().settings(node).management_if
        added = ensure_host_routes(routes, mgmt)
        node.path("fiberlb", "routes.json").write_text(json.dumps({"interface": mgmt, "routes": added}))
        return {"EXTERNAL_IP_POOL": self.pool, "FIBERLB_METRICS": f"http://127.0.0.1:{port}/metrics"}

    def cleanup(self, node: Node) -> None:
        """The host routes (they would go with the management port anyway); the daemon is stopped by PID."""
        record = node.run_dir / "fiberlb" / "routes.json"
        if record.exists():
            data = json.loads(record.read_text())
            delete_host_routes(data["routes"], data["interface"])
