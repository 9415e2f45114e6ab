"""Workloads and custom resources through kubernetes_asyncio (what the controllers use): the refusals
the official client would not let through (a missing selector or image), Deployment status and
pages, and a custom resource's list+watch, server-side apply, status-less generation and delete
with finalizers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from nodeenv.kubeapi.snapshot_crds import snapshot_crds

G, V, P = "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses"


def deployment(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    match = {"app": name}
    pod = {"containers": [{"name": "c", "image": "k8shost:0.1"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {**match, **(labels or {})}},
            "spec": {"selector": {"matchLabels": match},
                     "template": {"metadata": {"labels": match},
                                  "spec": pod}}}  # fmt: skip


def vsclass(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "VolumeSnapshotClass", "metadata": {"name": name},
            "driver": "stor.plasmacloud.io", "deletionPolicy": "Delete", **fields}  # fmt: skip


async def test_missing_selector_and_image_are_422(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    no_selector = deployment("a")
    del no_selector["spec"]["selector"]
    no_image = deployment("b")
    del no_image["spec"]["template"]["spec"]["containers"][0]["image"]
    messages = []
    for body in (no_selector, no_image):
        with pytest.raises(ApiException) as e:
            await apps.create_namespaced_deployment("default", body)
        st = json.loads(e.value.body)
        assert (e.value.status, st["reason"]) == (422, "Invalid")
        messages.append(st["message"])
    assert messages[0] == (
        'Deployment.apps "a" is invalid: [spec.selector: Required value, spec.template.metadata.labels: '
        'Invalid value: map[string]string{"app":"a"}: `selector` does not match template `labels`]'
    )
    assert (
        messages[1]
        == 'Deployment.apps "b" is invalid: spec.template.spec.containers[0].image: Required value'
    )


async def test_deployment_status_and_pages(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    for i in range(3):
        await apps.create_namespaced_deployment("default", deployment(f"d{i}", {"tier": "x" if i else "y"}))
    page = await apps.list_namespaced_deployment("default", label_selector="tier=x", limit=1)
    assert [d.metadata.name for d in page.items] == ["d1"] and page.metadata._continue
    rest = await apps.list_namespaced_deployment(
        "default", label_selector="tier=x", _continue=page.metadata._continue
    )
    assert [d.metadata.name for d in rest.items] == ["d2"]
    st = await apps.patch_namespaced_deployment_status("d0", "default", {"status": {"readyReplicas": 1}})
    assert st.status.ready_replicas == 1 and st.metadata.generation == 1
    ignored = await apps.patch_namespaced_deployment("d0", "default", {"status": {"readyReplicas": 5}})
    assert ignored.status.ready_replicas == 1  # the main resource ignores status


async def test_custom_resource_watch_apply_and_finalizers(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    for crd in snapshot_crds():
        await ext.create_custom_resource_definition(crd)
    co = client.CustomObjectsApi(api)
    rv = (await co.list_cluster_custom_object(G, V, P))["metadata"]["resourceVersion"]
    events: list[tuple[str, str]] = []

    async def watch_until_deleted() -> None:
        w = watch.Watch()
        async with w.stream(
            co.list_cluster_custom_object, G, V, P, resource_version=rv, timeout_seconds=5
        ) as s:
            async for ev in s:
                events.append((ev["type"], ev["object"]["deletionPolicy"]))
                if ev["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(watch_until_deleted())
    held = vsclass("held")
    held["metadata"]["finalizers"] = ["k8shost.io/hold"]
    await co.create_cluster_custom_object(G, V, P, held)
    applied = await co.patch_cluster_custom_object(
        G, V, P, "held", vsclass("held", deletionPolicy="Retain"),
        field_manager="admin", force=True, _content_type="application/apply-patch+yaml",
    )  # fmt: skip
    assert applied["deletionPolicy"] == "Retain" and applied["metadata"]["generation"] == 2
    assert applied["metadata"]["finalizers"] == ["k8shost.io/hold"]  # not the applier's field: kept
    await co.delete_cluster_custom_object(G, V, P, "held")
    marked = await co.get_cluster_custom_object(G, V, P, "held")
    assert marked["metadata"]["deletionTimestamp"]
    await co.patch_cluster_custom_object(G, V, P, "held", [{"op": "remove", "path": "/metadata/finalizers"}])
    await asyncio.wait_for(watcher, 10)
    assert events == [
        ("ADDED", "Delete"),
        ("MODIFIED", "Retain"),
        ("MODIFIED", "Retain"),
        ("DELETED", "Retain"),
    ]
    with pytest.raises(ApiException) as e:
        await co.get_cluster_custom_object(G, V, P, "held")
    assert json.loads(e.value.body)["message"] == f'{P}.{G} "held" not found'
