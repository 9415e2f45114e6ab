"""The API double through the official asyncio client, loaded from the fixture's kubeconfig (HTTPS,
bearer token): CRUD, list+watch from a resourceVersion, bookmarks, 410 after compaction, 409 on a
stale update, /status, merge patch, recording of who did what."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubeapi_fixture import KubeApiHandle


def _svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}], **spec}}  # fmt: skip


async def test_bootstrap_namespaces_and_kubernetes_service(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    names = [n.metadata.name for n in (await core.list_namespace()).items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    svc = await core.read_namespaced_service("kubernetes", "default")
    assert svc.spec.cluster_ip == "10.96.0.1"
    assert svc.spec.ports[0].target_port == 6443


async def test_create_get_list_delete_service(api: client.ApiClient, kube_api: KubeApiHandle) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_service("default", _svc("web"))
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.generation is None  # Services carry none (their strategy sets none)
    assert created.spec.cluster_ip.startswith("10.96.") and created.spec.cluster_ips == [
        created.spec.cluster_ip
    ]
    assert created.spec.ports[0].protocol == "TCP" and created.spec.ports[0].target_port == 80
    listed = await core.list_namespaced_service("default")
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    assert {s.metadata.name for s in listed.items} == {"kubernetes", "web"}
    await core.delete_namespaced_service("web", "default")
    with pytest.raises(ApiException) as e:
        await core.read_namespaced_service("web", "default")
    assert e.value.status == 404
    recorded = [(r.verb, r.resource, r.name, r.status) for r in kube_api.requests]
    assert ("create", "services", "", 201) in recorded
    assert ("delete", "services", "web", 200) in recorded
    assert all(r.user == "kubernetes-admin" for r in kube_api.requests)


async def test_create_in_missing_namespace_is_404_notfound(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as e:
        await client.CoreV1Api(api).create_namespaced_config_map("nope", {"metadata": {"name": "c"}})
    assert e.value.status == 404
    assert '"reason":"NotFound"' in e.value.body and 'namespaces \\"nope\\" not found' in e.value.body


async def test_already_exists_is_409(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert e.value.status == 409 and '"reason":"AlreadyExists"' in e.value.body


async def test_stale_update_is_409_conflict(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    cm.data = {"a": "2"}
    fresh = await core.replace_namespaced_config_map("c", "default", cm)
    assert fresh.metadata.resource_version != cm.metadata.resource_version
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        await core.replace_namespaced_config_map("c", "default", cm)
    assert e.value.status == 409 and '"reason":"Conflict"' in e.value.body
    assert (await core.read_namespaced_config_map("c", "default")).data == {"a": "2"}


async def test_status_subresource_and_main_resource_split(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", _svc("lb", type="LoadBalancer"))
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
    patched = await core.patch_namespaced_service_status("lb", "default", ingress)
    assert patched.status.load_balancer.ingress[0].ip == "192.0.2.10"
    # status in a main-resource patch is ignored; spec in a status patch is ignored
    await core.patch_namespaced_service("lb", "default", {"status": {"loadBalancer": {}}})
    await core.patch_namespaced_service_status("lb", "default", {"spec": {"sessionAffinity": "ClientIP"}})
    svc = await core.read_namespaced_service("lb", "default")
    assert svc.status.load_balancer.ingress[0].ip == "192.0.2.10"
    assert svc.spec.session_affinity == "None"
    assert all(p.node_port and 30000 <= p.node_port <= 32767 for p in svc.spec.ports)


async def test_merge_patch_bumps_generation_on_spec_change(api: client.ApiClient) -> None:
    net = client.NetworkingV1Api(api)
    policy = {"metadata": {"name": "np"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    assert (await net.create_namespaced_network_policy("default", policy)).metadata.generation == 1
    np = await net.patch_namespaced_network_policy("np", "default", {"metadata": {"labels": {"a": "b"}}})
    assert np.metadata.generation == 1 and np.metadata.labels == {"a": "b"}
    np = await net.patch_namespaced_network_policy("np", "default", {"spec": {"policyTypes": ["Egress"]}})
    assert np.metadata.generation == 2


async def _events(api: client.ApiClient, **kw: Any) -> AsyncIterator[dict[str, Any]]:
    w = watch.Watch()
    async with w.stream(client.CoreV1Api(api).list_namespaced_config_map, "default", **kw) as stream:
        async for ev in stream:
            yield ev


async def test_list_then_watch_from_resource_version(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    listed = await core.list_namespaced_config_map("default")
    rv = listed.metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    await core.patch_namespaced_config_map("after", "default", {"data": {"k": "v"}})
    await core.delete_namespaced_config_map("after", "default")
    seen = []
    async for ev in _events(api, resource_version=rv, timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 3:
            break
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


async def test_watch_without_rv_sends_current_state_then_changes(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "one"}})
    seen = []

    async def later() -> None:
        await asyncio.sleep(0.2)
        await core.create_namespaced_config_map("default", {"metadata": {"name": "two"}})

    task = asyncio.create_task(later())
    async for ev in _events(api, timeout_seconds=5):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            break
    await task
    assert seen == [("ADDED", "one"), ("ADDED", "two")]


async def test_bookmarks_arrive_when_allowed(api: client.ApiClient) -> None:
    rv = (await client.CoreV1Api(api).list_namespaced_config_map("default")).metadata.resource_version
    async for ev in _events(api, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=5):
        assert ev["type"] == "BOOKMARK"
        assert int(ev["raw_object"]["metadata"]["resourceVersion"]) >= int(rv)
        break
    else:
        pytest.fail("no BOOKMARK within the watch")


async def test_watch_from_compacted_rv_gets_410_error_event(
    api: client.ApiClient, kube_api: KubeApiHandle
) -> None:
    core = client.CoreV1Api(api)
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    kube_api.compact()
    with pytest.raises(ApiException) as e:
        async for _ in _events(api, resource_version=rv, timeout_seconds=2):
            pass
    assert e.value.status == 410  # kubernetes_asyncio turns the ERROR event's Status into this


async def test_label_and_field_selectors_on_list(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for name, tier in (("a", "web"), ("b", "db"), ("c", None)):
        labels = {"tier": tier} if tier else {}
        await core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})

    async def names(**kw: Any) -> list[str]:
        return [c.metadata.name for c in (await core.list_namespaced_config_map("default", **kw)).items]

    assert await names(label_selector="tier=web") == ["a"]
    assert await names(label_selector="tier!=web") == ["b", "c"]
    assert await names(label_selector="tier in (web,db)") == ["a", "b"]
    assert await names(label_selector="!tier") == ["c"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    with pytest.raises(ApiException) as e:
        await names(field_selector="spec.nodeName=x")
    assert e.value.status == 400 and "field label not supported: spec.nodeName" in e.value.body


async def test_pagination_with_limit_and_continue(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for i in range(5):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"p{i}"}})
    first = await core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    second = await core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    assert [c.metadata.name for c in second.items] == ["p2", "p3"]
    assert second.metadata.resource_version == first.metadata.resource_version


async def test_injected_fault_and_named_user(kube_api: KubeApiHandle) -> None:
    cfg = client.Configuration()
    user = "system:serviceaccount:kube-system:fiberlb-controller"
    await config.load_kube_config(config_file=str(kube_api.kubeconfig_for(user)), client_configuration=cfg)
    kube_api.set_fault(verb="list", resource="services", code=503, times=1)
    async with client.ApiClient(cfg) as c:
        core = client.CoreV1Api(c)
        with pytest.raises(ApiException) as e:
            await core.list_service_for_all_namespaces()
        assert e.value.status == 503
        assert len((await core.list_service_for_all_namespaces()).items) == 1
    mine = kube_api.requests_by(user)
    assert [(r.verb, r.resource, r.namespace, r.status) for r in mine] == [
        ("list", "services", "", 503), ("list", "services", "", 200)]  # fmt: skip


async def test_drop_watches_ends_the_stream_server_side(
    api: client.ApiClient, kube_api: KubeApiHandle
) -> None:
    rv = (await client.CoreV1Api(api).list_namespaced_config_map("default")).metadata.resource_version
    ended = asyncio.Event()

    async def consume() -> None:
        async for _ in _events(api, resource_version=rv, timeout_seconds=60):
            pass
        ended.set()

    task = asyncio.create_task(consume())
    for _ in range(50):
        if any(r.verb == "watch" for r in kube_api.requests):
            break
        await asyncio.sleep(0.05)
    assert await asyncio.to_thread(kube_api.drop_watches) == 1
    await asyncio.wait_for(ended.wait(), 10)
    await task


async def test_events_k8s_io_events_are_core_events(api: client.ApiClient, kube_api: KubeApiHandle) -> None:
    core = client.CoreV1Api(api)
    svc = await core.create_namespaced_service("default", _svc("lb", type="LoadBalancer"))
    rv = (await core.list_namespaced_event("default")).metadata.resource_version
    event = {
        "metadata": {"generateName": "lb."}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Service", "namespace": "default", "name": "lb", "uid": svc.metadata.uid},
        "reason": "IPAllocated", "note": "192.0.2.10", "type": "Normal", "action": "Allocate",
        "reportingController": "fiberlb.plasmacloud.io/controller", "reportingInstance": "fiberlb-0",
    }  # fmt: skip
    created = await client.EventsV1Api(api).create_namespaced_event("default", event)
    assert created.note == "192.0.2.10" and created.regarding.name == "lb"
    selector = f"involvedObject.name=lb,involvedObject.kind=Service,involvedObject.uid={svc.metadata.uid}"
    seen = (await core.list_namespaced_event("default", field_selector=selector)).items
    assert [(e.reason, e.message, e.reporting_component) for e in seen] == [
        ("IPAllocated", "192.0.2.10", "fiberlb.plasmacloud.io/controller")]  # fmt: skip
    w = watch.Watch()
    async with w.stream(core.list_namespaced_event, "default", resource_version=rv, timeout_seconds=2) as s:
        async for ev in s:
            assert (ev["type"], ev["object"].message) == ("ADDED", "192.0.2.10")
            break
    out = await asyncio.to_thread(_kubectl, kube_api, "describe", "svc", "lb")
    assert "IPAllocated" in out and "192.0.2.10" in out


def _kubectl(api: KubeApiHandle, *args: str) -> str:
    import subprocess

    return subprocess.run(["kubectl", "--kubeconfig", str(api.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
