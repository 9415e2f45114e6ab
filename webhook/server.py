"""Wiring one running webhook from ServeSettings: keys, cache, reviewer, TLS, the two sites.

`running(settings)` is an async context manager used by main() and by the tests: it loads
keys (an unreachable issuer is not fatal: the webhook then answers 503 until it has keys),
binds the HTTPS + mTLS site and the plain health site, writes the port file, and on exit
shuts down gracefully (in-flight reviews finish) and stops the background refreshers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from webhook.app import make_app, make_health_app
from webhook.cache import ReviewCache
from webhook.keys import FileKeys, JwksKeys, KeyStore
from webhook.mapping import ClaimMapper
from webhook.metrics import Metrics
from webhook.review import Reviewer
from webhook.reviewlog import LOGGER as REVIEW_LOGGER
from webhook.reviewlog import ReviewLog
from webhook.settings import ServeSettings
from webhook.tls import CertReloader, TlsFiles, server_context
from webhook.tokens import TokenValidator

log = logging.getLogger(__name__)


@dataclass
class Running:
    https_port: int
    health_port: int | None
    keys: KeyStore
    cache: ReviewCache
    reviewer: Reviewer
    metrics: Metrics
    certs: CertReloader
    review_log: ReviewLog


def _bound_port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


async def _poll_certs(certs: CertReloader, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        certs.reload_if_changed()


def _write_port_file(path: Path, handle: Running) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"https": handle.https_port, "health": handle.health_port}))
    tmp.replace(path)


def build_keystore(s: ServeSettings, session: aiohttp.ClientSession | None) -> KeyStore:
    files = FileKeys(s.key_files, s.hmac_secret_files) if s.key_files or s.hmac_secret_files else None
    jwks = JwksKeys(s.jwks_url, session=session) if s.jwks_url and session else None
    return KeyStore(files, jwks, s.refresh)


async def _site(app: web.Application, host: str, port: int, tls: ssl.SSLContext | None) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls).start()
    return runner


@contextlib.asynccontextmanager
async def running(s: ServeSettings) -> AsyncIterator[Running]:
    async with contextlib.AsyncExitStack() as stack:
        session = None
        if s.jwks_url:
            jwks_tls = ssl.create_default_context(cafile=str(s.jwks_ca) if s.jwks_ca else None)
            connector = aiohttp.TCPConnector(ssl=jwks_tls)
            session = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
        keys = build_keystore(s, session)
        cache = ReviewCache(s.cache_size, s.cache_ttl)
        keys.on_change(cache.clear)
        await keys.start()
        stack.push_async_callback(keys.stop)
        reviewer = Reviewer(
            TokenValidator(s.token), ClaimMapper(s.mapping), lambda: keys.keyset, s.audiences, cache
        )
        stats = Metrics(cache, lambda: len(keys.keyset.keys), keys.age, lambda: keys.jwks_failures)
        files = TlsFiles(cert=s.tls_cert, key=s.tls_key, client_ca=s.client_ca)
        tls = server_context(files)
        certs = CertReloader(tls, files)
        review_log = ReviewLog(enabled=logging.getLogger(REVIEW_LOGGER).isEnabledFor(logging.INFO))
        stack.callback(review_log.flush)  # runs after the runner's cleanup: the last reviews' lines
        app = make_app(reviewer, keys, stats, max_body=s.max_body, client_cn=s.client_cn,
                       review_log=review_log)  # fmt: skip
        runner = await _site(app, s.host, s.port, tls)
        stack.push_async_callback(runner.cleanup)
        health_port = None
        if s.health_port is not None:
            health = await _site(make_health_app(keys, stats), s.health_host, s.health_port, None)
            stack.push_async_callback(health.cleanup)
            health_port = _bound_port(health)
        poller = asyncio.create_task(_poll_certs(certs, s.refresh.file_poll))
        stack.callback(poller.cancel)
        handle = Running(_bound_port(runner), health_port, keys, cache, reviewer, stats, certs, review_log)
        if s.port_file is not None:
            _write_port_file(s.port_file, handle)
        log.info(
            "serving TokenReviews on https://%s:%d (health port %s), %d keys",
            s.host,
            handle.https_port,
            health_port,
            len(keys.keyset.keys),
        )
        yield handle
