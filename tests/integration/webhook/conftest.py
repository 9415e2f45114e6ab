"""Real TLS on loopback: a PKI generated per session, the webhook served in-process on port 0."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.unit.webhook.webhook_kit import AUDIENCE, HMAC_SECRET, ISSUER, signing_key, write_public_keys
from webhook.devcerts import issue_ca, issue_leaf, write_pair
from webhook.keys import RefreshPolicy
from webhook.server import Running, running
from webhook.settings import PATH, ServeSettings
from webhook.tokens import TokenPolicy

V1 = "authentication.k8s.io/v1"
V1BETA1 = "authentication.k8s.io/v1beta1"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    server: tuple[Path, Path]
    client: tuple[Path, Path]
    """The apiserver's client certificate (CN k8s-apiserver), from our CA."""
    intruder: tuple[Path, Path]
    """Same CA, CN intruder."""
    foreign: tuple[Path, Path]
    """CN k8s-apiserver, but from another CA."""
    key_files: tuple[Path, ...]
    hmac_file: Path


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("webhook-pki")
    ca = issue_ca()
    other = issue_ca("another CA")
    ca_crt, _ = write_pair(d, "ca", *ca)
    hmac_file = d / "hmac.secret"
    hmac_file.write_bytes(HMAC_SECRET)
    return Pki(
        dir=d,
        ca=ca_crt,
        server=write_pair(d, "server", *issue_leaf(ca, "localhost", server_names=["localhost", "127.0.0.1"])),
        client=write_pair(d, "client", *issue_leaf(ca, "k8s-apiserver", client=True)),
        intruder=write_pair(d, "intruder", *issue_leaf(ca, "intruder", client=True)),
        foreign=write_pair(d, "foreign", *issue_leaf(other, "k8s-apiserver", client=True)),
        key_files=tuple(write_public_keys(d, *(signing_key(a) for a in ("RS256", "ES256", "EdDSA")))),
        hmac_file=hmac_file,
    )


def settings(pki: Pki, **over: Any) -> ServeSettings:
    base = ServeSettings(
        host="127.0.0.1",
        port=0,
        health_host="127.0.0.1",
        health_port=0,
        tls_cert=pki.server[0],
        tls_key=pki.server[1],
        client_ca=pki.ca,
        token=TokenPolicy(issuers=(ISSUER,)),
        audiences=(AUDIENCE,),
        key_files=pki.key_files,
        hmac_secret_files=(pki.hmac_file,),
        refresh=RefreshPolicy(file_poll=0.05),
        max_body=65536,
    )
    return dataclasses.replace(base, **over)


def client_context(pki: Pki, cert: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


@dataclass
class Harness:
    server: Running
    session: aiohttp.ClientSession
    pki: Pki

    @property
    def url(self) -> str:
        return f"https://localhost:{self.server.https_port}{PATH}"

    async def post(self, body: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        async with self.session.post(self.url, data=body) as r:
            return r.status, json.loads(await r.read()), dict(r.headers)

    async def review(
        self, token: str, api_version: str = V1, audiences: list[str] | None = None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        spec: dict[str, Any] = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        return await self.post(
            json.dumps({"apiVersion": api_version, "kind": "TokenReview", "spec": spec}).encode()
        )

    def capture_review_lines(self) -> io.StringIO:
        """From now on, the per-review log lines go to the returned buffer."""
        self.server.review_log.stream = buf = io.StringIO()
        self.server.review_log.enabled = True
        return buf

    async def health(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.server.health_port}{path}"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            return r.status, await r.text()

    async def metric(self, sample: str) -> float:
        """The value of one sample, e.g. `iam_webhook_reviews_total{result="rejected"}`."""
        _, text = await self.health("/metrics")
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name == sample:
                return float(value)
        raise AssertionError(f"{sample} not in /metrics")


@contextlib.asynccontextmanager
async def harness(pki: Pki, **over: Any) -> AsyncIterator[Harness]:
    async with running(settings(pki, **over)) as server:
        connector = aiohttp.TCPConnector(ssl=client_context(pki, pki.client))
        async with aiohttp.ClientSession(connector=connector) as session:
            yield Harness(server, session, pki)


@pytest.fixture
async def webhook(pki: Pki) -> AsyncIterator[Harness]:
    async with harness(pki) as h:
        yield h


async def tls_exchange(port: int, ctx: ssl.SSLContext, request: bytes) -> bytes | BaseException:
    """Send raw bytes over TLS; return what came back, or the error that ended the attempt."""
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
        )
    except (ssl.SSLError, ConnectionError) as e:
        return e
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 10)
    except (ssl.SSLError, ConnectionError) as e:
        return e
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()


async def wait_until(predicate: Any, what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
