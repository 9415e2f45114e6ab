"""The agent's edge: aiohttp on a unix socket (directory 0700), one POST /cni per CNI call.

This is the only place that turns exceptions into CNI error JSON, and the only catch-all.
Work runs in threads (`asyncio.to_thread`), one request per container id at a time.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from cni.daemon.metrics import Metrics
from cni.daemon.service import PodNetworkService
from cni.errors import (
    LATEST_VERSION,
    CniError,
    DecodeFailure,
    InternalError,
    InvalidNetworkConfig,
    OvnDatabaseUnavailable,
)
from cni.wire import CniRequest
from ovnaccess.retry import NoAnswer, NotCommitted

log = logging.getLogger(__name__)
MAX_REQUEST = 4 * 1024 * 1024
"""Bytes of one request at most (the shim sends at most 1 MiB of netconf plus the CNI_* variables)."""


def parse_shim_request(body: bytes) -> tuple[dict[str, str], bytes]:
    """Undo the shim's framing: NUL-separated KEY=VALUE items, an empty item, then stdin."""
    head, sep, stdin = body.partition(b"\0\0")
    if not sep:
        raise DecodeFailure("malformed request from the prismnet executable")
    env = {}
    for item in head.split(b"\0"):
        key, _, value = item.decode("utf-8", "replace").partition("=")
        env[key] = value
    return env, stdin


def _version_of(stdin: bytes) -> str:
    try:
        value = json.loads(stdin or b"{}").get("cniVersion")
    except (ValueError, AttributeError, RecursionError):
        return LATEST_VERSION
    return value if isinstance(value, str) and value else LATEST_VERSION


@web.middleware
async def cni_http_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own refusals (body too large, wrong method or path) as CNI error JSON, not plain text."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        err = (InvalidNetworkConfig if e.status == 413 else DecodeFailure)(
            f"prismnet-agent refused the request: {e.reason}", e.text or ""
        )
        return web.Response(status=e.status, text=json.dumps(err.to_reply()), content_type="application/json")


class KeyedLocks:
    """One asyncio.Lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def run(self, key: str, fn: Callable[[], object]) -> object:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                return await asyncio.to_thread(fn)
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def _result_code(status: int, reply: str) -> int:
    """0 for a success, else the error reply's CNI code (999 if the reply has none)."""
    if status == 200:
        return 0
    try:
        return int(json.loads(reply)["code"])
    except (ValueError, KeyError, TypeError):
        return 999


class CniServer:
    def __init__(self, service: PodNetworkService, metrics: Metrics) -> None:
        self._service, self._metrics = service, metrics
        self._locks = KeyedLocks()
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST, middlewares=[cni_http_errors])
        app.router.add_post("/cni", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.idle.clear()
        t0 = time.perf_counter()
        command = "?"
        try:
            body = await request.read()
            try:
                env, stdin = parse_shim_request(body)
            except CniError as e:
                status, text = 400, json.dumps(e.to_reply())
            else:
                command = env.get("CNI_COMMAND", "?")
                status, text = await self._dispatch(env, stdin, _version_of(stdin))
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()
        self._metrics.observe(command, _result_code(status, text), time.perf_counter() - t0)
        return web.Response(status=status, body=text.encode(), content_type="application/json")

    async def _dispatch(self, env: dict[str, str], stdin: bytes, version: str) -> tuple[int, str]:
        try:
            try:
                req = CniRequest.from_env(env, stdin)
                return 200, await self._run(req)
            except (NotCommitted, NoAnswer) as e:  # kubelet retries a code-11 ADD with a new sandbox
                raise OvnDatabaseUnavailable("the OVN database took no write; try again later", str(e)) from e
        except CniError as e:
            log.warning(
                "%s failed: %s",
                env.get("CNI_COMMAND"),
                e,
                extra={"cid": env.get("CNI_CONTAINERID", "")[:12], "code": e.to_reply()["code"]},
            )
            return 400, json.dumps(e.to_reply(version))
        except Exception:
            log.exception(
                "%s crashed", env.get("CNI_COMMAND"), extra={"cid": env.get("CNI_CONTAINERID", "")[:12]}
            )
            return 500, json.dumps(
                InternalError("internal error in prismnet-agent; see its log").to_reply(version)
            )

    async def _run(self, req: CniRequest) -> str:
        svc = self._service
        key = f"{req.container_id}/{req.ifname}"
        if req.command == "ADD":
            result = await self._locks.run(key, lambda: svc.add(req))
            return json.dumps(result.to_dict(req.netconf.cni_version))  # type: ignore[attr-defined]
        if req.command == "DEL":
            await self._locks.run(key, lambda: svc.delete(req))
        elif req.command == "CHECK":
            await self._locks.run(key, lambda: svc.check(req))
        elif req.command == "GC":
            await self._gc(req)
        elif req.command == "STATUS":
            await asyncio.to_thread(svc.status, req)
        return ""

    async def _gc(self, req: CniRequest) -> None:
        """GC one stale attachment at a time under its container's lock (never under an ADD)."""
        svc = self._service
        for att in await asyncio.to_thread(svc.stale_attachments, req):
            await self._locks.run(
                f"{att.container_id}/{att.ifname}", functools.partial(svc.remove_stale, req, att)
            )
        await asyncio.to_thread(svc.resync_egress)


async def serve_unix(app: web.Application, path: Path) -> web.AppRunner:
    """Listen on `path` in a 0700 directory (created if needed); a stale socket is replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    path.unlink(missing_ok=True)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.UnixSite(runner, str(path)).start()
    os.chmod(path, 0o600)
    return runner
