"""Plain-HTTP /metrics, /healthz and /readyz of a controller (aiohttp + prometheus-client)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Probe = Callable[[], str | None]
"""None when fine, else what is wrong (the 503 body)."""


def make_health_app(registry: CollectorRegistry, healthz: Probe, readyz: Probe) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def probe(check: Probe) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            problem = check()
            return web.Response(text=problem or "ok", status=503 if problem else 200)

        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", probe(healthz))
    app.router.add_get("/readyz", probe(readyz))
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Bind and start; returns the runner (for cleanup) and the bound port."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner, int(runner.addresses[0][1])
