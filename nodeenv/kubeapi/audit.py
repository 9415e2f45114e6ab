"""One RequestRecord per request, with the authenticated user, written once: at the end of a
request, or when a watch stream starts (so tests see a running watch without waiting for its end)."""

from __future__ import annotations

from aiohttp import web

from nodeenv.kubeapi.auth import RequestRecord, User
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState

USER = web.RequestKey("kubeapi_user", User)
INFO = web.RequestKey("kubeapi_info", RequestInfo)
RECORDED = web.RequestKey("kubeapi_recorded", bool)


def record(st: ApiState, request: web.Request, status: int) -> None:
    if request.get(RECORDED):
        return
    request[RECORDED] = True
    user = request.get(USER)
    i = request.get(INFO) or RequestInfo(verb=request.method.lower(), group="", version="", resource="")
    st.metrics.requests.labels(i.verb, i.resource, str(status)).inc()
    st.recorder.add(
        RequestRecord(
            user=user.name if user else "system:anonymous",
            verb=i.verb, group=i.group, version=i.version, resource=i.resource, subresource=i.subresource,
            namespace=i.namespace, name=i.name, status=status, path=request.path, query=request.query_string,
        )
    )  # fmt: skip
