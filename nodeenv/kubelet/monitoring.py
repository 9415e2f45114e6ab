"""The booted cluster's Prometheus (`make boot`; README "Monitoring the booted cluster").

Debian's Prometheus 2.42 is built without `kubernetes_sd_configs` (its parser answers "field
kubernetes_sd_configs not found in type config.ScrapeConfig": Debian leaves out the discoveries
that need client-go). Debian's vmagent (the victoria-metrics package) reads the same scrape
configuration, discovers with it and scrapes, and remote-writes every sample into Debian's
Prometheus, which stores, answers PromQL and evaluates rules. So:

- vmagent: `kubernetes_sd_configs` role pod against the API double, as the `prometheus`
  ServiceAccount (daemonsets/monitoring/prometheus: list/watch pods; its token from the
  TokenRequest API, 0600 in the run dir); it lists /api/v1/pods with the label selector
  app.kubernetes.io/part-of=k8shost and watches from the list's resourceVersion; it keeps every
  container port named `metrics` of a Running pod (the convention: README), labels the samples
  job (the pod's app.kubernetes.io/name), namespace, pod, node, container; `up` per target;
- Prometheus: `--web.enable-remote-write-receiver`, nothing scraped by itself.

Where: on 3+ nodes both run in node1's network namespace, as a hostNetwork Prometheus pod would
run on a node: the other nodes' hostNetwork pods are on the underlay, pods on the pod network are
reached through node1's PrismNET management port (as kubelet's probes reach them; the answer comes
back there, since the source is in the cluster CIDR), the API at its underlay address. On one node
this namespace (the API at --api-address). Both listen on loopback only (nothing a pod can reach):
127.0.0.1:9090 (Prometheus) and :8429 (vmagent) in node1's namespace, free ports on one node;
`<run dir>/monitoring.json` says where. They are daemons of the run dir's table: `down` stops them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.daemons import DaemonError, DaemonTable, free_port, start_foreground
from nodeenv.daemons import wait_for as wait_until
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.promapi import NetnsPrometheusApi
from nodeenv.prometheus import PrometheusApiError, Target

SERVICE_ACCOUNT = ("kube-system", "prometheus")
SCRAPE_INTERVAL = "5s"
METRICS_PORT = "metrics"
"""The container port name that makes a target (README "Monitoring the booted cluster")."""
TOKEN_SECONDS = 7 * 24 * 3600


def scrape_config(
    api_server: str, ca_file: Path, token_file: Path, interval: str = SCRAPE_INTERVAL
) -> dict[str, Any]:
    """The scrape configuration (Prometheus's format): every `metrics` port of our Running pods."""
    relabel = [
        {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": METRICS_PORT,
         "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"], "target_label": "job"},
        *({"source_labels": [f"__meta_kubernetes_{src}"], "target_label": dst} for src, dst in (
            ("namespace", "namespace"), ("pod_name", "pod"), ("pod_node_name", "node"),
            ("pod_container_name", "container"))),
    ]  # fmt: skip
    sd = {"role": "pod", "api_server": api_server, "tls_config": {"ca_file": str(ca_file)},
          "authorization": {"credentials_file": str(token_file)},
          "selectors": [{"role": "pod", "label": "app.kubernetes.io/part-of=k8shost"}]}  # fmt: skip
    job = {"job_name": "k8shost-pods", "kubernetes_sd_configs": [sd], "relabel_configs": relabel}
    return {"global": {"scrape_interval": interval, "scrape_timeout": interval}, "scrape_configs": [job]}


def write_token(client: KubeClient, path: Path) -> None:
    """A token of the `prometheus` ServiceAccount (TokenRequest, as `kubectl create token`), 0600."""
    ns, name = SERVICE_ACCOUNT
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS}}  # fmt: skip
    token = client.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", body)
    path.touch(mode=0o600)
    path.chmod(0o600)  # whatever the umask
    path.write_text(token["status"]["token"])


def start(run_dir: Path, table: DaemonTable, client: KubeClient, api_server: str, ca_file: Path,
          netns: str = "") -> NetnsPrometheusApi:  # fmt: skip
    """Prometheus and vmagent in `netns` ("" = this one), discovering through `api_server`; once
    Prometheus answers, `<run_dir>/monitoring.json` says where they are."""
    for tool in ("prometheus", "vmagent"):
        if shutil.which(tool) is None:
            raise FileNotFoundError(f"{tool} is not installed (run `make setup`)")
    d = run_dir / "monitoring"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_token(client, d / "token")
    (d / "scrape.yml").write_text(yaml.safe_dump(scrape_config(api_server, ca_file, d / "token")))
    (d / "prometheus.yml").write_text(yaml.safe_dump({"global": {"evaluation_interval": SCRAPE_INTERVAL}}))
    ports = (9090, 8429) if netns else (free_port(), free_port())
    prom, agent = (f"http://127.0.0.1:{p}" for p in ports)
    argv = ["prometheus", f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
            f"--web.listen-address=127.0.0.1:{ports[0]}", "--web.enable-remote-write-receiver"]  # fmt: skip
    _, proc = start_foreground("prometheus", argv, run_dir / "prometheus.log", {}, table, netns)
    api = NetnsPrometheusApi(prom, netns)
    wait_until(api.answers, "Prometheus", 30, proc)
    argv = ["vmagent", f"-promscrape.config={d / 'scrape.yml'}", f"-remoteWrite.url={prom}/api/v1/write",
            f"-httpListenAddr=127.0.0.1:{ports[1]}", f"-remoteWrite.tmpDataPath={d / 'vmagent'}",
            "-promscrape.kubernetesSDCheckInterval=5s", "-remoteWrite.flushInterval=1s"]  # fmt: skip
    _, proc = start_foreground("vmagent", argv, run_dir / "vmagent.log", {}, table, netns)
    wait_until(NetnsPrometheusApi(agent, netns).answers, "vmagent", 30, proc)
    (run_dir / "monitoring.json").write_text(
        json.dumps({"netns": netns, "prometheus": prom, "vmagent": agent})
    )
    return api


def await_targets(run_dir: Path, timeout: float) -> str:
    """Once every discovered target is up (or at the timeout): a line saying how many are, and where."""
    info = json.loads((run_dir / "monitoring.json").read_text())
    agent, targets = NetnsPrometheusApi.from_file(run_dir / "monitoring.json", "vmagent"), list[Target]()
    with contextlib.suppress(DaemonError):
        wait_until(lambda: _all_up(agent, targets), "every target up", timeout)
    down = [f"{t.scrape_url} ({t.last_error or t.health})" for t in targets if t.health != "up"]
    where = f"ip netns exec {info['netns']} " if info["netns"] else ""
    line = (
        f"Prometheus: {len(targets) - len(down)}/{len(targets)} targets up; {where}curl {info['prometheus']}"
    )
    return line + (f"\ndown: {', '.join(down)}" if down else "")


def _all_up(agent: NetnsPrometheusApi, seen: list[Target]) -> bool:
    try:
        seen[:] = agent.targets()
    except (PrometheusApiError, OSError, ValueError):
        return False
    return bool(seen) and all(t.health == "up" for t in seen)
