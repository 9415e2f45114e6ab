"""metrics.k8s.io on the API double (nodeenv/kubeapi/metricsapi.py, metricsserver.py): a kubelet's
read-only port (nodeenv/kubelet/readonlyport.py, serving resource metrics whose CPU grows by half a
core-second per second) scraped as metrics-server does, and `kubectl top nodes` / `kubectl top pods`
reading the rate and the working set; discovery lists the group; a Pod without usage is 404 as
metrics-server answers; a node whose kubelet stops answering drops out."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from nodeenv.kubeapi import metricsserver
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.kubelet.readonlyport import ReadOnlyPort
from nodeenv.kubelet.resourcestats import ContainerUsage, Usage, render
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

MiB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def kubelet(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReadOnlyPort]:
    port = _free_port()
    monkeypatch.setattr(metricsserver, "KUBELET_READ_ONLY_PORT", port)
    monkeypatch.setattr(metricsserver, "RESOLUTION", 0.5)
    t0 = time.time()

    def source() -> bytes:
        cpu = 0.5 * (time.time() - t0)
        web = ContainerUsage("default", "web", "c", Usage(cpu, 64 * MiB))
        return render(Usage(4 * cpu, 2048 * MiB), [web])

    server = ReadOnlyPort("127.0.0.1", port, source)
    server.start()
    yield server
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


def test_kubectl_top_reads_the_kubelets_usage(kube_api: KubeApiHandle, kubelet: ReadOnlyPort) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    register_node(c, "node1", "127.0.0.1", {})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "k8shost:0.1.0"}]}}  # fmt: skip
    c.create("/api/v1", "pods", "default", pod)
    c.create("/api/v1", "pods", "default", {**pod, "metadata": {"name": "idle"}})
    groups = json.loads(_kubectl(kube_api, "get", "--raw", "/apis").stdout)["groups"]
    assert any(
        g["name"] == "metrics.k8s.io" and g["preferredVersion"]["version"] == "v1beta1" for g in groups
    )

    [header, row] = _wait(kube_api, "top", "nodes").splitlines()
    assert header.split() == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    name, cpu, _, memory, _ = row.split()
    assert name == "node1" and 1900 <= int(cpu.rstrip("m")) <= 2100 and memory == "2048Mi", row
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
