"""Keys from a JWKS URL served over HTTPS by a local aiohttp issuer on loopback: rotation,
rate-limited refetch on unknown kid, Cache-Control, issuer down → 503 + Retry-After, last-good keys
kept; an http:// JWKS URL is refused at start-up."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.integration.webhook.conftest import Pki, harness, settings, wait_until
from tests.unit.webhook.webhook_kit import claims, jwks_doc, sign, signing_key
from webhook.keys import RefreshPolicy


@dataclass
class Issuer:
    """A JWKS endpoint whose key set, Cache-Control and liveness the test controls."""

    doc: dict[str, Any]
    pki: Pki
    cache_control: str = "max-age=3600"
    hits: int = 0
    runner: web.AppRunner | None = None
    port: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/.well-known/jwks.json"

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        return web.json_response(self.doc, headers={"Cache-Control": self.cache_control})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/jwks.json", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(*self.pki.server)
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=tls)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@contextlib.asynccontextmanager
async def issuer(pki: Pki, *algs: str, cache_control: str = "max-age=3600") -> AsyncIterator[Issuer]:
    iss = Issuer(jwks_doc(*(signing_key(a) for a in algs)), pki, cache_control)
    await iss.start()
    try:
        yield iss
    finally:
        await iss.stop()


def jwks_settings(iss: Issuer, **refresh: float) -> dict[str, Any]:
    return dict(
        key_files=(),
        hmac_secret_files=(),
        jwks_url=iss.url,
        jwks_ca=iss.pki.ca,
        refresh=RefreshPolicy(file_poll=0.05, **refresh),
    )


async def test_new_kid_is_picked_up_and_refetch_is_rate_limited(pki: Pki) -> None:
    async with issuer(pki, "RS256") as iss, harness(pki, **jwks_settings(iss)) as h:
        assert iss.hits == 1
        _, doc, _ = await h.review(sign(claims(), signing_key("RS256")))
        assert doc["status"]["authenticated"]
        iss.doc = jwks_doc(signing_key("RS256"), signing_key("ES256"))  # the issuer rotates a key in
        _, doc, _ = await h.review(sign(claims(), signing_key("ES256")))
        assert doc["status"]["authenticated"] and iss.hits == 2
        for n in (1, 2, 3):  # unknown kids within 30 s of the last fetch: no more fetches
            code, doc, _ = await h.review(sign(claims(), signing_key("ES256", n)))
            assert (code, doc["status"]) == (200, {"authenticated": False, "error": "unknown signing key"})
        assert iss.hits == 2
        assert await h.metric("iam_webhook_keys") == 2


async def test_cache_control_max_age_drives_background_refresh(pki: Pki) -> None:
    settings = dict(unknown_kid_refetch=3600, min_refresh=0.1)
    async with (
        issuer(pki, "RS256", cache_control="public, max-age=0") as iss,
        harness(pki, **jwks_settings(iss, **settings)) as h,
    ):
        rs_token = sign(claims(), signing_key("RS256"))
        assert (await h.review(rs_token))[1]["status"]["authenticated"]
        iss.doc = jwks_doc(signing_key("EdDSA"))  # RS256 retired, EdDSA in, no review traffic

        async def refreshed() -> bool:
            return h.server.keys.keyset.keys[0].family == "Ed25519"

        await wait_until(refreshed, "the background JWKS refresh")
        _, doc, _ = await h.review(sign(claims(), signing_key("EdDSA")))
        assert doc["status"]["authenticated"]
        _, doc, _ = await h.review(rs_token)  # was cached: the key change cleared the cache
        assert doc["status"] == {"authenticated": False, "error": "unknown signing key"}


async def test_issuer_down_from_the_start_means_503_and_not_ready(pki: Pki) -> None:
    async with issuer(pki, "ES256") as iss:
        url = iss.url
    async with harness(pki, jwks_url=url, jwks_ca=pki.ca, key_files=(), hmac_secret_files=()) as h:
        code, doc, headers = await h.review(sign(claims(), signing_key("ES256")))
        assert code == 503 and headers["Retry-After"] == "5"
        assert doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable"
        assert await h.health("/readyz") == (503, "no usable verification keys")
        assert await h.health("/healthz") == (200, "ok")
        assert await h.metric('iam_webhook_reviews_total{result="unavailable"}') == 1
        assert await h.metric("iam_webhook_keyset_age_seconds") == float("inf")
        assert await h.metric("iam_webhook_jwks_refresh_failures_total") >= 1  # the fetch at start


async def test_issuer_down_later_keeps_last_good_keys(pki: Pki) -> None:
    async with issuer(pki, "ES256") as iss, harness(pki, **jwks_settings(iss, unknown_kid_refetch=0)) as h:
        await iss.stop()  # the issuer goes away
        code, doc, _ = await h.review(sign(claims(sub="user-1"), signing_key("ES256")))
        assert code == 200 and doc["status"]["authenticated"]  # last-good keys
        code, doc, headers = await h.review(sign(claims(), signing_key("ES256", 7)))
        assert code == 503 and headers["Retry-After"] == "5"  # unknown kid, cannot ask the issuer
        assert iss.hits == 1
        code, doc, _ = await h.review(sign(claims(sub="user-2"), signing_key("ES256")))
        assert code == 200 and doc["status"]["authenticated"]  # still the last-good keys
        assert await h.health("/readyz") == (200, "ok")


async def test_hs256_confusion_against_jwks_rsa_key(pki: Pki) -> None:
    from tests.unit.webhook.webhook_kit import hs256_with_public_key

    async with issuer(pki, "RS256") as iss, harness(pki, **jwks_settings(iss)) as h:
        code, doc, _ = await h.review(hs256_with_public_key(claims(), signing_key("RS256")))
        assert (code, doc["status"]) == (200, {"authenticated": False, "error": "unknown signing key"})


async def test_file_keys_do_not_hide_a_new_jwks_kid(pki: Pki) -> None:
    """A PEM key of the same family is tried first; its failure must still lead to a refetch."""
    pem = tuple(p for p in pki.key_files if p.name.startswith("ES256"))
    async with issuer(pki, "RS256") as iss, harness(pki, **{**jwks_settings(iss), "key_files": pem}) as h:
        _, doc, _ = await h.review(sign(claims(), signing_key("ES256")))
        assert doc["status"]["authenticated"]  # the PEM key
        iss.doc = jwks_doc(signing_key("RS256"), signing_key("ES256", 3))
        _, doc, _ = await h.review(sign(claims(), signing_key("ES256", 3)))
        assert doc["status"]["authenticated"] and iss.hits == 2


def test_an_http_jwks_url_is_refused_at_start_up(pki: Pki) -> None:
    with pytest.raises(ValueError, match="must be an https:// URL"):
        settings(pki, jwks_url="http://127.0.0.1:1/.well-known/jwks.json", key_files=())
