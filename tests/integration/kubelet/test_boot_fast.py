"""The overlay booted from the image by the runner against the API double, without OVN: the IAM
webhook DaemonSet's pod comes up Ready through its own probes, and answers a TokenReview through
the URL and certificates of daemonsets/k3s/iam-webhook.yaml's kind of kubeconfig."""

from __future__ import annotations

from pathlib import Path

from tests.integration.kubelet.conftest import pods, wait_for
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl


def test_webhook_pod_ready(kube_api, applied: Path, runner_factory) -> None:
    runner_factory()
    webhook = wait_for(lambda: next((p for n, p in pods(kube_api).items() if n.startswith("iam-webhook-")), None),
                       10, "the iam-webhook pod")  # fmt: skip
    name = webhook["metadata"]["name"]

    def ready():
        p = pods(kube_api)[name]
        conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}
        return p if conds.get("Ready") == "True" else None

    p = wait_for(ready, 60, f"{name} Ready")
    assert p["status"]["phase"] == "Running" and p["status"]["podIP"] == "127.0.0.1"
    assert p["status"]["containerStatuses"][0]["ready"] is True
    out = kubectl(kube_api, "get", "pods", "-n", "kube-system", "-l", "app.kubernetes.io/part-of=k8shost")
    assert any(line.startswith(name) and " 1/1 " in line and "Running" in line for line in out.splitlines()), out
