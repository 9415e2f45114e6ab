"""The aiohttp application: authentication, the request record, injected faults, RBAC (opt-in),
errors as Status bodies, discovery/openapi routes and the resource routes.

The middleware is the only place that turns exceptions into responses: ApiErrors become their
Status; anything else is logged with a traceback and answered 500 InternalError without details.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from nodeenv.kubeapi import audit, discovery, handlers, metricsapi, openapi, openapiv2pb, podstreams
from nodeenv.kubeapi.admissionpolicy import CALLER, Caller
from nodeenv.kubeapi.audit import INFO, USER
from nodeenv.kubeapi.auth import User
from nodeenv.kubeapi.errors import ApiError, InternalError, NotFound, Unauthorized, from_code
from nodeenv.kubeapi.kubeletclient import KubeletClient
from nodeenv.kubeapi.routing import resolve
from nodeenv.kubeapi.state import ApiState
from nodeenv.kubeapi.wire import error_response, respond

log = logging.getLogger(__name__)
STATE = web.AppKey("kubeapi_state", ApiState)
_OPEN = ("/healthz", "/readyz", "/livez")
PUBLIC_INFO = (*_OPEN, "/version")
"""What kube-apiserver gives anonymous users by default (the ClusterRole system:public-info-viewer,
bound to system:unauthenticated); everything else needs a token (/metrics too: system:monitoring)."""
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
H = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _dispatch(request: web.Request, handler: H, st: ApiState) -> web.StreamResponse:
    header = request.headers.get("Authorization")
    user = await st.authenticate(header)
    if user is None and header is None and request.path in PUBLIC_INFO:
        user = ANONYMOUS
    if user is None:
        raise Unauthorized("Unauthorized")
    info = resolve(st.registry, request.method, request.path, request.query)
    request[USER] = user
    if info is not None:
        request[INFO] = info
    if info is not None:
        fault = st.take_fault(info)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if (err := fault.error()) is not None:
                raise err
        if st.authorizer is not None:
            st.authorizer.check(user, info)
        CALLER.set(Caller(user, info))  # for admission (ValidatingAdmissionPolicies) in this request's task
    return await handler(request)


@web.middleware
async def api_middleware(request: web.Request, handler: H) -> web.StreamResponse:
    st = request.app[STATE]
    if request.path in _OPEN:
        return await handler(request)
    audit.arrived(request)
    try:
        resp = await _dispatch(request, handler, st)
    except ApiError as e:
        resp = error_response(e)
    except web.HTTPException as e:  # aiohttp's own refusals, e.g. a body over 3 MiB (413)
        resp = error_response(from_code(e.status, e.reason))
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        resp = error_response(
            InternalError("an error on the server has prevented the request from succeeding")
        )
    audit.record(st, request, resp.status)
    return resp


async def _resource(request: web.Request) -> web.StreamResponse:
    st, info = request.app[STATE], request.get(INFO)
    if info is None:
        return _group_discovery(request, st)
    if info.group == metricsapi.GROUP:
        return await metricsapi.handle(request, st, info)
    return await handlers.handle(request, st, info)


def _group_discovery(request: web.Request, st: ApiState) -> web.Response:
    parts = [p for p in request.path.split("/") if p]
    if parts == ["api"]:
        return respond(discovery.api_versions(request.host))
    if parts == ["apis"]:
        return respond(discovery.group_list(st.registry))
    group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2] if len(parts) > 2 else "")
    if parts[0] == "apis" and len(parts) == 2:
        groups = discovery.group_list(st.registry)["groups"]
        for g in groups:
            if g["name"] == group:
                return respond({"kind": "APIGroup", "apiVersion": "v1", **g})
    body = discovery.resource_list(st.registry, group, version) if version else None
    if body is None:
        raise NotFound("the server could not find the requested resource")
    return respond(body)


async def _version(request: web.Request) -> web.Response:
    return respond(discovery.VERSION)


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[STATE].metrics.render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def _openapi_v2(request: web.Request) -> web.Response:
    registry = request.app[STATE].registry
    if openapiv2pb.wants_protobuf(request.headers.get("Accept", "")):  # what kubectl asks for
        return web.Response(body=openapiv2pb.document(registry), content_type=openapiv2pb.RETURNED)
    return respond(openapi.v2(registry))


async def _openapi_v3_index(request: web.Request) -> web.Response:
    return respond(openapi.v3_index(request.app[STATE].registry))


async def _openapi_v3(request: web.Request) -> web.Response:
    doc = openapi.v3_group_version(request.app[STATE].registry, request.match_info["gv"])
    if doc is None:
        raise NotFound("the server could not find the requested resource")
    return respond(doc)


def make_app(st: ApiState) -> web.Application:
    app = web.Application(middlewares=[api_middleware], client_max_size=3 * 1024 * 1024)
    app[STATE] = st
    app[podstreams.KUBELET] = KubeletClient(st.config.kubelet)

    async def close_kubelet_client(app: web.Application) -> None:
        await app[podstreams.KUBELET].close()

    app.on_cleanup.append(close_kubelet_client)
    metricsapi.install(app, st, app[podstreams.KUBELET])
    app.router.add_get("/version", _version)
    for path in _OPEN:
        app.router.add_get(path, _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/openapi/v2", _openapi_v2)
    app.router.add_get("/openapi/v3", _openapi_v3_index)
    app.router.add_get("/openapi/v3/{gv:.+}", _openapi_v3)
    for prefix in ("/api", "/apis"):
        app.router.add_route("*", prefix, _resource)
        app.router.add_route("*", prefix + "/{tail:.*}", _resource)
    return app
