"""metrics.k8s.io on the API double (nodeenv/kubeapi/metricsapi.py, metricsserver.py): a real kubelet
API (nodeenv/kubelet/kubeletapi/server.py over HTTPS with the kubelet PKI, serving resource metrics
whose CPU grows by half a core-second per second) scraped as metrics-server does, with the double's
kubelet client certificate, at the Node's address and status port, and `kubectl top nodes` /
`kubectl top pods` reading the rate and the working set; discovery lists the group; a Pod without
usage is 404 as metrics-server answers; a node whose kubelet stops answering drops out; a Node that
reports no kubelet endpoint is not scraped."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from nodeenv.kubeapi import metricsserver
from nodeenv.kubeapi.kubeletclient import KubeletClientConfig
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.kubelet.kubeletapi.pki import KubeletPki, make_kubelet_pki
from nodeenv.kubelet.kubeletapi.server import KubeletApiServer, KubeletApiSettings
from nodeenv.kubelet.resourcestats import ContainerUsage, Usage, render
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

MiB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """The runner's side the kubelet API reads: no pods to exec into, usage growing with time."""

    def __init__(self) -> None:
        self.t0 = time.time()

    def find_pod(self, namespace: str, name: str) -> None:
        return None

    def resource_metrics(self) -> bytes:
        cpu = 0.5 * (time.time() - self.t0)
        web = ContainerUsage("default", "web", "c", Usage(cpu, 64 * MiB))
        return render(Usage(4 * cpu, 2048 * MiB), [web])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KubeletPki:
    return make_kubelet_pki(tmp_path_factory.mktemp("kubelet-pki"), [("node1", "127.0.0.1")])


@pytest.fixture
def kube_api_config(pki: KubeletPki, monkeypatch: pytest.MonkeyPatch) -> ApiConfig:
    monkeypatch.setattr(metricsserver, "RESOLUTION", 0.5)  # before the double starts its loop
    return ApiConfig(kubelet=KubeletClientConfig(cert=pki.client_cert, key=pki.client_key, ca=pki.server_ca))


@pytest.fixture
def kubelet(pki: KubeletPki) -> Iterator[KubeletApiServer]:
    cert, key = pki.serving("node1")
    settings = KubeletApiSettings(address="127.0.0.1", port=_free_port(), cert=cert, key=key,
                                  client_ca=pki.client_ca, podman_env={})  # fmt: skip
    server = KubeletApiServer(Node(), settings)
    server.start()
    yield server
    if server.loop.is_running():  # the test may have stopped it
        server.stop()


def _kubectl(api: KubeApiHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_bin(), "--kubeconfig", str(api.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _wait(api: KubeApiHandle, *args: str) -> str:
    deadline = time.monotonic() + 20
    while True:
        proc = _kubectl(api, *args)
        if proc.returncode == 0 or time.monotonic() > deadline:
            assert proc.returncode == 0, proc.stderr
            return proc.stdout
        time.sleep(0.5)


def test_kubectl_top_reads_the_kubelets_usage(kube_api: KubeApiHandle, kubelet: KubeletApiServer) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    register_node(c, "node1", "127.0.0.1", {}, kubelet.settings.port)
    register_node(c, "node2", "127.0.0.1", {})  # no kubelet endpoint in its status: not scraped
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "k8shost:0.1.0"}]}}  # fmt: skip
    c.create("/api/v1", "pods", "default", pod)
    c.create("/api/v1", "pods", "default", {**pod, "metadata": {"name": "idle"}})
    groups = json.loads(_kubectl(kube_api, "get", "--raw", "/apis").stdout)["groups"]
    assert any(
        g["name"] == "metrics.k8s.io" and g["preferredVersion"]["version"] == "v1beta1" for g in groups
    )

    [header, *rows] = _wait(kube_api, "top", "nodes").splitlines()
    assert header.split() == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    table = {r.split()[0]: r.split()[1:] for r in rows}
    cpu, _, memory, _ = table["node1"]
    assert 1900 <= int(cpu.rstrip("m")) <= 2100 and memory == "2048Mi", rows
    assert table.get("node2", ["<unknown>"])[0] == "<unknown>", rows  # never scraped
    out = _wait(kube_api, "top", "pods", "-A", "-l", "app=web")
    [header, row] = out.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    ns, name, cpu, memory = row.split()
    assert (ns, name, memory) == ("default", "web", "64Mi") and 450 <= int(cpu.rstrip("m")) <= 550, row

    metrics = json.loads(
        _kubectl(kube_api, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web").stdout
    )
    assert metrics["kind"] == "PodMetrics" and metrics["containers"][0]["name"] == "c"
    assert float(metrics["window"].rstrip("s")) > 0
    base = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"
    missing = _kubectl(kube_api, "get", "--raw", f"{base}/nope")
    assert missing.returncode == 1 and 'pods "default/nope" not found' in missing.stderr
    idle = _kubectl(kube_api, "get", "--raw", f"{base}/idle")
    assert idle.returncode == 1 and 'podmetrics.metrics.k8s.io "default/idle" not found' in idle.stderr

    kubelet.stop()
    time.sleep(2)
    gone = _kubectl(kube_api, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
    assert json.loads(gone.stdout)["items"] == []
