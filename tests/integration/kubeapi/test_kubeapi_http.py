"""Wire details no typed client shows: Status bodies and codes, the watch stream's framing, watch-list
bookmarks, legacy watch paths, discovery documents, authentication."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from nodeenv.kubeapi.auth import ADMIN
from tests.kubeapi_fixture import KubeApiHandle


class Http:
    def __init__(self, api: KubeApiHandle, session: aiohttp.ClientSession) -> None:
        self.api, self.s = api, session
        self.ssl = ssl.create_default_context(cafile=str(api.ca))
        self.auth = {"Authorization": f"Bearer {api.state.tokens.token_for(ADMIN)}"}

    async def call(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        data = json.dumps(body) if body is not None else None
        hdrs = {**self.auth, "Content-Type": "application/json", **headers}
        async with self.s.request(method, self.api.url + path, data=data, headers=hdrs, ssl=self.ssl) as r:
            raw = await r.read()
            return r.status, json.loads(raw) if raw and r.content_type == "application/json" else raw

    async def stream(self, path: str, n: int, **headers: str) -> list[dict[str, Any]]:
        out = []
        hdrs = {**self.auth, **headers}
        async with self.s.get(self.api.url + path, headers=hdrs, ssl=self.ssl) as r:
            assert r.status == 200
            async for line in r.content:
                out.append(json.loads(line))
                if len(out) == n:
                    break
        return out


@pytest.fixture
async def http(kube_api: KubeApiHandle) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as s:
        yield Http(kube_api, s)


async def test_status_bodies(http: Http) -> None:
    code, body = await http.call("GET", "/api/v1/namespaces/default/configmaps/nope")
    assert (code, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert body["details"] == {"name": "nope", "kind": "configmaps"}
    assert body["message"] == 'configmaps "nope" not found' and body["status"] == "Failure"
    code, body = await http.call("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x")
    assert body["message"] == 'leases.coordination.k8s.io "x" not found'
    assert (await http.call("GET", "/api/v1/nothings"))[0] == 404
    code, body = await http.call("POST", "/api/v1/namespaces/default/configmaps/x", {})
    assert (code, body["reason"]) == (405, "MethodNotAllowed")
    code, body = await http.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {}})
    assert (code, body["reason"], body["details"]["causes"][0]["field"]) == (422, "Invalid", "metadata.name")
    code, body = await http.call("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx")
    assert (code, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        "field label not supported: spec.bogus",
    )
    code, body = await http.call("GET", "/api/v1/namespaces", Authorization="Bearer wrong")
    assert (code, body["reason"]) == (401, "Unauthorized")


async def test_discovery_documents(http: Http) -> None:
    _, v1 = await http.call("GET", "/api/v1")
    svc = next(r for r in v1["resources"] if r["name"] == "services")
    assert svc["shortNames"] == ["svc"] and svc["namespaced"] and "watch" in svc["verbs"]
    assert any(r["name"] == "services/status" for r in v1["resources"])
    _, groups = await http.call("GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert {"discovery.k8s.io", "coordination.k8s.io", "rbac.authorization.k8s.io"} <= set(names)
    _, version = await http.call("GET", "/version")
    assert (version["major"], version["minor"]) == ("1", "32")
    _, index = await http.call("GET", "/openapi/v3")
    assert "api/v1" in index["paths"]
    _, doc = await http.call("GET", index["paths"]["api/v1"]["serverRelativeURL"])
    ports = doc["components"]["schemas"]["io.k8s.api.core.v1.Service"]["properties"]["spec"]["properties"][
        "ports"
    ]
    assert ports["x-kubernetes-patch-merge-key"] == "port"


async def test_watch_framing_legacy_path_and_410_error_event(http: Http, kube_api: KubeApiHandle) -> None:
    rv = kube_api.resource_version
    await http.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    events = await http.stream(f"/api/v1/watch/namespaces/default/configmaps?resourceVersion={rv}", 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    kube_api.compact()
    (err,) = await http.stream(f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}", 1)
    assert err["type"] == "ERROR"
    assert (err["object"]["code"], err["object"]["reason"]) == (410, "Expired")
    assert err["object"]["message"].startswith(f"too old resource version: {rv} (")


async def test_watch_list_initial_events_end_with_annotated_bookmark(http: Http) -> None:
    await http.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    q = "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    added, bookmark = await http.stream(f"/api/v1/namespaces/default/configmaps?{q}", 2)
    assert added["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_table_watch_rows(http: Http) -> None:
    table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    (ev,) = await http.stream(
        "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Ddefault", 1, Accept=table
    )
    assert ev["object"]["kind"] == "Table" and ev["object"]["rows"][0]["cells"][:2] == ["default", "Active"]


async def test_update_name_mismatch_and_deletecollection(http: Http, kube_api: KubeApiHandle) -> None:
    await http.call(
        "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a", "labels": {"x": "1"}}}
    )
    await http.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "b"}})
    code, body = await http.call(
        "PUT", "/api/v1/namespaces/default/configmaps/a", {"metadata": {"name": "b"}}
    )
    assert code == 400 and "does not match the name on the URL" in body["message"]
    code, body = await http.call("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=x%3D1")
    assert code == 200 and [o["metadata"]["name"] for o in body["items"]] == ["a"]
    assert [o["metadata"]["name"] for o in kube_api.objects("configmaps", "default")] == ["b"]


async def test_too_large_resource_version_is_504(http: Http, kube_api: KubeApiHandle) -> None:
    future = kube_api.resource_version + 100
    for path in (f"/api/v1/configmaps?resourceVersion={future}",
                 f"/api/v1/configmaps?watch=1&resourceVersion={future}"):  # fmt: skip
        code, body = await http.call("GET", path)
        assert (code, body["reason"]) == (504, "Timeout") and "Too large resource version" in body["message"]


async def test_oversized_body_and_injected_codes_are_status(http: Http, kube_api: KubeApiHandle) -> None:
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * (4 * 1024 * 1024)}}
    code, body = await http.call("POST", "/api/v1/namespaces/default/configmaps", big)
    assert (code, body["kind"], body["reason"]) == (413, "Status", "RequestEntityTooLarge")
    kube_api.set_fault(verb="get", resource="configmaps", code=429, times=1)
    code, body = await http.call("GET", "/api/v1/namespaces/default/configmaps/x")
    assert (code, body["reason"]) == (429, "TooManyRequests")


async def test_watch_ends_after_timeout_seconds(http: Http) -> None:
    url = f"{http.api.url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1&timeoutSeconds=1"
    async with http.s.get(url, headers=http.auth, ssl=http.ssl) as r:
        lines = [line async for line in r.content]  # the server ends the stream; no client timeout
    assert lines == []


async def test_bookmarks_also_on_a_busy_watch_and_never_ahead_of_events(
    http: Http, kube_api: KubeApiHandle
) -> None:
    async def writer() -> None:
        for i in range(30):
            await http.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
            await asyncio.sleep(0.08)

    task = asyncio.create_task(writer())
    rv = kube_api.resource_version
    events = await http.stream(
        f"/api/v1/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={rv}", 25
    )
    await task
    kinds = [e["type"] for e in events]
    assert "BOOKMARK" in kinds and kinds.count("ADDED") >= 20
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    for i, e in enumerate(events):
        if e["type"] == "BOOKMARK":  # every event after a bookmark is newer than it
            assert all(v > versions[i] for v in versions[i + 1 :] if v != versions[i])
            assert all(v <= versions[i] for v in versions[:i])


async def test_unknown_fields_warn_by_default(http: Http) -> None:
    body = json.dumps({"metadata": {"name": "w"}, "dta": {"k": "v"}})
    url = f"{http.api.url}/api/v1/namespaces/default/configmaps"
    hdrs = {**http.auth, "Content-Type": "application/json"}
    async with http.s.post(url, data=body, headers=hdrs, ssl=http.ssl) as r:
        assert r.status == 201
        assert r.headers.getall("Warning") == ['299 - "unknown field \\"dta\\""']
    async with http.s.post(url + "?fieldValidation=Strict", data=body.replace('"w"', '"s"'), headers=hdrs,
                           ssl=http.ssl) as r:  # fmt: skip
        assert r.status == 400


async def _send_bare(http: Http, method: str, path: str, body: Any) -> tuple[int, Any]:
    """A request with no Content-Type header at all (aiohttp would add one)."""
    async with http.s.request(method, http.api.url + path, data=json.dumps(body).encode(), headers=http.auth,
                              ssl=http.ssl, skip_auto_headers=("Content-Type",)) as r:  # fmt: skip
        assert "Content-Type" not in r.request_info.headers
        return r.status, await r.json()


async def test_missing_content_type_is_json_on_create_and_update_but_not_patch(http: Http) -> None:
    """kube-apiserver's input negotiation takes the first media type (JSON) for a create or update
    without Content-Type; its patch handler has no default and answers 415."""
    path = "/api/v1/namespaces/default/configmaps"
    code, cm = await _send_bare(http, "POST", path, {"metadata": {"name": "bare"}, "data": {"a": "1"}})
    assert (code, cm["data"]) == (201, {"a": "1"})
    code, cm = await _send_bare(
        http, "PUT", f"{path}/bare", {"metadata": {"name": "bare"}, "data": {"a": "2"}}
    )
    assert (code, cm["data"]) == (200, {"a": "2"})
    code, st = await _send_bare(http, "PATCH", f"{path}/bare", {"data": {"a": "3"}})
    assert (code, st["reason"]) == (415, "UnsupportedMediaType")
    assert st["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
        "application/apply-patch+yaml"
    )
    code, st = await http.call("POST", path, {"metadata": {"name": "x"}}, **{"Content-Type": "text/plain"})
    assert (code, st["reason"]) == (415, "UnsupportedMediaType")


async def test_discovery_serves_the_workload_storage_and_extension_groups(http: Http) -> None:
    _, groups = await http.call("GET", "/apis")
    by_name = {g["name"]: g for g in groups["groups"]}
    assert {"apps", "batch", "storage.k8s.io", "apiextensions.k8s.io"} <= set(by_name)
    storage = by_name["storage.k8s.io"]
    assert [v["version"] for v in storage["versions"]] == ["v1", "v1beta1"]
    assert storage["preferredVersion"]["version"] == "v1"
    _, apps = await http.call("GET", "/apis/apps/v1")
    ds = next(r for r in apps["resources"] if r["name"] == "daemonsets")
    assert ds["shortNames"] == ["ds"] and ds["categories"] == ["all"] and ds["kind"] == "DaemonSet"
    assert any(r["name"] == "deployments/status" for r in apps["resources"])
    _, beta = await http.call("GET", "/apis/storage.k8s.io/v1beta1")
    assert [r["name"] for r in beta["resources"]] == ["volumeattributesclasses"]
    _, index = await http.call("GET", "/openapi/v3")
    assert {"apis/apps/v1", "apis/batch/v1", "apis/storage.k8s.io/v1", "apis/storage.k8s.io/v1beta1",
            "apis/apiextensions.k8s.io/v1"} <= set(index["paths"])  # fmt: skip
    _, doc = await http.call("GET", index["paths"]["apis/apps/v1"]["serverRelativeURL"])
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "DaemonSet"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
