"""pods/log, pods/exec, pods/attach and pods/portforward: kube-apiserver's checks (the container
named must be the pod's -- init containers included --, the pod must have a node: both 400
BadRequest with kube-apiserver's messages), then the node's kubelet API (kubeletclient.py):

- log: the kubelet's stream passed on as it comes; a kubelet error (400 for a container waiting
  to start or with no previous instance) becomes a Status of its code with the kubelet's text,
  as kube-apiserver's response checker makes it;
- exec/attach/portforward over WebSocket (what kubectl 1.32 sends first: `v5.channel.k8s.io`, or
  `SPDY/3.1+portforward.k8s.io`): the connection to the kubelet is made with the client's
  subprotocols and the messages relayed both ways, unchanged; a refusal of the kubelet is passed
  on with its code and text, as kube-apiserver's upgrade-aware proxy passes a non-101 answer on.
  A GET upgrade is authorized as `get` by the usual RBAC check and, as kube-apiserver 1.32 does
  (AuthorizePodWebsocketUpgradeCreatePermission), needs `create` on the subresource too;
- exec/attach/portforward without WebSocket (client-go's SPDY fallback, after a refused WebSocket
  upgrade): the kubelet is asked the same and its refusal passed on; a request it would serve is
  refused, 400, since the double relays WebSocket streams only."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from nodeenv.kubeapi.audit import USER
from nodeenv.kubeapi.errors import BadRequest, from_code
from nodeenv.kubeapi.kubeletclient import KubeletClient, node_endpoint
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState

SUBRESOURCES = ("log", "exec", "attach", "portforward")
KUBELET_PATHS = {"log": "containerLogs", "exec": "exec", "attach": "attach", "portforward": "portForward"}
KUBELET = web.AppKey("kubelet", KubeletClient)
Obj = dict[str, Any]


def _names(containers: list[Obj]) -> str:
    return "[" + " ".join(c["name"] for c in containers) + "]"


def container_of(pod: Obj, name: str) -> str:
    """kube-apiserver's choice of container: the one named (it must exist), else the only one."""
    spec, pod_name = pod["spec"], pod["metadata"]["name"]
    containers, inits = spec.get("containers") or [], spec.get("initContainers") or []
    if not name:
        if len(containers) == 1:
            return str(containers[0]["name"])
        msg = f"a container name must be specified for pod {pod_name}, choose one of: {_names(containers)}"
        if inits:
            msg += f" or one of the init containers: {_names(inits)}"
        raise BadRequest(msg)
    if not any(c["name"] == name for c in [*containers, *inits, *(spec.get("ephemeralContainers") or [])]):
        raise BadRequest(f"container {name} is not valid for pod {pod_name}")
    return name


def kubelet_url(st: ApiState, info: RequestInfo, query: Any) -> str:
    pods = st.registry.lookup("", "v1", "pods")
    nodes = st.registry.lookup("", "v1", "nodes")
    assert pods is not None and nodes is not None
    pod = st.resources.get(pods, info.namespace, info.name)
    path = f"/{KUBELET_PATHS[info.subresource]}/{info.namespace}/{info.name}"
    params = [(k, v) for k, v in query.items() if k != "container"]
    if info.subresource != "portforward":
        path += "/" + container_of(pod, query.get("container", ""))
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        raise BadRequest(f"pod {info.name} does not have a host assigned")
    node = st.resources.get(nodes, "", node_name)
    return str(URL(node_endpoint(node) + path).with_query(params))


async def handle(request: web.Request, st: ApiState, info: RequestInfo) -> web.StreamResponse:
    url = kubelet_url(st, info, request.query)
    client = request.app[KUBELET]
    if info.subresource == "log":
        return await _log(request, client, url)
    if request.headers.get("Upgrade", "").lower() == "websocket":
        if st.authorizer is not None:  # the upgrade is a GET (verb get), and it creates a stream
            st.authorizer.check(request[USER], _as_create(info))
        return await _relay(request, client, url)
    async with client.session.get(url) as resp:  # what the kubelet says of it, without an upgrade
        text = await resp.text()
    return web.Response(status=resp.status if resp.status >= 400 else 400, text=text or "upgrade required")


def _as_create(info: RequestInfo) -> RequestInfo:
    return RequestInfo(verb="create", group=info.group, version=info.version, resource=info.resource,
                       subresource=info.subresource, namespace=info.namespace, name=info.name,
                       kind=info.kind)  # fmt: skip


async def _log(request: web.Request, client: KubeletClient, url: str) -> web.StreamResponse:
    async with client.session.get(url) as resp:
        if resp.status != 200:
            raise from_code(resp.status, (await resp.text()).strip())
        out = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await out.prepare(request)
        async for chunk in resp.content.iter_any():
            await out.write(chunk)
        await out.write_eof()
        return out


async def _relay(request: web.Request, client: KubeletClient, url: str) -> web.StreamResponse:
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    try:
        upstream = await client.session.ws_connect(url, protocols=protocols, max_msg_size=0, autoping=True)
    except aiohttp.WSServerHandshakeError as e:
        async with client.session.get(url) as resp:  # the refusal's text (a handshake error drops it)
            text = await resp.text()
        return web.Response(status=e.status if e.status >= 400 else 502, text=text)
    ws = web.WebSocketResponse(protocols=(upstream.protocol,) if upstream.protocol else (), max_msg_size=0)
    await ws.prepare(request)
    await _pipe_both(ws, upstream)
    return ws


async def _pipe_both(ws: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    async def down() -> None:
        async for msg in upstream:
            if msg.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(msg.data)
        await ws.close()

    async def up() -> None:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                await upstream.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await upstream.send_str(msg.data)
        await upstream.close()

    tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, aiohttp.ClientError):
            await t
    await upstream.close()
    await ws.close()
