"""The cluster's Prometheus: Debian's server in the machine's namespace, scraping every daemon's /metrics
where it listens, with the suite's alert rules loaded.

- `ClusterPrometheus`, a component of the control part (started after the API double, stopped with the
  control part by PID): the netns proxy (nodeenv/prometheus/netns_proxy.py) and Prometheus, with two
  file_sd scrape jobs: `local` for daemons of this namespace (the IAM webhook's health port), `netns`
  for daemons on a node's or the underlay's loopback, through the proxy (`proxy_url`). The `job` label
  of each target is its component's (prismnet-agent, lightningstor-csi, ...; the names
  daemonsets/monitoring/rules.yml uses), `node` its node. Rules: daemonsets/monitoring/rules.yml.
- `write_targets(cluster)`: the targets and the proxy's routes from every part's env file, called each
  time the cluster files are written (up, join, remove): Prometheus re-reads them within 5 s.
The scrape and rule evaluation interval is ClusterSettings.scrape_interval (K8SHOST_SCRAPE_INTERVAL).
"""

from __future__ import annotations

import logging
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from nodeenv.daemons import start_foreground, wait_for
from nodeenv.node import Node, read_env_file
from nodeenv.prometheus import (
    PrometheusConfig,
    PrometheusServer,
    PrometheusSettings,
    ScrapeConfig,
    write_file_sd,
)
from nodeenv.prometheus.netns_proxy import write_routes

if TYPE_CHECKING:
    from nodeenv.cluster.cluster import Cluster

log = logging.getLogger(__name__)

RULES = Path(__file__).resolve().parents[2] / "daemonsets" / "monitoring" / "rules.yml"
JOBS = {
    "PRISMNET_METRICS": "prismnet-agent",
    "CSI_METRICS_URL": "lightningstor-csi",
    "FLASHDNS_METRICS": "flashdns-controller",
    "FIBERLB_METRICS": "fiberlb-controller",
    "NETPOL_METRICS": "netpol-controller",
    "NODE_CONTROLLER_METRICS": "node-controller",
    "PROJECTS_METRICS": "project-controller",
    "OVN_CENTRAL_METRICS": "ovn-central-exporter",
}
"""node.env keys naming a /metrics URL -> the component's job label."""
LOCAL_JOBS = {"WEBHOOK_HEALTH_URL": "iam-webhook"}
"""The control part's daemons (this namespace): key -> job; the URL is the base of /metrics."""
CENTRAL = "central"
"""The route name of the underlay namespace (OVN central's)."""


def prometheus_dir(control: Node) -> Path:
    return control.run_dir / "prometheus"


def _port(url: str) -> int | None:
    u = urllib.parse.urlsplit(url)
    return u.port if u.hostname == "127.0.0.1" else None


def _groups(route: str, env: Mapping[str, str], node: str) -> list[tuple[list[str], dict[str, str]]]:
    out = []
    for key, job in JOBS.items():
        if key in env and (port := _port(env[key])) is not None:
            out.append(([f"{route}:{port}"], {"job": job, **({"node": node} if node else {})}))
    return out


def write_targets(cluster: Cluster) -> None:
    """Targets and proxy routes from the env files of every part that is up."""
    pdir = prometheus_dir(cluster.control)
    if not pdir.exists():
        return
    control = read_env_file(cluster.control.env_file) if cluster.control.env_file.exists() else {}
    local = [([f"127.0.0.1:{p}"], {"job": job}) for key, job in LOCAL_JOBS.items()
             if key in control and (p := _port(control[key])) is not None]  # fmt: skip
    routes = {CENTRAL: cluster.underlay.netns}
    netns = _groups(CENTRAL, _env(cluster.central), "")
    for n in cluster.nodes:
        routes[n.name] = n.netns
        netns += _groups(n.name, _env(n.node), n.name)
    write_routes(pdir / "routes.json", routes)
    write_file_sd(pdir / "local.yml", local)
    write_file_sd(pdir / "netns.yml", netns)


def _env(node: Node) -> dict[str, str]:
    return read_env_file(node.env_file) if node.env_file.exists() else dict(node.endpoints)


class ClusterPrometheus:
    """Component of the control part: the netns proxy, then Prometheus (targets come later)."""

    name = "prometheus"

    def __init__(self, interval: str = "15s", rules: Path = RULES) -> None:
        self.interval, self.rules = interval, rules

    def start(self, node: Node) -> dict[str, str]:
        pdir = prometheus_dir(node)
        pdir.mkdir(parents=True, exist_ok=True)
        write_routes(pdir / "routes.json", {})
        for name in ("local.yml", "netns.yml"):
            write_file_sd(pdir / name, [])
        port_file = pdir / "proxy.port"
        argv = [sys.executable, "-m", "nodeenv.prometheus.netns_proxy", "--routes-file",
                str(pdir / "routes.json"), "--port-file", str(port_file)]  # fmt: skip
        _, proc = start_foreground(
            "netns-proxy", argv, pdir / "netns-proxy.log", node.process_env(), node.daemons
        )
        wait_for(port_file.exists, "netns proxy port file", proc=proc)
        proxy = f"http://127.0.0.1:{port_file.read_text().strip()}"
        config = PrometheusConfig(
            scrape_interval=self.interval,
            evaluation_interval=self.interval,
            rule_files=[self.rules],
            scrape_configs=[
                ScrapeConfig(job="local", file_sd=[pdir / "local.yml"]),
                ScrapeConfig(job="netns", file_sd=[pdir / "netns.yml"], proxy_url=proxy),
            ],
        )
        url = PrometheusServer(PrometheusSettings(run_dir=pdir), config, node.daemons).start()
        return {"PROMETHEUS_URL": url, "PROMETHEUS_NETNS_PROXY": proxy, "PROMETHEUS_DIR": str(pdir)}

    def cleanup(self, node: Node) -> None:
        """Everything is in the run dir; the daemons are stopped by PID."""
