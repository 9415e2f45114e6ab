"""One RequestRecord per request, with the authenticated user, written once: at the end of a
request, or when a watch stream starts (so tests see a running watch without waiting for its end).
The record also names the client as kube-apiserver's audit log does: its source IP, its user agent,
and the time the request arrived (`arrived`, called first by the middleware)."""

from __future__ import annotations

import time

from aiohttp import web

from nodeenv.kubeapi.admission import AdmissionRecord
from nodeenv.kubeapi.auth import RequestRecord, User
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState

USER = web.RequestKey("kubeapi_user", User)
INFO = web.RequestKey("kubeapi_info", RequestInfo)
RECORDED = web.RequestKey("kubeapi_recorded", bool)
RECEIVED = web.RequestKey("kubeapi_received", float)
OBJECT_NAME = web.RequestKey("kubeapi_object_name", str)
"""A create's object name, from its body (set by the create handler)"""
ADMISSION = web.RequestKey("kubeapi_admission", AdmissionRecord)
"""What admission added to the request: warnings, audit annotations (set by handlers.handle)"""


def arrived(request: web.Request) -> None:
    request[RECEIVED] = time.time()


def record(st: ApiState, request: web.Request, status: int, stage: str = "ResponseComplete") -> None:
    if request.get(RECORDED):
        return
    request[RECORDED] = True
    user = request.get(USER)
    i = request.get(INFO) or RequestInfo(verb=request.method.lower(), group="", version="", resource="")
    st.metrics.requests.labels(i.verb, i.resource, str(status)).inc()
    st.recorder.add(
        RequestRecord(
            user=user.name if user else "system:anonymous", groups=user.groups if user else (),
            verb=i.verb, group=i.group, version=i.version, resource=i.resource, subresource=i.subresource,
            namespace=i.namespace, name=i.name, status=status, path=request.path, query=request.query_string,
            user_agent=request.headers.get("User-Agent", ""), source_ip=request.remote or "",
            received=request.get(RECEIVED, 0.0), stage=stage, object_name=request.get(OBJECT_NAME, ""),
            annotations=tuple(sorted(adm.annotations.items())) if (adm := request.get(ADMISSION)) else (),
        )
    )  # fmt: skip
