"""One running double: HTTPS on a loopback port with the dev serving certificate, an admin token and
kubeconfig, and kubeconfigs minted for any username.

`KubeApiServer` runs on the caller's event loop (the daemon); `ThreadedKubeApi` runs one on its own
loop in a background thread (tests and benchmarks, whose code may be synchronous or on another loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from nodeenv.kubeapi.app import make_app
from nodeenv.kubeapi.auth import ADMIN
from nodeenv.kubeapi.devpki import ServingPki, gen_serving_pki, kept_serving_pki, write_kubeconfig
from nodeenv.kubeapi.durable import load_tokens, save_tokens
from nodeenv.kubeapi.settings import Listener
from nodeenv.kubeapi.state import ApiConfig, ApiState
from nodeenv.netns_socket import listening_socket

T = TypeVar("T")


def _safe(username: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in username)


class KubeApiServer:
    def __init__(
        self,
        workdir: Path,
        config: ApiConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        admin_token: str | None = None,
        server_names: tuple[str, ...] = ("localhost", "127.0.0.1"),
        also: tuple[Listener, ...] = (),
    ) -> None:
        """`also`: listeners in other network namespaces; each gets an admin kubeconfig
        `<workdir>/<netns>.kubeconfig` naming its URL (the serving certificate names its host)."""
        self.workdir, self.host, self.port, self.also = workdir, host, port, also
        self.state = ApiState(config or ApiConfig())
        self.server_names = server_names
        self._admin_token = admin_token
        self._runner: web.AppRunner | None = None
        self.pki: ServingPki | None = None
        self.kubeconfig = workdir / "admin.kubeconfig"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    async def start(self) -> None:
        names, data = (*self.server_names, *(a.host for a in self.also)), self.state.config.data_dir
        self.pki = (kept_serving_pki if data else gen_serving_pki)(self.workdir / "pki", names)
        for username, token in (load_tokens(data) if data else {}).items():
            self.state.tokens.add(token, username)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.pki.cert, self.pki.key)
        self._runner = web.AppRunner(
            make_app(self.state),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ctx)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        for listener in self.also:
            sock = listening_socket(listener.netns, listener.host, listener.port)
            await web.SockSite(self._runner, sock, ssl_context=ctx).start()
        if self._admin_token:
            self.state.tokens.add(self._admin_token, ADMIN)
        self.kubeconfig = self.kubeconfig_for(ADMIN, self.kubeconfig)

    def also_kubeconfigs(self) -> dict[str, Path]:
        """netns -> the admin kubeconfig for the listener in it."""
        assert self.pki is not None, "start() first"
        token = self.state.tokens.token_for(ADMIN)
        ca = self.pki.ca
        return {a.netns: write_kubeconfig(self.workdir / f"{a.netns}.kubeconfig", a.url, ca, ADMIN, token)
                for a in self.also}  # fmt: skip

    def kubeconfig_for(self, username: str, path: Path | None = None) -> Path:
        """A kubeconfig whose bearer token authenticates as `username` (thread-safe)."""
        assert self.pki is not None, "start() first"
        token = self.state.tokens.token_for(username)
        if self.state.config.data_dir is not None:
            save_tokens(self.state.config.data_dir, self.state.tokens.by_name())
        path = path or self.workdir / "users" / f"{_safe(username)}.kubeconfig"
        return write_kubeconfig(path, self.url, self.pki.ca, username, token)

    async def stop(self) -> None:
        self.state.store.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.state.recorder.audit_log is not None:
            self.state.recorder.audit_log.close()
        if self.state.token_webhook is not None:
            await self.state.token_webhook.close()


class ThreadedKubeApi:
    """A KubeApiServer on its own event loop in a daemon thread; `call` runs code on that loop."""

    def __init__(self, workdir: Path, config: ApiConfig | None = None, **server: Any) -> None:
        """`server`: KubeApiServer's keywords (host, port, server_names, admin_token)."""
        self.loop = asyncio.new_event_loop()
        self.server = KubeApiServer(workdir, config, **server)
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubeapi", daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the server's loop (store and watch state are single-threaded) and return its result."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the calling thread
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return fut.result(timeout=30)

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            self.loop.close()
