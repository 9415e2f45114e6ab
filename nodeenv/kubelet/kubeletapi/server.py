"""The kubelet API of a runner: HTTPS on the node's address (port 10250) with the node's kubelet
serving certificate, as kubelet serves it for kube-apiserver's logs, exec, attach and port-forward.

Callers are authenticated by client certificate against --client-ca-file (a certificate from
another CA fails the TLS handshake; none at all is 401 Unauthorized, as kubelet with anonymous
auth off). Authorization stands in for kubelet's Webhook mode, where kube-apiserver would answer a
SubjectAccessReview: only the users named (the API server's --kubelet-client-certificate CN) may
use it, anyone else is 403 `Forbidden (user=..., verb=..., resource=nodes, subresource=proxy)`, the
subresource named as kubelet names it for a SubjectAccessReview (/metrics/*: `metrics`, /healthz:
`healthz`, the rest `proxy`).

Paths (kubelet's): /healthz, /metrics/resource (what metrics-server scrapes: resourcestats.py, from
the runner's cgroups; no read-only port serves it), /containerLogs/{ns}/{pod}/{container},
/exec|/attach/{ns}/{pod}[/{uid}]/{container}, /portForward/{ns}/{pod}[/{uid}]. Exec and attach
speak the WebSocket remote command protocol (remotecommand.py; a terminal with tty=true),
port-forward SPDY tunneled in WebSocket (portforward.py).
Runs on its own event loop in a thread of the runner."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import WSMsgType, web
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from nodeenv import netns_socket
from nodeenv.kubelet.kubeletapi import logs, remotecommand
from nodeenv.kubelet.kubeletapi.pods import KubeletError, KubeletNode, log_source, pod_of, running_container
from nodeenv.kubelet.kubeletapi.portforward import PortForwardSession
from nodeenv.kubelet.kubeletapi.spdy import SpdyError

log = logging.getLogger(__name__)
PORT = 10250
API_SERVER_USER = "kube-apiserver-kubelet-client"
"""The CN of the API server's kubelet client certificate (kubeadm's name for it)."""
PORTFORWARD_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
"""client-go's port-forward tunneled in WebSocket (PortForwardWebsockets)."""
H = Callable[[web.Request], Awaitable[web.StreamResponse]]
INDEX = web.AppKey("pods", KubeletNode)


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletApiSettings:
    address: str
    port: int = PORT
    cert: Path
    key: Path
    client_ca: Path
    authorized: tuple[str, ...] = (API_SERVER_USER,)
    podman_env: Mapping[str, str]

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert, self.key)
        ctx.load_verify_locations(self.client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL  # a foreign certificate fails the handshake; none: 401
        return ctx


SETTINGS = web.AppKey("settings", KubeletApiSettings)


def _user(request: web.Request) -> str | None:
    cert = request.transport.get_extra_info("peercert") if request.transport else None
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _subresource(path: str) -> str:
    """The `nodes` subresource kubelet's authorizer names for a path (the rest is `proxy`)."""
    if path == "/healthz":
        return "healthz"
    return "metrics" if path == "/metrics" or path.startswith("/metrics/") else "proxy"


@web.middleware
async def authn(request: web.Request, handler: H) -> web.StreamResponse:
    user = _user(request)
    if user is None:
        return web.Response(status=401, text="Unauthorized")
    if user not in request.app[SETTINGS].authorized:
        verb = "get" if request.method == "GET" else "create"
        sub = _subresource(request.path)
        log.warning("refused %s %s from %s", request.method, request.path, user)
        return web.Response(status=403, text=f"Forbidden (user={user}, verb={verb}, resource=nodes, "
                                             f"subresource={sub})")  # fmt: skip
    try:
        return await handler(request)
    except KubeletError as e:
        return web.Response(status=e.status, text=e.message)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _resource_metrics(request: web.Request) -> web.Response:
    body = await asyncio.to_thread(request.app[INDEX].resource_metrics)  # podman inspect, cgroup reads
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})


async def _logs(request: web.Request) -> web.StreamResponse:
    m, q = request.match_info, request.query
    rt = pod_of(request.app[INDEX], m["namespace"], m["pod"])
    source = log_source(rt, m["container"], logs.flag(q, "previous"))
    argv = logs.log_argv(source, q)
    return await logs.stream_log(request, argv, _env(request), logs.count(q, "limitBytes"))


def _env(request: web.Request) -> dict[str, str]:
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **request.app[SETTINGS].podman_env}


async def _exec(request: web.Request) -> web.StreamResponse:
    m, q = request.match_info, request.query
    rt = pod_of(request.app[INDEX], m["namespace"], m["pod"])
    name = running_container(rt, m["container"])
    command = q.getall("command", [])
    if not command:
        raise KubeletError(400, "you must specify at least 1 command")
    _require_websocket(request)
    stdin, tty = logs.flag(q, "input") or logs.flag(q, "stdin"), logs.flag(q, "tty")
    argv = ["podman", "exec", *(["-i"] if stdin else []), *(["-t"] if tty else []), name, *command]
    return await remotecommand.stream_command(
        request, argv, _env(request), stdin=stdin, shown=command, tty=tty
    )


async def _attach(request: web.Request) -> web.StreamResponse:
    m = request.match_info
    rt = pod_of(request.app[INDEX], m["namespace"], m["pod"])
    name = running_container(rt, m["container"])
    _require_websocket(request)
    argv = ["podman", "attach", "--no-stdin", "--sig-proxy=false", name]
    shown = ["attach", m["container"]]
    return await remotecommand.stream_command(request, argv, _env(request), stdin=False, shown=shown)


def _require_websocket(request: web.Request) -> None:
    if not remotecommand.wants_websocket(request):
        raise KubeletError(400, "unable to upgrade: this kubelet serves streams over WebSocket only")


async def _portforward(request: web.Request) -> web.StreamResponse:
    m = request.match_info
    rt = pod_of(request.app[INDEX], m["namespace"], m["pod"])
    _require_websocket(request)
    netns, uid = rt.netns_name, str(rt.pod["metadata"]["uid"])  # type: ignore[index]

    async def dial(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if netns is None:  # a host-network pod: the node's own localhost
            return await asyncio.open_connection("127.0.0.1", port)
        sock = await asyncio.to_thread(netns_socket.connected_socket, netns, "127.0.0.1", port, 5.0)
        return await asyncio.open_connection(sock=sock)

    ws = web.WebSocketResponse(protocols=(PORTFORWARD_PROTOCOL,), max_msg_size=0)
    await ws.prepare(request)
    session = PortForwardSession(f"{m['namespace']}/{m['pod']}", uid, dial, ws.send_bytes)
    try:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                await session.feed(msg.data)
    except SpdyError as e:
        log.warning("port-forward to %s/%s: %s", m["namespace"], m["pod"], e)
    finally:
        await session.close()
    return ws


def make_app(index: KubeletNode, settings: KubeletApiSettings) -> web.Application:
    app = web.Application(middlewares=[authn])
    app[INDEX], app[SETTINGS] = index, settings
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics/resource", _resource_metrics)
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", _logs)
    for path, handler in (("/exec", _exec), ("/attach", _attach)):
        for tail in ("/{namespace}/{pod}/{container}", "/{namespace}/{pod}/{uid}/{container}"):
            app.router.add_route("GET", path + tail, handler)
            app.router.add_route("POST", path + tail, handler)
    for tail in ("/{namespace}/{pod}", "/{namespace}/{pod}/{uid}"):
        app.router.add_route("GET", "/portForward" + tail, _portforward)
        app.router.add_route("POST", "/portForward" + tail, _portforward)
    return app


class KubeletApiServer:
    """The app on its own loop in a daemon thread (the runner's loop is synchronous)."""

    def __init__(self, index: KubeletNode, settings: KubeletApiSettings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(make_app(index, settings), access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)  # fmt: skip
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubelet-api", daemon=True)

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.address, self.settings.port,
                           ssl_context=self.settings.ssl_context())  # fmt: skip
        await site.start()

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        log.info("kubelet API on https://%s:%d", self.settings.address, self.settings.port)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
