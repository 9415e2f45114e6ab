"""Prometheus's pod discovery as another real client of the API double, with RBAC enforced: the boot's
monitoring (nodeenv/kubelet/monitoring.py: Debian's vmagent with `kubernetes_sd_configs` role pod,
remote-writing into Debian's Prometheus) against a double that holds daemonsets/monitoring/prometheus,
as the `prometheus` ServiceAccount's token. A metrics server on loopback stands for a pod's
`metrics` port (the pod's status says podIP 127.0.0.1), so discovery, scrape and query are shown
end to end in seconds, without a boot; tests/integration/kubelet/test_boot_monitoring.py does it on
the booted cluster.

- what the client sends: a LIST of /api/v1/pods with the label selector, then a WATCH from the
  list's resourceVersion, every request within the ServiceAccount's ClusterRole;
- a Running pod's `metrics` port becomes a target, up, its samples in Prometheus labelled job,
  namespace, pod, node, container; a port of another name, or a pod not Running, is no target;
- a pod created later is a target within seconds (the watch, not a relist) and goes when deleted;
- the token is 0600, both servers listen on loopback only.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs
from prometheus_client import CollectorRegistry, Counter, start_http_server

from nodeenv.daemons import DaemonTable
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet import monitoring
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.promapi import NetnsPrometheusApi as PromApi
from nodeenv.prometheus import Target
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet.conftest import wait_for
from tests.kubeapi_fixture import KubeApiHandle

ROOT = Path(__file__).resolve().parents[3]
RBAC = ROOT / "daemonsets" / "monitoring" / "prometheus"
SA = "system:serviceaccount:kube-system:prometheus"


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(enforce_rbac=True, bookmark_interval=1.0)


@pytest.fixture
def metrics_port() -> Iterator[int]:
    """A pod's /metrics: a counter `demo_scrapes_total` on a free loopback port."""
    registry = CollectorRegistry()
    Counter("demo_scrapes", "a counter to scrape", registry=registry).inc(3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield port
    server.shutdown()


@pytest.fixture
def prometheus(kube_api: KubeApiHandle, tmp_path: Path) -> Iterator[tuple[PromApi, PromApi, Path]]:
    for tool in ("prometheus", "vmagent"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            pytest.fail(f"{tool} is not installed: make setup")
    kubectl(kube_api, "apply", "-k", str(RBAC))
    table = DaemonTable(tmp_path / "daemons.json")
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    try:
        prom = monitoring.start(tmp_path, table, client, kube_api.url, kube_api.ca)
        yield prom, PromApi.from_file(tmp_path / "monitoring.json", "vmagent"), tmp_path
    finally:
        table.stop_all(timeout=10)


def running_pod(client: KubeClient, name: str, port: int, port_name: str = "metrics") -> None:
    """A pod of ours on node-1 whose status (as its kubelet writes it) says Running at 127.0.0.1."""
    labels = {"app.kubernetes.io/name": "demo", "app.kubernetes.io/part-of": "k8shost"}
    ports = [{"name": port_name, "containerPort": port}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "demo", "image": "demo", "ports": ports}]},
    }
    client.create("/api/v1", "pods", "default", pod)
    status = {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "hostIP": "127.0.0.1",
    }
    client.patch_status("/api/v1", "pods", "default", name, status)


def targets_of(agent: PromApi, pod: str) -> list[Target]:
    return [t for t in agent.targets() if t.labels.get("pod") == pod]


def test_discovers_scrapes_and_stores_a_pods_metrics_port(
    kube_api: KubeApiHandle, prometheus: tuple[PromApi, PromApi, Path], metrics_port: int
) -> None:
    prom, agent, _ = prometheus
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    running_pod(client, "demo-0", metrics_port)
    running_pod(client, "other-port", metrics_port, port_name="http")
    client.create("/api/v1", "pods", "default", {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "pending", "labels": {"app.kubernetes.io/part-of": "k8shost"}},
                  "spec": {"containers": [{"name": "c", "image": "i", "ports": [
                      {"name": "metrics", "containerPort": metrics_port}]}]}})  # fmt: skip
    up = wait_for(lambda: [t for t in targets_of(agent, "demo-0") if t.health == "up"], 30, "demo-0 up")
    assert up[0].scrape_url == f"http://127.0.0.1:{metrics_port}/metrics"
    assert {t.labels["pod"] for t in agent.targets()} == {"demo-0"}  # not the other port, not Pending
    sample = wait_for(lambda: prom.query("demo_scrapes_total"), 20, "the sample in Prometheus")[0]
    labels = sample.labels
    assert (labels["job"], labels["namespace"], labels["pod"], labels["node"], labels["container"]) == (
        "demo",
        "default",
        "demo-0",
        "node-1",
        "demo",
    )
    assert sample.value == 3
    assert prom.value('up{pod="demo-0"}') == 1

    mine = kube_api.requests_by(SA)
    lists = [r for r in mine if r.verb == "list" and r.resource == "pods"]
    watches = [r for r in mine if r.verb == "watch" and r.resource == "pods"]
    assert lists and watches, [(r.verb, r.path, r.query) for r in mine]
    queries = [urllib.parse.parse_qs(r.query) for r in lists + watches]
    assert all(q["labelSelector"] == ["app.kubernetes.io/part-of=k8shost"] for q in queries), queries
    watch = urllib.parse.parse_qs(watches[0].query)  # from the list's resourceVersion, with bookmarks
    assert watch["watch"] == ["1"] and watch["allowWatchBookmarks"] == ["true"] and watch["resourceVersion"]
    print("what the client sent:", [(r.verb, r.path, r.query) for r in lists + watches])
    rules = yaml.safe_load_all((RBAC / "rbac.yaml").read_text())
    role = next(d for d in rules if d["kind"] == "ClusterRole")
    assert kube_api.not_allowed_by(SA, role["rules"]) == []
    assert all(r.status < 400 for r in mine), [(r.verb, r.path, r.status) for r in mine if r.status >= 400]


def test_a_new_pod_is_a_target_within_seconds_and_goes_when_deleted(
    kube_api: KubeApiHandle, prometheus: tuple[PromApi, PromApi, Path], metrics_port: int
) -> None:
    _, agent, _ = prometheus
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    wait_for(lambda: kube_api.requests_by(SA), 20, "the first list")
    time.sleep(2)
    listed = len([r for r in kube_api.requests_by(SA) if r.verb == "list"])
    started = time.monotonic()
    running_pod(client, "late", metrics_port)
    wait_for(lambda: targets_of(agent, "late"), 15, "the new pod as a target")
    took = time.monotonic() - started
    assert len([r for r in kube_api.requests_by(SA) if r.verb == "list"]) == listed, "relisted, not watched"
    client.delete("/api/v1", "pods", "default", "late")
    wait_for(lambda: not targets_of(agent, "late"), 15, "the deleted pod's target to go")
    print(f"new pod -> target in {took:.1f} s")


def test_token_private_and_servers_on_loopback_only(prometheus: tuple[PromApi, PromApi, Path]) -> None:
    prom, agent, run_dir = prometheus
    token = run_dir / "monitoring" / "token"
    assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
    for api in (prom, agent):
        port = int(api.url.rsplit(":", 1)[1])
        listening = subprocess.run(
            ["ss", "-Htln", "sport", "=", f":{port}"], capture_output=True, text=True
        ).stdout
        assert listening.split() and all(
            line.split()[3] == f"127.0.0.1:{port}" for line in listening.splitlines()
        ), listening
