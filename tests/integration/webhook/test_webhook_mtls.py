"""The apiserver's client certificate: required, verified against our CA, CN-pinned by default;
certificate and key files reloaded without a restart."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tests.integration.webhook.conftest import (
    Pki,
    client_context,
    harness,
    settings,
    tls_exchange,
    wait_until,
)
from tests.unit.webhook.webhook_kit import claims, sign, signing_key
from webhook.devcerts import issue_ca, issue_leaf, write_pair
from webhook.settings import PATH


def request(token: str) -> bytes:
    body = json.dumps(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    )
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


def refused_at_tls(result: bytes | BaseException) -> bool:
    """No HTTP came back: the handshake failed or the server closed with a TLS alert."""
    return isinstance(result, ssl.SSLError | ConnectionError) or result == b""


async def test_client_certificate_is_required_and_verified(pki: Pki) -> None:
    token = sign(claims(), signing_key("ES256"))
    async with harness(pki) as h:
        port = h.server.https_port
        ok = await tls_exchange(port, client_context(pki, pki.client), request(token))
        assert isinstance(ok, bytes) and ok.startswith(b"HTTP/1.1 200 ")
        assert b'"authenticated":true' in ok
        missing = await tls_exchange(port, client_context(pki, None), request(token))
        assert refused_at_tls(missing), missing
        foreign = await tls_exchange(port, client_context(pki, pki.foreign), request(token))
        assert refused_at_tls(foreign), foreign
        assert await h.metric("iam_webhook_review_duration_seconds_count") == 1


async def test_the_client_cn_is_pinned_by_default(pki: Pki) -> None:
    token = sign(claims(), signing_key("ES256"))
    assert settings(pki).client_cn == "k8s-apiserver"
    with pytest.raises(ValueError, match="--client-cn"):
        settings(pki, client_cn="")
    async with harness(pki) as h:  # no client_cn given: the default pin
        port = h.server.https_port
        ok = await tls_exchange(port, client_context(pki, pki.client), request(token))
        assert isinstance(ok, bytes) and ok.startswith(b"HTTP/1.1 200 ")
        other = await tls_exchange(port, client_context(pki, pki.intruder), request(token))
        assert isinstance(other, bytes) and other.startswith(b"HTTP/1.1 403 ")
        assert b'"reason":"Forbidden"' in other and b"authenticated" not in other
        assert await h.metric('iam_webhook_reviews_total{result="forbidden"}') == 1


async def _served_serial(port: int, pki: Pki) -> int:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client_context(pki, pki.client), server_hostname="localhost"
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der).serial_number


async def test_serving_certificate_and_client_ca_reload(pki: Pki, tmp_path: Path) -> None:
    ca = issue_ca("rotating CA")
    ca_pem = ca[0].public_bytes(Encoding.PEM)
    # the test client trusts both CAs; the webhook starts trusting only the session CA for clients
    client_view = dataclasses.replace(pki, ca=tmp_path / "both.crt")
    client_view.ca.write_bytes(pki.ca.read_bytes() + ca_pem)
    client_ca = tmp_path / "client-ca.crt"
    client_ca.write_bytes(pki.ca.read_bytes())
    cert, key = write_pair(tmp_path, "server", *issue_leaf(ca, "localhost", server_names=["localhost"]))
    async with harness(pki, tls_cert=cert, tls_key=key, client_ca=client_ca) as h:
        port = h.server.https_port
        before = await _served_serial(port, client_view)
        new_cert, new_key = issue_leaf(ca, "localhost", server_names=["localhost"])
        write_pair(tmp_path, "server", new_cert, new_key)

        async def rotated() -> bool:
            return await _served_serial(port, client_view) == new_cert.serial_number

        await wait_until(rotated, "the new serving certificate")
        assert before != new_cert.serial_number
        # a client certificate from a CA added to the client CA file is accepted after the reload
        newcomer = write_pair(tmp_path, "newcomer", *issue_leaf(ca, "k8s-apiserver", client=True))
        token = sign(claims(), signing_key("ES256"))
        assert refused_at_tls(await tls_exchange(port, client_context(client_view, newcomer), request(token)))
        client_ca.write_bytes(pki.ca.read_bytes() + ca_pem)

        async def accepted() -> bool:
            got = await tls_exchange(port, client_context(client_view, newcomer), request(token))
            return isinstance(got, bytes) and got.startswith(b"HTTP/1.1 200 ")

        await wait_until(accepted, "the new client CA")
        assert h.server.certs.reloads >= 2


async def test_key_files_reload_on_change(pki: Pki, tmp_path: Path) -> None:
    keyfile = tmp_path / "keys.pem"
    keyfile.write_bytes(signing_key("RS256").public_pem)
    async with harness(pki, key_files=(keyfile,), hmac_secret_files=(), cache_ttl=300.0) as h:
        es_token = sign(claims(), signing_key("ES256"))
        _, doc, _ = await h.review(es_token)
        assert doc["status"]["authenticated"] is False
        keyfile.write_bytes(signing_key("RS256").public_pem + signing_key("ES256").public_pem)

        async def es_works() -> bool:
            return (await h.review(es_token))[1]["status"]["authenticated"]

        await wait_until(es_works, "the reloaded key file")
        rs_token = sign(claims(), signing_key("RS256"))
        assert (await h.review(rs_token))[1]["status"]["authenticated"]
        assert (await h.review(rs_token))[1]["status"]["authenticated"]  # now from the cache
        assert h.server.cache.hits >= 1
        keyfile.write_bytes(signing_key("ES256").public_pem)  # RS256 withdrawn: the cache must forget it

        async def rs_refused() -> bool:
            return not (await h.review(rs_token))[1]["status"]["authenticated"]

        await wait_until(rs_refused, "the withdrawn key")
