"""The API double as a daemon keeps no request record (nothing reads it there; filling it grew the
daemon's RSS in the soak), while an in-process double keeps one for tests to read."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp

from nodeenv.kubeapi.__main__ import daemon_server
from nodeenv.kubeapi.auth import ADMIN
from nodeenv.kubeapi.server import KubeApiServer
from nodeenv.kubeapi.settings import parse


async def requests_kept(server: KubeApiServer) -> tuple[int, int]:
    await server.start()
    try:
        assert server.pki is not None
        tls = ssl.create_default_context(cafile=str(server.pki.ca))
        token = server.state.tokens.token_for(ADMIN)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as s:
            for path in ("/api/v1/namespaces", "/version"):
                async with s.get(server.url + path, ssl=tls) as r:
                    assert r.status == 200
    finally:
        await server.stop()
    rec = server.state.recorder
    return len(rec.requests), len(rec.nonresource)


async def test_the_daemon_keeps_no_request_record(tmp_path: Path) -> None:
    assert await requests_kept(daemon_server(parse(["--dir", str(tmp_path), "--port", "0"], {}))) == (0, 0)


async def test_an_in_process_double_keeps_its_record_for_tests(tmp_path: Path) -> None:
    assert await requests_kept(KubeApiServer(tmp_path)) == (1, 1)
