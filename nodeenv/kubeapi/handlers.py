"""Resource requests: one function per verb, from a resolved RequestInfo to a response.

Responses as kube-apiserver sends them: create 201 with the object; get/update/patch 200;
delete 200 with the deleted object (Pods, Services, Namespaces, ServiceAccounts: their stores set
ReturnDeletedObject) or a
`Status` of `Success` (other kinds), and 200 with the object while finalizers hold it; lists are
`<Kind>List` with metadata.resourceVersion (and continue / remainingItemCount); `Table` when the
client asks for `as=Table` (kubectl get).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from nodeenv.kubeapi import admission, apply, binding, podstreams, reviews, scale, strict, tables, watchstream
from nodeenv.kubeapi.audit import ADMISSION, OBJECT_NAME, USER
from nodeenv.kubeapi.errors import NotFound, UnsupportedMediaType, not_found
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.paging import exact_rv
from nodeenv.kubeapi.patches import APPLY, apply_patch, check_patch_type
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState
from nodeenv.kubeapi.wire import (
    delete_options,
    dry_run,
    int_param,
    list_body,
    parse_body,
    respond,
    selector,
    success_status,
)

Handler = Callable[[web.Request, ApiState, RequestInfo, Kind], Awaitable[web.StreamResponse]]
WARNINGS = web.RequestKey("kubeapi_warnings", list[str])
_RETURNS_OBJECT = ("Pod", "Service", "Namespace", "ServiceAccount")  # ReturnDeletedObject: true


def _content_type(request: web.Request) -> str:
    """The Content-Type header as sent ("" when absent; aiohttp's `content_type` would say
    application/octet-stream)."""
    return request.headers.get("Content-Type", "")


async def _body(request: web.Request) -> Any:
    return parse_body(await request.read(), _content_type(request))


def _respond_obj(
    request: web.Request, st: ApiState, kind: Kind, obj: dict[str, Any], status: int = 200
) -> web.Response:
    obj = st.views.present(kind, obj)
    if tables.wants_table(request.headers.get("Accept", "")):
        resp = respond(tables.table(kind, [obj], obj["metadata"]["resourceVersion"], request.query), status)
    else:
        resp = respond(obj, status)
    admitted = request[ADMISSION].warnings if ADMISSION in request else []
    for text in [*request.get(WARNINGS, ()), *admitted]:
        resp.headers.add("Warning", strict.warning_header(text))
    return resp


async def get(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    obj = st.resources.get(st.views.storage(kind), info.namespace, info.name)
    return _respond_obj(request, st, kind, obj)


async def list_(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    q = request.query
    sel = selector(q, kind)
    at = exact_rv(st.store, q.get("resourceVersion"), q.get("resourceVersionMatch"))
    limit = int_param(q, "limit", 0) or 0
    page = st.resources.list_page(
        st.views.storage(kind), info.namespace or None, sel, limit, q.get("continue"), at
    )
    items = [st.views.present(kind, o) for o in page.items] if st.views.converted(kind) else page.items
    if tables.wants_table(request.headers.get("Accept", "")):
        return respond(tables.table(kind, items, page.resource_version, q, page.continue_token))
    return respond(list_body(kind, items, page.resource_version, page.continue_token, page.remaining))


async def create(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    body = await _body(request)
    if info.subresource == "token":
        st.resources.get(kind, info.namespace, info.name)  # 404 for an unknown service account
        return respond(reviews.token_request(body, info.namespace, info.name, st.tokens), 201)
    if info.subresource == "binding":
        return respond(binding.bind(st.resources, kind, info.namespace, info.name, body), 201)
    if kind.virtual:
        return respond(reviews.review(kind, body, request[USER], st.authorizer), 201)
    request[WARNINGS] = strict.check(kind, body, request.query)
    name = (body.get("metadata") or {}).get("name") if isinstance(body, dict) else None
    if isinstance(name, str):
        request[OBJECT_NAME] = name
    skind, stored = st.views.storage(kind), st.views.to_storage(kind, body)
    obj = st.resources.create(skind, info.namespace, stored, dry_run=dry_run(request.query))
    return _respond_obj(request, st, kind, obj, 201)


async def update(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    body = await _body(request)
    request[WARNINGS] = strict.check(kind, body, request.query)
    body = st.views.to_storage(kind, body)
    obj = st.resources.update(
        st.views.storage(kind), info.namespace, info.name, body,
        subresource=info.subresource, dry_run=dry_run(request.query),
    )  # fmt: skip
    return _respond_obj(request, st, kind, obj)


async def patch(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    ctype, q = _content_type(request).split(";")[0].strip().lower(), request.query
    check_patch_type(ctype, kind)
    body = await _body(request)
    if ctype == APPLY:
        if st.views.converted(kind):
            raise UnsupportedMediaType(f"the API double applies {kind.qualified} only via its stored group")
        obj, created = apply.server_side_apply(st.resources, kind, info, body, q)
        return _respond_obj(request, st, kind, obj, 201 if created else 200)
    skind = st.views.storage(kind)
    current = st.resources.get(skind, info.namespace, info.name)
    patched = apply_patch(ctype, st.views.present(kind, current), body, kind.kind)
    request[WARNINGS] = strict.check(kind, patched, q)
    patched = st.views.to_storage(kind, patched)
    meta = patched.get("metadata")
    if not isinstance(meta, dict):
        patched["metadata"] = meta = {}
    meta.setdefault("name", info.name)
    if "resourceVersion" not in meta or meta["resourceVersion"] is None:
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
    obj = st.resources.update(
        skind, info.namespace, info.name, patched, subresource=info.subresource, dry_run=dry_run(q)
    )
    return _respond_obj(request, st, kind, obj)


async def delete(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    raw = await request.read()
    body = parse_body(raw, "application/json") if raw.strip() else None
    opts = delete_options(request.query, body)
    obj, removed = st.resources.delete(st.views.storage(kind), info.namespace, info.name, opts)
    if removed and kind.kind not in _RETURNS_OBJECT:
        return respond(success_status(kind, obj))
    return respond(st.views.present(kind, obj))


async def delete_collection(
    request: web.Request, st: ApiState, info: RequestInfo, kind: Kind
) -> web.StreamResponse:
    raw = await request.read()
    body = parse_body(raw, "application/json") if raw.strip() else None
    sel = selector(request.query, kind)
    items = st.resources.delete_collection(
        st.views.storage(kind), info.namespace or None, sel, delete_options(request.query, body)
    )
    shown = [st.views.present(kind, o) for o in items]
    return respond(list_body(kind, shown, str(st.store.rv), None, None))


async def watch(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    return await watchstream.serve(request, st, info, kind)


VERBS: dict[str, Handler] = {
    "get": get,
    "list": list_,
    "watch": watch,
    "create": create,
    "update": update,
    "patch": patch,
    "delete": delete,
    "deletecollection": delete_collection,
}

_NEEDS_NAMESPACE = ("get", "create", "update", "patch", "delete")


async def handle(request: web.Request, st: ApiState, info: RequestInfo) -> web.StreamResponse:
    kind = info.kind
    if kind is None:
        raise NotFound("the server could not find the requested resource")
    if kind.namespaced and not info.namespace and info.verb in _NEEDS_NAMESPACE:
        raise (
            not_found(kind, info.name)
            if info.name
            else NotFound("the server could not find the requested resource")
        )
    if info.subresource in podstreams.SUBRESOURCES:
        return await podstreams.handle(request, st, info)
    request[ADMISSION] = record = admission.AdmissionRecord(
        user=request[USER].name, subresource=info.subresource
    )
    with admission.serving(record):
        if info.subresource == "scale":
            return await scale.VERBS[info.verb](request, st, info, kind)
        return await VERBS[info.verb](request, st, info, kind)
