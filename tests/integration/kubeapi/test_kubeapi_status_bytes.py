"""Error Status bodies byte for byte as kube-apiserver writes them: Go's json.Encoder output of
metav1.Status (field order kind, apiVersion, metadata {}, status, message, reason, details, code;
`<`, `>` and `&` escaped as \\u003c...; a final newline), read off the wire with aiohttp."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest

from nodeenv.kubeapi.auth import ADMIN
from nodeenv.kubeapi.state import ApiConfig
from tests.kubeapi_fixture import KubeApiHandle


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, enforce_rbac=True)


class Raw:
    def __init__(self, api: KubeApiHandle, session: aiohttp.ClientSession) -> None:
        self.api, self.s = api, session
        self.ssl = ssl.create_default_context(cafile=str(api.ca))

    async def call(self, method: str, path: str, body: object = None, user: str = ADMIN,
                   token: str | None = None) -> tuple[int, bytes]:  # fmt: skip
        bearer = token if token is not None else self.api.state.tokens.token_for(user)
        headers = {"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"}
        data = json.dumps(body) if body is not None else None
        async with self.s.request(method, self.api.url + path, data=data, headers=headers, ssl=self.ssl) as r:
            return r.status, await r.read()


@pytest.fixture
async def raw(kube_api: KubeApiHandle) -> AsyncIterator[Raw]:
    async with aiohttp.ClientSession() as s:
        yield Raw(kube_api, s)


CM = "/api/v1/namespaces/default/configmaps"


async def test_not_found_and_already_exists(raw: Raw) -> None:
    assert await raw.call("GET", f"{CM}/nope") == (404, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
        b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n'))  # fmt: skip
    assert (await raw.call("POST", CM, {"metadata": {"name": "c"}}))[0] == 201
    assert await raw.call("POST", CM, {"metadata": {"name": "c"}}) == (409, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"c\\" already exists","reason":"AlreadyExists",'
        b'"details":{"name":"c","kind":"configmaps"},"code":409}\n'))  # fmt: skip


async def test_conflict_and_invalid(raw: Raw) -> None:
    await raw.call("POST", CM, {"metadata": {"name": "c"}})
    stale = {"metadata": {"name": "c", "resourceVersion": "1"}, "data": {"k": "v"}}
    assert await raw.call("PUT", f"{CM}/c", stale) == (409, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Operation cannot be fulfilled on configmaps \\"c\\": the object has been modified; '
        b'please apply your changes to the latest version and try again","reason":"Conflict",'
        b'"details":{"name":"c","kind":"configmaps"},"code":409}\n'))  # fmt: skip
    long = "x" * 64
    bad = {"metadata": {"name": "d", "labels": {"a": long}}}
    msg = f'Invalid value: \\"{long}\\": must be no more than 63 characters'.encode()
    assert await raw.call("POST", CM, bad) == (422, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"ConfigMap \\"d\\" is invalid: metadata.labels: ' + msg + b'","reason":"Invalid",'
        b'"details":{"name":"d","kind":"ConfigMap","causes":[{"reason":"FieldValueInvalid",'
        b'"message":"' + msg + b'","field":"metadata.labels"}]},"code":422}\n'))  # fmt: skip


async def test_forbidden_and_unauthorized(raw: Raw) -> None:
    assert await raw.call("GET", CM, user="alice") == (403, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps is forbidden: User \\"alice\\" cannot list resource \\"configmaps\\" '
        b'in API group \\"\\" in the namespace \\"default\\"","reason":"Forbidden",'
        b'"details":{"kind":"configmaps"},"code":403}\n'))  # fmt: skip
    assert await raw.call("GET", CM, token="not-a-token") == (401, (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized",'
        b'"reason":"Unauthorized","code":401}\n'))  # fmt: skip


async def test_html_characters_escaped_as_go_does(raw: Raw) -> None:
    """Go's encoder escapes <, > and & in strings (json.Encoder's default SetEscapeHTML(true))."""
    code, body = await raw.call("POST", CM, {"metadata": {"name": "e"}, "data": {"k": "<a&b>"}})
    assert code == 201 and b'"k":"\\u003ca\\u0026b\\u003e"' in body and body.endswith(b"}\n")
