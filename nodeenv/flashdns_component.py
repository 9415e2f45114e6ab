"""flashdns-controller in the node environment: the cluster DNS on the spec's Service IP 10.96.0.10.

Why that address: kubelet points every pod at the cluster DNS Service IP, and here it can be the
real one. The component adds 10.96.0.10/32 to the node's loopback device (label `lo:k8sdns`) and
the embedded server listens on it, port 53, UDP and TCP. The node reaches it locally; a pod's packet
to it leaves the cluster CIDR, so the cluster router sends it to the pod's node through the CNI's
management port (per-node egress) and the node's kernel delivers it locally; the reply goes back
over the management port's route to the cluster CIDR. No OVN load balancer and no NAT are
involved, and the address is the same one pods get in a real cluster. (The node's own address on
the pod network would work as well, but the CNI agent must know the DNS address before it creates
that port, and pods would see a per-node address instead of the cluster's.)

The CNI component is told the same address and domain (`--dns-servers`, `--cluster-domain`) so the
CNI result's `dns` block points pods at it with the cluster search path and ndots:5.

On a cluster node (`NodeSettings.netns`) the same holds inside the node's namespace: the address on
that namespace's loopback, the server started there against the API double's listener on the
underlay (the node's KUBECONFIG), so every node answers its own pods: the node-local DNS listener
(the embedded backend keeps the whole zone in every replica; there is nothing to elect). Its
readiness is the port file (written once the caches synced and the zone was built); /metrics is on
the node's own loopback.
node.env gains CLUSTER_DNS (address:port), CLUSTER_DNS_IP, CLUSTER_DOMAIN and FLASHDNS_METRICS.
"""

from __future__ import annotations

import json
import subprocess
import sys

from nodeenv.daemons import free_port, http_ready, run_checked, start_foreground, wait_for
from nodeenv.node import Node

CLUSTER_DNS_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
LABEL = "lo:k8sdns"


class FlashDnsComponent:
    name = "flashdns-controller"

    def __init__(
        self, address: str = CLUSTER_DNS_IP, domain: str = CLUSTER_DOMAIN, upstreams: str = ""
    ) -> None:
        """`upstreams`: for names outside the domain ('' = this machine's resolv.conf, 'none')."""
        self.address, self.domain, self.upstreams = address, domain, upstreams

    def start(self, node: Node) -> dict[str, str]:
        e = node.endpoints
        if "KUBECONFIG" not in e:
            raise RuntimeError(
                "flashdns-controller needs the Kubernetes API double (KUBECONFIG) started first"
            )
        self._ensure_address(node)
        port = free_port()
        port_file = node.path("flashdns", "dns-port.json")
        port_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "controllers.flashdns.main", "--kubeconfig", e["KUBECONFIG"],
                "--leader-elect=false", "--metrics-address", f"127.0.0.1:{port}",
                "--dns-address", f"{self.address}:53", "--dns-port-file", str(port_file),
                "--cluster-dns-ip", self.address, "--cluster-domain", self.domain,
                "--upstreams", self.upstreams]  # fmt: skip
        log = node.path("flashdns", "controller.log")
        netns = node.settings.netns
        _, proc = start_foreground("flashdns-controller", argv, log, node.process_env(), node.daemons, netns)
        wait_for(port_file.exists, "flashdns-controller to answer DNS", timeout=30, proc=proc)
        if not netns:  # a node's loopback is not this namespace's: the port file is its readiness
            wait_for(
                lambda: http_ready(f"http://127.0.0.1:{port}/readyz"),
                "flashdns-controller /readyz",
                timeout=30,
                proc=proc,
            )
        return {
            "CLUSTER_DNS": f"{self.address}:53",
            "CLUSTER_DNS_IP": self.address,
            "CLUSTER_DOMAIN": self.domain,
            "FLASHDNS_METRICS": f"http://127.0.0.1:{port}/metrics",
        }

    def _ensure_address(self, node: Node) -> None:
        """The DNS address on the loopback device (labelled); recorded only when we added it (a
        node namespace's goes with the namespace)."""
        ip = ["ip", "-n", node.settings.netns] if node.settings.netns else ["ip"]
        shown = run_checked([*ip, "-4", "-o", "addr", "show", "dev", "lo"])
        if f" {self.address}/32 " not in shown:
            run_checked([*ip, "addr", "add", f"{self.address}/32", "dev", "lo", "label", LABEL])
            if not node.settings.netns:
                node.path("flashdns", "address.json").write_text(json.dumps({"address": self.address}))

    def cleanup(self, node: Node) -> None:
        """Remove the address if we added it; the daemon is stopped by PID."""
        record = node.run_dir / "flashdns" / "address.json"
        if record.exists():
            address = json.loads(record.read_text())["address"]
            subprocess.run(
                ["ip", "addr", "del", f"{address}/32", "dev", "lo"], capture_output=True, check=False
            )
