"""Informer logic over a scripted client (the API double tests cover the wire): the relist diff,
410 as an ERROR event, handler exceptions, late handlers, resync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery import CONFIG_MAPS, Informer, KubeClient
from controllers.machinery.ratelimit import Backoff


def cm(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


class ScriptedClient(KubeClient):
    """Lists answer `self.items`; each watch plays the next script (a list of events or an exception)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.rv = 1
        self.scripts: list[list[dict[str, Any]] | Exception] = []
        self.calls: list[str] = []
        self.next_rvs: list[int] = []
        self.idle = asyncio.Event()

    async def list(self, kind: Any, namespace: Any = None, **kw: Any) -> dict[str, Any]:  # type: ignore[override]
        self.calls.append("list")
        if self.next_rvs:
            self.rv = self.next_rvs.pop(0)
        return {"metadata": {"resourceVersion": str(self.rv)}, "items": [dict(i) for i in self.items]}

    async def watch(self, kind: Any, namespace: Any = None, **kw: Any) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        self.calls.append(f"watch@{kw['resource_version']}")
        if not self.scripts:
            self.idle.set()
            await asyncio.sleep(3600)
        script = self.scripts.pop(0)
        if isinstance(script, Exception):
            raise script
        for event in script:
            yield event


def recorder(informer: Informer) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    informer.add_handler(
        lambda o: seen.append(("add", o["metadata"]["name"])),
        lambda _o, n: seen.append(("update", n["metadata"]["name"])),
        lambda o: seen.append(("delete", o["metadata"]["name"])),
    )
    return seen


async def run_until_idle(client: ScriptedClient, informer: Informer) -> None:
    client.idle.clear()
    informer.start()
    await asyncio.wait_for(client.idle.wait(), 2)


async def test_gone_error_event_relists_and_delivers_only_the_difference() -> None:
    client = ScriptedClient()
    client.items = [cm("same", 1), cm("changed", 1), cm("gone", 1)]
    informer = Informer(client, CONFIG_MAPS, backoff=Backoff(0.01, 0.01))
    seen = recorder(informer)
    client.scripts = [[{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]]
    await informer.relist()
    assert sorted(seen) == [("add", "changed"), ("add", "gone"), ("add", "same")]
    seen.clear()
    client.items = [cm("same", 1), cm("changed", 5), cm("new", 6)]
    client.rv = 7
    await run_until_idle(client, informer)
    await informer.stop()
    assert sorted(seen) == [("add", "new"), ("delete", "gone"), ("update", "changed")]
    assert client.calls == ["list", "watch@1", "list", "watch@7"]


async def test_http_410_relists_and_connection_errors_resume_the_watch() -> None:
    client = ScriptedClient()
    client.items = [cm("a", 1)]
    informer = Informer(client, CONFIG_MAPS, backoff=Backoff(0.01, 0.01))
    seen = recorder(informer)
    client.scripts = [
        [{"type": "ADDED", "object": cm("b", 2)}],
        OSError("connection reset"),
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}],
        ApiException(status=410, reason="Gone"),
    ]
    client.next_rvs = [1, 10]
    await run_until_idle(client, informer)
    await informer.stop()
    assert client.calls == ["list", "watch@1", "watch@2", "watch@2", "watch@9", "list", "watch@10"]
    assert seen == [("add", "a"), ("add", "b"), ("delete", "b")]  # b was not in the relist


async def test_handler_exception_does_not_stop_the_informer() -> None:
    client = ScriptedClient()
    informer = Informer(client, CONFIG_MAPS)

    def explode(obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(explode)
    seen = recorder(informer)
    client.scripts = [[{"type": "ADDED", "object": cm("a", 2)}, {"type": "ADDED", "object": cm("b", 3)}]]
    await run_until_idle(client, informer)
    assert not informer.crashed
    await informer.stop()
    assert seen == [("add", "a"), ("add", "b")]
    assert informer.resource_version == "3"


async def test_late_handler_gets_the_cache_as_adds_and_resync_redelivers() -> None:
    client = ScriptedClient()
    client.items = [cm("a", 1), cm("b", 1)]
    informer = Informer(client, CONFIG_MAPS, resync_period=0.05)
    await run_until_idle(client, informer)
    seen = recorder(informer)
    assert sorted(seen) == [("add", "a"), ("add", "b")]
    await asyncio.sleep(0.08)
    await informer.stop()
    assert sorted(s for s in seen if s[0] == "update")[:2] == [("update", "a"), ("update", "b")]
