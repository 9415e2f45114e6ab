"""Plain-dict API calls on kubernetes_asyncio's ApiClient (the only module that calls `call_api`).

The typed API classes turn objects into models; the informers, the leader elector and the
event recorder want the JSON exactly as served, for any kind in `kinds.py`, so they go through
the same ApiClient (its configuration, TLS and bearer-token auth) with `_preload_content=False`.
Errors are raised as the client's own `ApiException` (status, reason, body = the Status JSON),
the same type its typed methods raise, so callers catch one thing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery.kinds import Kind
from controllers.machinery.store import KubeObject

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

Query = list[tuple[str, str]]


def api_error(status: int, body: bytes | str, reason: str | None = None) -> ApiException:
    """An ApiException as the typed methods raise it, with the Status body kept."""
    exc = ApiException(status=status, reason=reason or _status_reason(body))
    exc.body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return exc


def _status_reason(body: bytes | str) -> str:
    try:
        status = json.loads(body)
        return f"{status.get('reason', '')}: {status.get('message', '')}"
    except (ValueError, AttributeError):
        return ""


def _query(**params: str | int | bool | None) -> Query:
    out: Query = []
    for name, value in params.items():
        if value is None:
            continue
        out.append((name, ("true" if value else "false") if isinstance(value, bool) else str(value)))
    return out


class KubeClient:
    """get/list/watch/create/replace/patch/delete of plain JSON objects of any Kind."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> KubeObject:
        resp = await self._send(method, path, query=query, body=body, content_type=content_type,
                                timeout=timeout)  # fmt: skip
        try:
            data = await resp.read()
        finally:
            resp.release()
        if resp.status >= 400:
            raise api_error(resp.status, data, resp.reason)
        return dict(json.loads(data)) if data else {}

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None,
        body: object,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        resp: aiohttp.ClientResponse = await self.api.call_api(
            path,
            method,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return resp

    async def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject:
        return await self.request("GET", kind.object_path(namespace, name))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
    ) -> KubeObject:
        """One page of a list (`metadata.continue` set when there are more)."""
        query = _query(labelSelector=label_selector, fieldSelector=field_selector, limit=limit,
                       resourceVersion=resource_version)  # fmt: skip
        query += _query(**{"continue": continue_})
        return await self.request("GET", kind.collection_path(namespace), query=query)

    async def create(self, kind: Kind, obj: KubeObject, namespace: str | None = None) -> KubeObject:
        ns = namespace if namespace is not None else obj.get("metadata", {}).get("namespace")
        return await self.request("POST", kind.collection_path(ns), body=obj)

    async def replace(self, kind: Kind, obj: KubeObject, subresource: str | None = None) -> KubeObject:
        """PUT; carries metadata.resourceVersion, so a stale object gets 409 Conflict."""
        meta = obj["metadata"]
        return await self.request("PUT", kind.object_path(meta.get("namespace"), meta["name"], subresource),
                                  body=obj)  # fmt: skip

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: object,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> KubeObject:
        """PATCH with `patch_type` merge | strategic | json | apply (server-side apply)."""
        query = _query(fieldManager=field_manager, force=force)
        return await self.request("PATCH", kind.object_path(namespace, name, subresource), query=query,
                                  body=patch, content_type=PATCH_TYPES[patch_type])  # fmt: skip

    async def delete(
        self, kind: Kind, namespace: str | None, name: str, *, preconditions: KubeObject | None = None
    ) -> KubeObject:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions}
        return await self.request("DELETE", kind.object_path(namespace, name),
                                  body=body if preconditions else None)  # fmt: skip

    async def watch(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[KubeObject]:
        """Watch events ({"type", "object"}) from `resource_version` until the server ends the stream.

        An HTTP error (e.g. 410 Gone) raises ApiException; ERROR events are yielded as they come.
        """
        query = _query(watch=True, resourceVersion=resource_version, allowWatchBookmarks=bookmarks,
                       timeoutSeconds=timeout_seconds, labelSelector=label_selector,
                       fieldSelector=field_selector)  # fmt: skip
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_connect=10)
        resp = await self._send("GET", kind.collection_path(namespace), query=query, body=None,
                                content_type="application/json", timeout=timeout)  # fmt: skip
        try:
            if resp.status >= 400:
                raise api_error(resp.status, await resp.read(), resp.reason)
            async for line in _lines(resp.content):
                yield dict(json.loads(line))
        finally:
            resp.close()


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Newline-delimited JSON of any line length (StreamReader.readline caps lines at 64 KiB)."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


__all__ = ["PATCH_TYPES", "ApiException", "KubeClient", "api_error"]
