"""The API double through the official `kubernetes` Python client (37.x), loaded from the fixture's
kubeconfig: the calls people make on workloads, storage classes and custom resources (create, get,
list with selectors and pages, watch, every patch type, server-side apply, status, delete with
finalizers), and the refusals kube-apiserver answers (Status reason and code). This client sends
create/update bodies without a Content-Type header, which kube-apiserver takes as JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, dynamic, watch
from kubernetes.client.exceptions import ApiException

from nodeenv.kubeapi.snapshot_crds import snapshot_crds
from tests.integration.kubeapi.official_client import api
from tests.kubeapi_fixture import KubeApiHandle

__all__ = ["api"]  # the official client's fixture (official_client.py)

NS = "kube-system"


def daemonset(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    match = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "labels": {**match, **(labels or {})}},
        "spec": {"selector": {"matchLabels": match},
                 "template": {"metadata": {"labels": match},
                              "spec": {"containers": [{"name": "main", "image": "k8shost:0.1.0",
                                                       "ports": [{"containerPort": 80}],
                                                       "readinessProbe": {"httpGet": {"port": 80}}}]}},
                 **spec},
    }  # fmt: skip


def status_of(e: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(e.body)
    assert body["kind"] == "Status" and body["code"] == e.status
    return body


def test_create_without_content_type_is_json(api: client.ApiClient) -> None:
    """What 37.x sends: the header is absent (the double used to answer 415)."""
    core = client.CoreV1Api(api)
    # the client's own request building (private, generated): no Content-Type on create
    _, _, headers, _, _ = core._create_namespaced_config_map_serialize(
        namespace="default", body={}, pretty=None, dry_run=None, field_manager=None, field_validation=None,
        _request_auth=None, _content_type=None, _headers=None, _host_index=0,
    )  # fmt: skip
    assert "Content-Type" not in headers
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert cm.data == {"k": "v"}
    updated = core.replace_namespaced_config_map(
        "c", "default", {"metadata": {"name": "c"}, "data": {"k": "w"}}
    )
    assert updated.data == {"k": "w"}


def test_daemonset_defaults_generation_and_status(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    ds = apps.create_namespaced_daemon_set(NS, daemonset("agent"))
    assert ds.metadata.generation == 1
    assert ds.spec.update_strategy.type == "RollingUpdate"
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
    assert ds.spec.revision_history_limit == 10
    c = ds.spec.template.spec.containers[0]
    assert (c.termination_message_path, c.image_pull_policy, c.ports[0].protocol) == (
        "/dev/termination-log", "IfNotPresent", "TCP")  # fmt: skip
    assert (c.readiness_probe.http_get.path, c.readiness_probe.period_seconds) == ("/", 10)
    assert ds.spec.template.spec.restart_policy == "Always"
    assert ds.status.desired_number_scheduled == 0
    ds.status.number_ready = 1
    ds.status.desired_number_scheduled = 1
    after = apps.replace_namespaced_daemon_set_status("agent", NS, ds)
    assert after.status.number_ready == 1 and after.metadata.generation == 1  # status is not spec
    patched = apps.patch_namespaced_daemon_set("agent", NS, {"spec": {"revisionHistoryLimit": 3}})
    assert patched.metadata.generation == 2 and patched.status.number_ready == 1


def test_list_with_label_selector_and_pages(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    for i in range(5):
        apps.create_namespaced_daemon_set(NS, daemonset(f"ds-{i}", {"tier": "node" if i % 2 else "edge"}))
    node = apps.list_namespaced_daemon_set(NS, label_selector="tier=node")
    assert [d.metadata.name for d in node.items] == ["ds-1", "ds-3"]
    first = apps.list_daemon_set_for_all_namespaces(limit=2)
    assert len(first.items) == 2 and first.metadata._continue and first.metadata.remaining_item_count == 3
    rest = apps.list_daemon_set_for_all_namespaces(limit=10, _continue=first.metadata._continue)
    names = [d.metadata.name for d in first.items + rest.items]
    assert names == [f"ds-{i}" for i in range(5)]


def test_patch_types_and_server_side_apply(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_daemon_set(NS, daemonset("web"))
    env = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]}}
        }
    }
    strategic = apps.patch_namespaced_daemon_set("web", NS, env)  # the client picks strategic merge
    c = strategic.spec.template.spec.containers[0]
    assert c.image == "k8shost:0.1.0" and c.env[0].name == "A"  # merged by name, not replaced
    merge = apps.patch_namespaced_daemon_set(
        "web", NS, {"metadata": {"labels": {"m": "1"}}}, _content_type="application/merge-patch+json"
    )
    assert merge.metadata.labels["m"] == "1"
    ops = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "k8shost:0.2.0"}]
    jp = apps.patch_namespaced_daemon_set("web", NS, ops)  # a list: JSON patch
    assert jp.spec.template.spec.containers[0].image == "k8shost:0.2.0"
    applied = daemonset("web")
    applied["spec"]["template"]["spec"]["containers"][0]["image"] = "k8shost:0.3.0"
    ssa = apps.patch_namespaced_daemon_set(
        "web", NS, applied, field_manager="admin", force=True, _content_type="application/apply-patch+yaml"
    )
    assert ssa.spec.template.spec.containers[0].image == "k8shost:0.3.0"
    assert any(m.manager == "admin" and m.operation == "Apply" for m in ssa.metadata.managed_fields)


def test_watch_sees_adds_modifies_and_deletes(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    rv = apps.list_namespaced_deployment(NS).metadata.resource_version
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctl"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}  # fmt: skip
    created = apps.create_namespaced_deployment(NS, dep)
    assert created.spec.replicas == 1 and created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.progress_deadline_seconds == 600
    apps.patch_namespaced_deployment("ctl", NS, {"spec": {"replicas": 3}})
    apps.delete_namespaced_deployment("ctl", NS)
    seen = []
    for ev in watch.Watch().stream(
        apps.list_namespaced_deployment, NS, resource_version=rv, timeout_seconds=2
    ):
        seen.append((ev["type"], ev["object"].spec.replicas))
        if ev["type"] == "DELETED":
            break
    assert seen == [("ADDED", 1), ("MODIFIED", 3), ("DELETED", 3)]


def test_delete_with_finalizers(api: client.ApiClient, kube_api: KubeApiHandle) -> None:
    apps = client.AppsV1Api(api)
    ds = daemonset("held")
    ds["metadata"]["finalizers"] = ["k8shost.io/hold"]
    apps.create_namespaced_daemon_set(NS, ds)
    apps.delete_namespaced_daemon_set(
        "held", NS, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    marked = apps.read_namespaced_daemon_set("held", NS)
    assert marked.metadata.deletion_timestamp is not None
    apps.patch_namespaced_daemon_set("held", NS, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")  # fmt: skip
    with pytest.raises(ApiException) as e:
        apps.read_namespaced_daemon_set("held", NS)
    assert status_of(e.value)["reason"] == "NotFound"
    assert status_of(e.value)["message"] == 'daemonsets.apps "held" not found'


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["spec"]["template"]["metadata"].update(labels={"app": "other"}),
            'DaemonSet.apps "bad" is invalid: spec.template.metadata.labels: Invalid value: '
            'map[string]string{"app":"other"}: `selector` does not match template `labels`',
        ),
        (
            lambda d: d["spec"]["template"]["spec"].update(restartPolicy="Never"),
            'DaemonSet.apps "bad" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Never": '
            'supported values: "Always"',
        ),
    ],
    ids=["selector-mismatch", "restart-never"],  # a missing selector or image the client itself refuses
)
def test_invalid_daemonsets_are_422(api: client.ApiClient, edit: Any, message: str) -> None:
    ds = daemonset("bad")
    edit(ds)
    with pytest.raises(ApiException) as e:
        client.AppsV1Api(api).create_namespaced_daemon_set(NS, ds)
    st = status_of(e.value)
    assert (e.value.status, st["reason"], st["message"]) == (422, "Invalid", message)
    assert st["details"]["group"] == "apps" and st["details"]["kind"] == "DaemonSet"


def test_selector_is_immutable(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_daemon_set(NS, daemonset("fixed"))
    moved = {"spec": {"selector": {"matchLabels": {"app": "fixed", "x": "y"}},
                      "template": {"metadata": {"labels": {"x": "y"}}}}}  # fmt: skip
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_daemon_set("fixed", NS, moved)
    assert e.value.status == 422 and "spec.selector: Invalid value" in status_of(e.value)["message"]
    assert "field is immutable" in status_of(e.value)["message"]


def test_job_gets_its_generated_selector(api: client.ApiClient) -> None:
    batch = client.BatchV1Api(api)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "i:1"}]}}}}  # fmt: skip
    created = batch.create_namespaced_job("default", job)
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    labels = created.spec.template.metadata.labels
    assert labels["job-name"] == "once" and labels["batch.kubernetes.io/controller-uid"] == uid
    assert (created.spec.backoff_limit, created.spec.completions, created.spec.parallelism) == (6, 1, 1)
    job["metadata"]["name"] = "always"
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_job("default", job)
    assert e.value.status == 422 and 'Unsupported value: "Always"' in status_of(e.value)["message"]


def test_storage_classes_and_csidrivers(api: client.ApiClient) -> None:
    storage = client.StorageV1Api(api)
    sc = storage.create_storage_class({"metadata": {"name": "fast"}, "provisioner": "stor.plasmacloud.io",
                                       "parameters": {"tier": "ssd"}})  # fmt: skip
    assert (sc.reclaim_policy, sc.volume_binding_mode) == ("Delete", "Immediate")
    with pytest.raises(ApiException) as e:
        storage.patch_storage_class("fast", {"parameters": {"tier": "hdd"}})
    assert status_of(e.value)["message"] == (
        'StorageClass.storage.k8s.io "fast" is invalid: parameters: Forbidden: '
        "updates to parameters are forbidden."
    )
    with pytest.raises(ApiException) as e:
        storage.create_storage_class(
            {"metadata": {"name": "keep"}, "provisioner": "p", "reclaimPolicy": "Keep"}
        )
    assert status_of(e.value)["details"]["causes"] == [{
        "reason": "FieldValueNotSupported", "field": "reclaimPolicy",
        "message": 'Unsupported value: "Keep": supported values: "Delete", "Retain"',
    }]  # fmt: skip
    driver = storage.create_csi_driver({"metadata": {"name": "stor.plasmacloud.io"}, "spec": {}})
    assert driver.spec.attach_required is True and driver.spec.volume_lifecycle_modes == ["Persistent"]
    assert driver.spec.fs_group_policy == "ReadWriteOnceWithFSType"
    vac = {"apiVersion": "storage.k8s.io/v1beta1", "kind": "VolumeAttributesClass",
           "metadata": {"name": "gold"}, "driverName": "stor.plasmacloud.io",
           "parameters": {"iops": "100"}}  # fmt: skip
    # 37.x has only storage.k8s.io/v1's (GA in 1.34); 1.32 serves v1beta1: the dynamic client finds it
    vacs = dynamic.DynamicClient(api).resources.get(
        api_version="storage.k8s.io/v1beta1", kind="VolumeAttributesClass"
    )
    assert vacs.create(body=vac).driverName == "stor.plasmacloud.io"
    with pytest.raises(ApiException) as e:
        vacs.patch(
            name="gold", body={"parameters": {"iops": "1"}}, content_type="application/merge-patch+json"
        )
    assert e.value.status == 422 and "parameters: Invalid value" in status_of(e.value)["message"]


def test_crd_serves_its_custom_resources(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    for crd in snapshot_crds():
        ext.create_custom_resource_definition(crd)
    got = ext.read_custom_resource_definition("volumesnapshotclasses.snapshot.storage.k8s.io")
    conditions = {c.type: c.status for c in got.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert got.status.stored_versions == ["v1"] and got.status.accepted_names.kind == "VolumeSnapshotClass"
    co = client.CustomObjectsApi(api)
    g, v, p = "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses"
    body = {"apiVersion": f"{g}/{v}", "kind": "VolumeSnapshotClass", "metadata": {"name": "snaps"},
            "driver": "stor.plasmacloud.io", "deletionPolicy": "Delete"}  # fmt: skip
    created = co.create_cluster_custom_object(g, v, p, body)
    assert created["metadata"]["generation"] == 1 and created["driver"] == "stor.plasmacloud.io"
    patched = co.patch_cluster_custom_object(g, v, p, "snaps", {"parameters": {"a": "b"}})  # merge patch
    assert patched["parameters"] == {"a": "b"} and patched["metadata"]["generation"] == 2
    assert [o["metadata"]["name"] for o in co.list_cluster_custom_object(g, v, p)["items"]] == ["snaps"]
    bad = {**body, "metadata": {"name": "bad"}, "deletionPolicy": "Keep"}
    bad.pop("driver")
    with pytest.raises(ApiException) as e:
        co.create_cluster_custom_object(g, v, p, bad)
    assert status_of(e.value)["message"] == (
        'VolumeSnapshotClass.snapshot.storage.k8s.io "bad" is invalid: [driver: Required value, '
        'deletionPolicy: Unsupported value: "Keep": supported values: "Delete", "Retain"]'
    )
    with pytest.raises(ApiException) as e:
        co.create_cluster_custom_object(g, v, p, {**body, "metadata": {"name": "x"}, "extra": 1},
                                        field_validation="Strict")  # fmt: skip
    assert e.value.status == 400 and 'unknown field "extra"' in status_of(e.value)["message"]
    pruned = co.create_cluster_custom_object(g, v, p, {**body, "metadata": {"name": "y"}, "extra": 1})
    assert "extra" not in pruned  # Warn (the default) prunes it, as the apiserver does
    ext.delete_custom_resource_definition("volumesnapshotclasses.snapshot.storage.k8s.io")
    with pytest.raises(ApiException) as e:
        co.list_cluster_custom_object(g, v, p)
    assert e.value.status == 404
