"""Bad input named in the runner's output with the pod, the container and kubelet's reason, and in
the container's status: a missing image, an unknown program, a probe that never passes."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from nodeenv.image.build import image_name
from nodeenv.kubelet.apiclient import KubeClient
from tests.conftest import require_root
from tests.integration.kubelet.conftest import wait_for

NS = "default"


def deployment(name: str, container: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": name}
    spec = {"hostNetwork": True, "containers": [{"name": "main", **container}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}  # fmt: skip


def status_of(api: Any, prefix: str) -> dict[str, Any] | None:
    for p in api.objects("pods", NS):
        if p["metadata"]["name"].startswith(prefix + "-") and p.get("status", {}).get("containerStatuses"):
            s: dict[str, Any] = p["status"]["containerStatuses"][0]
            return s
    return None


@pytest.mark.parametrize(
    ("container", "reason", "words"),
    [
        ({"image": "localhost/no-such-image:1", "command": ["sleep", "60"]}, "ErrImageNeverPull",
         ["localhost/no-such-image:1"]),
        ({"image": image_name(), "command": ["no-such-program"]}, "StartError", ["no-such-program"]),
        ({"image": image_name(), "command": ["sleep", "60"],
          "readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 1, "failureThreshold": 1}},
         "Readiness probe failed", ["127.0.0.1:1", "refused"]),
    ],
    ids=["missing-image", "unknown-program", "probe-never-passes"],
)  # fmt: skip
def test_bad_input_named(kube_api, runner_factory, caplog, container, reason, words) -> None:
    require_root()
    caplog.set_level(logging.WARNING, logger="nodeenv.kubelet")
    name = reason.split()[0].lower()
    KubeClient.from_kubeconfig(kube_api.kubeconfig).request(
        "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment(name, container)
    )
    runner_factory()

    def named() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if reason in r.getMessage() and "container main" in r.getMessage()
        ]

    lines = wait_for(named, 60, f"the runner naming {reason}")
    assert all(w in lines[0] for w in words), lines[0]

    def written() -> dict[str, Any] | None:
        st = status_of(kube_api, name)
        state = (st or {}).get("state", {})
        return (
            st
            if ("running" in state if "probe" in reason else state.get("waiting", {}).get("reason") == reason)
            else None
        )

    st = wait_for(written, 10, "the container status")
    assert st["ready"] is False
    assert "probe" in reason or words[0] in st["state"]["waiting"]["message"]


def test_pod_with_a_missing_claim_stays_pending(kube_api: Any, runner_factory: Any) -> None:
    """The scheduler's volume binding, played by the runner: a Pod whose PVC does not exist is not
    bound to a node; it stays Pending, Unschedulable, naming the claim."""
    require_root()
    container = {"name": "main", "image": image_name(), "command": ["sleep", "60"]}
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "nope"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "namespace": NS},
           "spec": {"containers": [container], "volumes": [volume]}}  # fmt: skip
    KubeClient.from_kubeconfig(kube_api.kubeconfig).request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    runner_factory()

    def unschedulable() -> dict[str, Any] | None:
        p = kube_api.get("pods", NS, "orphan")
        conds = {c["type"]: c for c in (p or {}).get("status", {}).get("conditions") or []}
        return conds.get("PodScheduled")

    cond = wait_for(unschedulable, 20, "the pod's PodScheduled condition")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == '0/1 nodes are available: persistentvolumeclaim "nope" not found.'
    assert not kube_api.get("pods", NS, "orphan")["spec"].get("nodeName")
