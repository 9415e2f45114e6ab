"""ReplicationControllers (core/v1, with /scale) and APIServices (apiregistration.k8s.io/v1, one per
local group version, Available) through kubectl and the official `kubernetes` client."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeenv.kubeapi.snapshot_crds import snapshot_crds
from tests.integration.kubeapi.official_client import api
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

__all__ = ["api"]  # the official client's fixture (official_client.py)

RC = """\
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}
"""


def test_replication_controller_with_kubectl(kube_api: KubeApiHandle) -> None:
    assert "replicationcontroller/legacy created" in kubectl(kube_api, "create", "-f", "-", stdin=RC)
    rc = kube_api.get("replicationcontrollers", "default", "legacy")
    assert rc is not None
    assert rc["spec"]["replicas"] == 1 and rc["spec"]["selector"] == {"app": "legacy"}  # defaulted
    assert rc["metadata"]["labels"] == {"app": "legacy"} and rc["status"] == {"replicas": 0}
    kubectl(kube_api, "scale", "rc", "legacy", "--replicas=3")
    out = kubectl(kube_api, "get", "rc").splitlines()
    assert out[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert out[1].split()[:4] == ["legacy", "3", "0", "0"]
    assert "replicationcontroller/legacy" in kubectl(kube_api, "get", "all")


def test_replication_controller_with_the_official_client(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body: dict[str, Any] = {"metadata": {"name": "rc1"}, "spec": {"replicas": 2, "selector": {"app": "x"},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}  # fmt: skip
    core.create_namespaced_replication_controller("default", body)
    assert [r.metadata.name for r in core.list_replication_controller_for_all_namespaces().items] == ["rc1"]
    scale = core.read_namespaced_replication_controller_scale("rc1", "default")
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=x")
    core.patch_namespaced_replication_controller_scale("rc1", "default", {"spec": {"replicas": 0}})
    assert core.read_namespaced_replication_controller("rc1", "default").spec.replicas == 0
    bad = {**body, "metadata": {"name": "rc2"}, "spec": {**body["spec"], "selector": {"app": "y"}}}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_replication_controller("default", bad)
    assert e.value.status == 422 and "`selector` does not match template `labels`" in e.value.body


def test_apiservices_list_the_local_groups(kube_api: KubeApiHandle, api: client.ApiClient) -> None:
    reg = client.ApiregistrationV1Api(api)
    svcs = {s.metadata.name: s for s in reg.list_api_service().items}
    assert {"v1.", "v1.apps", "v1.batch", "v1.rbac.authorization.k8s.io", "v1.apiregistration.k8s.io"} <= set(
        svcs
    )
    apps = svcs["v1.apps"]
    assert apps.spec.service is None and (apps.spec.group, apps.spec.version) == ("apps", "v1")
    cond = apps.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("Available", "True", "Local")
    out = kubectl(kube_api, "get", "apiservices").splitlines()
    assert out[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert next(r for r in out if r.startswith("v1.apps ")).split()[1:3] == ["Local", "True"]
    assert "v1.apps" in kubectl(kube_api, "get", "rc,apiservices", "-A")


def test_a_crd_group_gets_its_apiservice(kube_api: KubeApiHandle, api: client.ApiClient) -> None:
    ext, reg = client.ApiextensionsV1Api(api), client.ApiregistrationV1Api(api)
    crd = snapshot_crds()[0]
    group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
    ext.create_custom_resource_definition(crd)
    svc = reg.read_api_service(f"{version}.{group}")
    assert svc.metadata.labels["kube-aggregator.kubernetes.io/automanaged"] == "true"
    assert (svc.spec.group_priority_minimum, svc.spec.version_priority) == (1000, 100)
