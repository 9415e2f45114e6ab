"""Helpers of the machinery integration tests: clients on the API double, waiting, recording."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from controllers.machinery import CONFIG_MAPS, NAMESPACES, KubeClient, KubeObject
from controllers.machinery.kubeconfig import load_api_client


@asynccontextmanager
async def client_for(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    """A KubeClient on kubernetes_asyncio's ApiClient, configured from a kubeconfig file."""
    api = await load_api_client(kubeconfig, in_cluster=False)
    async with api:
        yield KubeClient(api)


async def eventually(check: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def ensure_namespace(client: KubeClient, name: str) -> None:
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def config_map(namespace: str, name: str, **data: str) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


async def put_config_map(client: KubeClient, namespace: str, name: str, **data: str) -> KubeObject:
    """Create or overwrite (read-modify-write) a ConfigMap's data."""
    try:
        current = await client.get(CONFIG_MAPS, namespace, name)
    except Exception:
        return await client.create(CONFIG_MAPS, config_map(namespace, name, **data))
    return await client.replace(CONFIG_MAPS, {**current, "data": data})


class Recorder:
    """Informer handler recording what it was told, as (type, key, resourceVersion)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    @staticmethod
    def _id(obj: KubeObject) -> tuple[str, str]:
        meta = obj["metadata"]
        return f"{meta.get('namespace')}/{meta['name']}", str(meta.get("resourceVersion"))

    def on_add(self, obj: KubeObject) -> None:
        self.events.append(("add", *self._id(obj)))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self.events.append(("update", *self._id(new)))

    def on_delete(self, obj: KubeObject) -> None:
        self.events.append(("delete", *self._id(obj)))

    def of(self, type_: str) -> list[str]:
        return [key for t, key, _ in self.events if t == type_]

    def clear(self) -> None:
        self.events.clear()
