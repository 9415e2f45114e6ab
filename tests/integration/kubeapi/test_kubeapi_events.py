"""The scheduler's and kubelet's Events (nodeenv/kubelet/events.py) as kubectl shows them from the
double: `kubectl get events -A`, `kubectl describe pod`'s Events, a repeat counted on one Event, and
kube-apiserver's --event-ttl deleting Events not written for that long."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.events import NORMAL, WARNING, KubeletEvents, SchedulerEvents
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_json
from tests.kubeapi_fixture import KubeApiHandle

POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox}]}\n"


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, event_ttl=3.0)


def _pod(api: KubeApiHandle) -> dict[str, Any]:
    kubectl(api, "create", "-f", "-", stdin=POD)
    pod = api.get("pods", "default", "web")
    assert pod is not None
    return pod


def test_scheduler_and_kubelet_events_in_get_and_describe(kube_api: KubeApiHandle) -> None:
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    pod = _pod(kube_api)
    SchedulerEvents(client).scheduled(pod, "node-1")
    kubelet = KubeletEvents(client, "node-1")
    kubelet.pod(pod, NORMAL, "Pulled", 'Container image "busybox" already present on machine', "c")
    kubelet.pod(pod, NORMAL, "Started", "Started container c", "c")
    for _ in range(3):
        kubelet.pod(pod, WARNING, "BackOff", "Back-off restarting failed container c in pod web", "c")
    rows = kubectl(kube_api, "get", "events", "-A").splitlines()
    assert rows[0].split() == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    reasons = [r.split()[3] for r in rows[1:]]
    assert sorted(reasons) == ["BackOff", "Pulled", "Scheduled", "Started"]
    events = {e["reason"]: e for e in kubectl_json(kube_api, "get", "events", "-n", "default")["items"]}
    assert events["Scheduled"]["reportingComponent"] == "default-scheduler"
    assert events["Scheduled"]["message"] == "Successfully assigned default/web to node-1"
    assert events["Started"]["source"] == {"component": "kubelet", "host": "node-1"}
    assert events["Started"]["involvedObject"]["fieldPath"] == "spec.containers{c}"
    assert events["BackOff"]["count"] == 3 and events["BackOff"]["type"] == "Warning"
    described = kubectl(kube_api, "describe", "pod", "web")
    section = described[described.index("Events:") :]
    assert "default-scheduler" in section and "Successfully assigned default/web to node-1" in section
    assert "kubelet" in section and "Started container c" in section
    assert "(x3 over" in section  # the count kubectl shows for a repeated event
    v1 = kubectl_json(kube_api, "get", "events.v1.events.k8s.io", "-n", "default")["items"]
    scheduled = next(e for e in v1 if e["reason"] == "Scheduled")
    assert (scheduled["reportingController"], scheduled["action"]) == ("default-scheduler", "Binding")


def test_events_expire_after_the_event_ttl(kube_api: KubeApiHandle) -> None:
    client = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    pod = _pod(kube_api)
    KubeletEvents(client, "node-1").pod(pod, NORMAL, "Started", "Started container c", "c")
    assert len(kube_api.objects("events", "default")) == 1
    time.sleep(3.5)
    kubectl(kube_api, "create", "configmap", "any-write")  # expiry runs on the double's writes
    assert kube_api.objects("events", "default") == []
