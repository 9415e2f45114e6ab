"""The `/scale` subresource, as `kubectl scale` and the official client's `*_scale` calls use it:
the Scale view (autoscaling/v1), replicas changed through PUT and each patch type, the object's
own spec and generation following, a watcher seeing it, and kube-apiserver's refusals (422 for a
negative count, 409 for a stale resourceVersion, kubectl's --current-replicas precondition)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.integration.kubeapi.official_client import api
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_json
from tests.integration.kubeapi.test_kubeapi_official_client import status_of
from tests.kubeapi_fixture import KubeApiHandle

NS = "default"
__all__ = ["api"]  # the official client's fixture


def workload(kind: str, name: str, replicas: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name, "tier": "web"},
                     "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}]},
        "template": {"metadata": {"labels": {"app": name, "tier": "web", "track": "stable"}},
                     "spec": {"containers": [{"name": "main", "image": "k8shost:0.1.0"}]}},
    }  # fmt: skip
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_kubectl_scale_changes_the_deployment(kube_api: KubeApiHandle, api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(NS, workload("Deployment", "web", 2))
    assert "deployment.apps/web scaled" in kubectl(
        kube_api, "-n", NS, "scale", "deployment/web", "--replicas=4"
    )
    d = kubectl_json(kube_api, "-n", NS, "get", "deployment", "web")
    assert d["spec"]["replicas"] == 4 and d["metadata"]["generation"] == 2
    refused = kubectl(kube_api, "-n", NS, "scale", "deployment/web", "--current-replicas=2", "--replicas=6",
                      check=False)  # fmt: skip
    assert "Expected replicas to be 2, was 4" in refused
    assert apps.read_namespaced_deployment(name="web", namespace=NS).spec.replicas == 4


def test_official_client_reads_and_changes_scale(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_stateful_set(NS, workload("StatefulSet", "db", 1))
    s = apps.read_namespaced_stateful_set_scale(name="db", namespace=NS)
    assert (s.kind, s.api_version, s.spec.replicas, s.status.replicas) == ("Scale", "autoscaling/v1", 1, 0)
    assert s.status.selector == "app=db,tier=web,track notin (canary)"

    rv = s.metadata.resource_version
    stream = watch.Watch().stream(
        apps.list_namespaced_stateful_set, NS, resource_version=rv, timeout_seconds=5
    )
    patched = apps.patch_namespaced_stateful_set_scale(
        name="db", namespace=NS, body={"spec": {"replicas": 3}}
    )
    assert patched.spec.replicas == 3
    event = next(stream)
    assert event["type"] == "MODIFIED" and event["object"].spec.replicas == 3

    s = apps.read_namespaced_stateful_set_scale(name="db", namespace=NS)
    s.spec.replicas = 5
    assert apps.replace_namespaced_stateful_set_scale(name="db", namespace=NS, body=s).spec.replicas == 5
    s.spec.replicas = 7  # s carries the resourceVersion of before the replace: stale
    with pytest.raises(ApiException) as stale:
        apps.replace_namespaced_stateful_set_scale(name="db", namespace=NS, body=s)
    assert stale.value.status == 409 and status_of(stale.value)["reason"] == "Conflict"

    with pytest.raises(ApiException) as negative:
        apps.patch_namespaced_stateful_set_scale(name="db", namespace=NS, body={"spec": {"replicas": -1}})
    body = status_of(negative.value)
    assert negative.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Scale.autoscaling "db" is invalid: spec.replicas')
    assert apps.read_namespaced_stateful_set(name="db", namespace=NS).spec.replicas == 5


def test_scale_is_served_where_the_apiserver_serves_it(
    kube_api: KubeApiHandle, api: client.ApiClient
) -> None:
    listed = json.loads(kubectl(kube_api, "get", "--raw", "/apis/apps/v1"))["resources"]
    resources = {r["name"]: r for r in listed}
    for plural in ("deployments", "statefulsets", "replicasets"):
        sub = resources[f"{plural}/scale"]
        assert (sub["group"], sub["version"], sub["kind"]) == ("autoscaling", "v1", "Scale")
    assert "daemonsets/scale" not in resources
    apps = client.AppsV1Api(api)
    apps.create_namespaced_daemon_set(NS, {**workload("DaemonSet", "agent"), "spec": {
        k: v for k, v in workload("DaemonSet", "agent")["spec"].items() if k != "replicas"}})  # fmt: skip
    missing = kubectl(kube_api, "get", "--raw", f"/apis/apps/v1/namespaces/{NS}/daemonsets/agent/scale",
                      check=False)  # fmt: skip
    assert "(NotFound)" in missing
