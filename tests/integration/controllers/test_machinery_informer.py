"""Informer against the Kubernetes API double, through kubernetes_asyncio's ApiClient.

list (paged) + watch, relist after compaction (410) delivering only the difference, and watch
reconnection losing no event.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controllers.machinery import CONFIG_MAPS, Informer, MachineryMetrics, by_label
from controllers.machinery.ratelimit import Backoff
from tests.integration.controllers.machinery_kit import (
    Recorder,
    client_for,
    ensure_namespace,
    eventually,
    put_config_map,
)

NS = "informer-test"


def fast_backoff() -> Backoff:
    return Backoff(initial=0.05, cap=0.5)


def cm_requests(kube_api: Any, verb: str) -> list[Any]:
    return [r for r in kube_api.requests if r.resource == "configmaps" and r.verb == verb]


async def test_informer_sees_create_update_delete_and_pages_the_list(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        for i in range(7):
            await put_config_map(client, NS, f"pre-{i}", v="0")
        informer = Informer(client, CONFIG_MAPS, namespace=NS, page_size=3, backoff=fast_backoff())
        informer.add_index("app", by_label("app"))
        seen = Recorder()
        informer.add_handler(seen.on_add, seen.on_update, seen.on_delete)
        informer.start()
        try:
            await asyncio.wait_for(informer.wait_synced(), 10)
            assert sorted(seen.of("add")) == [f"{NS}/pre-{i}" for i in range(7)]
            lists = cm_requests(kube_api, "list")
            assert len(lists) == 3, "7 objects in pages of 3"
            seen.clear()

            created = await put_config_map(client, NS, "live", v="1")
            await eventually(lambda: seen.of("add") == [f"{NS}/live"], what="add")
            updated = await client.replace(
                CONFIG_MAPS,
                {
                    **created,
                    "data": {"v": "2"},
                    "metadata": {**created["metadata"], "labels": {"app": "web"}},
                },
            )
            await eventually(lambda: seen.of("update") == [f"{NS}/live"], what="update")
            cached = informer.store.get(NS, "live")
            assert cached is not None and cached["data"] == {"v": "2"}
            assert [o["metadata"]["name"] for o in informer.store.by_index("app", "web")] == ["live"]
            assert informer.resource_version == updated["metadata"]["resourceVersion"]
            await client.delete(CONFIG_MAPS, NS, "live")
            await eventually(lambda: seen.of("delete") == [f"{NS}/live"], what="delete")
            assert informer.store.get(NS, "live") is None
            assert informer.store.by_index("app", "web") == []
        finally:
            await informer.stop()
        # a watch is recorded when its stream ends
        await eventually(lambda: cm_requests(kube_api, "watch"), what="the watch in the request record")


async def test_relist_after_compaction_delivers_only_the_difference(kube_api: Any) -> None:
    """While the watch is away, objects change and history is compacted: the next watch gets 410,
    the informer relists and delivers add/update/delete for exactly what changed."""
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        for name in ("same", "changed", "gone"):
            await put_config_map(client, NS, name, v="0")
        metrics = MachineryMetrics()
        informer = Informer(client, CONFIG_MAPS, namespace=NS, backoff=fast_backoff(), metrics=metrics)
        seen = Recorder()
        informer.add_handler(seen.on_add, seen.on_update, seen.on_delete)
        informer.start()
        await asyncio.wait_for(informer.wait_synced(), 10)
        old_rv = informer.resource_version
        await informer.stop()  # the informer is away (its store and resourceVersion stay) ...
        seen.clear()
        await put_config_map(client, NS, "changed", v="1")
        await client.delete(CONFIG_MAPS, NS, "gone")
        await put_config_map(client, NS, "new", v="1")
        kube_api.compact()  # ... and the server forgets the changes since `old_rv`
        informer.start()  # resumes watching from old_rv (the reflector's path after a dropped watch)
        try:
            await eventually(lambda: len(seen.events) >= 3, what="the relist's diff")
            await asyncio.sleep(0.2)  # nothing else may follow
            assert sorted((t, k) for t, k, _ in seen.events) == [
                ("add", f"{NS}/new"),
                ("delete", f"{NS}/gone"),
                ("update", f"{NS}/changed"),
            ]
            calls = [(r.verb, r.query) for r in kube_api.requests if r.resource == "configmaps"]
            relist = max(i for i, (verb, _) in enumerate(calls) if verb == "list")
            verb, query = calls[relist - 1]  # a watch is recorded when it ends: here, with the 410
            assert verb == "watch" and f"resourceVersion={old_rv}&" in query + "&", calls
            assert int(informer.resource_version) > int(old_rv)
            assert metrics.registry.get_sample_value("informer_relists_total", {"kind": "configmaps"}) == 2
            assert sorted(informer.store.keys()) == [f"{NS}/changed", f"{NS}/new", f"{NS}/same"]
        finally:
            await informer.stop()


async def test_reconnect_after_dropped_watches_loses_no_event(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        informer = Informer(client, CONFIG_MAPS, namespace=NS, backoff=fast_backoff())
        seen = Recorder()
        informer.add_handler(seen.on_add, seen.on_update, seen.on_delete)
        informer.start()
        try:
            await asyncio.wait_for(informer.wait_synced(), 10)
            for i in range(30):
                await put_config_map(client, NS, f"cm-{i % 10}", v=str(i))
                if i % 7 == 3:
                    kube_api.drop_watches()  # server closes every watch mid-stream
            await eventually(lambda: len(seen.events) == 30, what="all 30 events")
            assert seen.of("add") == [f"{NS}/cm-{i}" for i in range(10)]
            assert len(seen.of("update")) == 20
            for i in range(10):
                cached = informer.store.get(NS, f"cm-{i}")
                assert cached is not None and cached["data"]["v"] == str(20 + i)
            assert len(cm_requests(kube_api, "watch")) >= 5, "it reconnected after each drop"
            assert len(cm_requests(kube_api, "list")) == 1, "a dropped watch resumes; no relist"
        finally:
            await informer.stop()


async def test_watch_ended_by_the_server_timeout_is_reopened_without_relisting(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as client:
        await ensure_namespace(client, NS)
        informer = Informer(client, CONFIG_MAPS, namespace=NS, watch_timeout=1, backoff=fast_backoff())
        seen = Recorder()
        informer.add_handler(seen.on_add, seen.on_update, seen.on_delete)
        informer.start()
        try:
            await asyncio.wait_for(informer.wait_synced(), 10)
            await eventually(
                lambda: len(cm_requests(kube_api, "watch")) >= 2, what="a watch ended by timeout"
            )
            await put_config_map(client, NS, "after-timeout", v="1")
            await eventually(lambda: seen.of("add") == [f"{NS}/after-timeout"], what="the add")
            assert all("timeoutSeconds=" in r.query for r in cm_requests(kube_api, "watch"))
            assert all("allowWatchBookmarks=true" in r.query for r in cm_requests(kube_api, "watch"))
            assert len(cm_requests(kube_api, "list")) == 1
        finally:
            await informer.stop()
