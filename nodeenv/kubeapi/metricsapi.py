"""The Metrics API (metrics.k8s.io/v1beta1), as k3s serves it through metrics-server's APIService:
NodeMetrics (`nodes`, cluster-scoped) and PodMetrics (`pods`, namespaced), get and list, with
label selectors on the Node's or Pod's labels; what `kubectl top nodes` and `kubectl top pods`
read. The usage comes from metricsserver.py, scraping the nodes' kubelet APIs (HTTPS, the API
server's kubelet client certificate) in the background while the app runs. A Pod or Node without a
window of usage yet is absent from lists and 404 on get, as metrics-server answers
(`podmetrics.metrics.k8s.io "default/web" not found`; `pods "default/x" not found` for a Pod that
does not exist).

Registered in the double's kinds (discovery, RBAC: get/list on `nodes.metrics.k8s.io` and
`pods.metrics.k8s.io`), answered here rather than from the store (`handle`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from nodeenv.kubeapi import metricsserver
from nodeenv.kubeapi.errors import MethodNotAllowed, not_found
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.kubeletclient import KubeletClient
from nodeenv.kubeapi.metricsserver import MetricsServer, Usage
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.selectors import labels_match, parse_labels
from nodeenv.kubeapi.state import ApiState
from nodeenv.kubeapi.wire import respond

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
NODE_METRICS = Kind(group=GROUP, version=VERSION, kind="NodeMetrics", plural="nodes", namespaced=False,
                    verbs=("get", "list"))  # fmt: skip
POD_METRICS = Kind(group=GROUP, version=VERSION, kind="PodMetrics", plural="pods", namespaced=True,
                   verbs=("get", "list"))  # fmt: skip
_MISSING = {  # how metrics-server names what it has no usage for, in its 404s
    "nodes": Kind(group=GROUP, version=VERSION, kind="NodeMetrics", plural="nodemetrics", namespaced=False),
    "pods": Kind(group=GROUP, version=VERSION, kind="PodMetrics", plural="podmetrics", namespaced=True),
}
SERVER = web.AppKey("metrics_server", MetricsServer)
Obj = dict[str, Any]


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage(u: Usage) -> Obj:
    return {"cpu": f"{u.nanocores}n", "memory": f"{u.memory_bytes // 1024}Ki"}


def _meta(obj: Obj, at: float) -> Obj:
    m = obj["metadata"]
    out = {"name": m["name"], "creationTimestamp": _stamp(at), "labels": m.get("labels") or {}}
    if m.get("namespace"):
        out["namespace"] = m["namespace"]
    return out


def node_metrics(node: Obj, u: Usage) -> Obj:
    return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(node, u.at),
            "timestamp": _stamp(u.at), "window": f"{u.window:.3f}s", "usage": _usage(u)}  # fmt: skip


def pod_metrics(pod: Obj, server: MetricsServer) -> Obj | None:
    m = pod["metadata"]
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    found = [(n, server.containers.get((m["namespace"], m["name"], n))) for n in names]
    containers = [(n, u) for n, u in found if u is not None]
    if not containers:
        return None
    newest = max(containers, key=lambda c: c[1].at)[1]
    return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(pod, newest.at),
            "timestamp": _stamp(newest.at), "window": f"{newest.window:.3f}s",
            "containers": [{"name": n, "usage": _usage(u)} for n, u in containers]}  # fmt: skip


async def handle(request: web.Request, st: ApiState, info: RequestInfo) -> web.StreamResponse:
    if info.verb not in ("get", "list"):
        raise MethodNotAllowed("the server does not allow this method on the requested resource")
    server = request.app[SERVER]
    core = st.registry.lookup("", "v1", info.resource)
    assert core is not None
    kind = NODE_METRICS if info.resource == "nodes" else POD_METRICS
    selector = parse_labels(request.query.get("labelSelector"))
    objs = [o for o in st.store.items(core, info.namespace or None) if labels_match(selector, o)]
    if info.name:
        objs = [o for o in objs if o["metadata"]["name"] == info.name]
    items = []
    for o in objs:
        if kind is NODE_METRICS:
            u = server.nodes.get(o["metadata"]["name"])
            item = node_metrics(o, u) if u is not None else None
        else:
            item = pod_metrics(o, server)
        if item is not None:
            items.append(item)
    if info.name:
        named = f"{info.namespace}/{info.name}" if info.namespace else info.name
        if not objs:
            raise not_found(core, named)
        if not items:
            raise not_found(_MISSING[info.resource], named)
        return respond(items[0])
    return respond({"kind": f"{kind.kind}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {},
                    "items": items})  # fmt: skip


def apiservice() -> Obj:
    """`v1beta1.metrics.k8s.io` as k3s's metrics-server manifest registers it (SERVICE
    kube-system/metrics-server in `kubectl get apiservices`), Available."""
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{VERSION}.{GROUP}", "labels": {"k8s-app": "metrics-server"}},
            "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"name": "metrics-server", "namespace": "kube-system", "port": 443}},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Passed",
                                       "message": "all checks passed",
                                       "lastTransitionTime": _stamp(time.time())}]}}  # fmt: skip


def install(app: web.Application, st: ApiState, client: KubeletClient) -> None:
    """The kinds and their APIService registered, and metrics-server's scrape loop running with the
    app, reaching the kubelets with the API server's `client`."""
    st.registry.register([NODE_METRICS, POD_METRICS])
    services = st.registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
    if services is not None and st.store.get(services, "", f"{VERSION}.{GROUP}") is None:
        st.resources.create(services, "", apiservice())
    server = app[SERVER] = MetricsServer(client)

    async def scraping(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                node_kind = st.registry.lookup("", "v1", "nodes")
                assert node_kind is not None
                await server.scrape(metricsserver.scraped(list(st.store.items(node_kind))))
                await asyncio.sleep(metricsserver.RESOLUTION)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(scraping)
