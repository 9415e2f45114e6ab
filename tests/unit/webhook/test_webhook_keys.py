"""Key parsing and key-family tagging, file reload, Cache-Control, KeyStore refetch rules."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.unit.webhook.webhook_kit import jwks_doc, signing_key
from webhook.devcerts import issue_ca, private_pem
from webhook.errors import KeysUnavailable
from webhook.keys import (
    FileKeys,
    KeyLoadError,
    KeySet,
    KeyStore,
    RefreshPolicy,
    family_of,
    max_age,
    parse_hmac_secret,
    parse_jwks,
    parse_key_file,
    thumbprint,
)
from webhook.metrics import Metrics


def test_each_key_type_gets_its_family() -> None:
    for alg, family in (("RS256", "RSA"), ("ES256", "EC-P256"), ("EdDSA", "Ed25519")):
        (key,) = parse_key_file(signing_key(alg).public_pem, "t")
        assert key.family == family and key.kid == signing_key(alg).kid and key.any_kid


def test_weak_and_unsupported_keys_are_refused() -> None:
    with pytest.raises(KeyLoadError, match="1024 bits"):
        family_of(rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key())
    with pytest.raises(KeyLoadError, match="secp384r1"):
        family_of(ec.generate_private_key(ec.SECP384R1()).public_key())
    with pytest.raises(KeyLoadError, match="shorter"):
        family_of(b"short")


def test_pem_private_keys_are_not_public_keys() -> None:
    with pytest.raises(KeyLoadError, match="PRIVATE KEY"):
        parse_key_file(private_pem(signing_key("ES256").private), "t")


def test_certificate_public_key_is_used() -> None:
    cert, _ = issue_ca()
    (key,) = parse_key_file(cert.public_bytes(serialization.Encoding.PEM), "t")
    assert key.family == "EC-P256"


def test_a_public_key_is_never_an_hmac_secret() -> None:
    with pytest.raises(KeyLoadError, match="public key"):
        parse_hmac_secret(signing_key("RS256").public_pem, "t")


def test_jwks_keeps_kids_and_skips_unusable_keys() -> None:
    doc = jwks_doc(signing_key("RS256"), signing_key("ES256"), signing_key("EdDSA"))
    doc["keys"].append({"kty": "RSA", "kid": "broken", "n": "AQAB"})
    doc["keys"].append({**doc["keys"][0], "kid": "enc", "use": "enc"})
    keys = parse_jwks(doc, "t")
    assert [(k.family, k.kid) for k in keys] == [
        ("RSA", signing_key("RS256").kid),
        ("EC-P256", signing_key("ES256").kid),
        ("Ed25519", signing_key("EdDSA").kid),
    ]


def test_candidates_only_match_the_algorithm_family_and_kid() -> None:
    keys = KeySet(tuple(parse_jwks(jwks_doc(signing_key("RS256"), signing_key("ES256")), "t")))
    assert [k.family for k in keys.candidates("RS256", None)] == ["RSA"]
    assert keys.candidates("HS256", None) == []
    assert keys.candidates("RS256", "other") == []
    assert keys.candidates("RS256", signing_key("RS256").kid)[0].family == "RSA"


def test_thumbprint_is_rfc7638() -> None:
    # RFC 7638 section 3.1 example key and its thumbprint.
    n = int.from_bytes(
        base64.urlsafe_b64decode(
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECP"
            "ebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY"
            "368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0f"
            "M4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw=="
        ),
        "big",
    )
    key = rsa.RSAPublicNumbers(65537, n).public_key()
    assert thumbprint(key) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_cache_control_max_age() -> None:
    assert max_age("public, max-age=120") == 120
    assert max_age("s-maxage=5, max-age=60") == 60
    assert max_age("no-store") == 0
    assert max_age(None) is None and max_age("public") is None


def test_file_keys_reload_on_change_and_keep_last_good(tmp_path: Path) -> None:
    path = tmp_path / "keys.pem"
    path.write_bytes(signing_key("RS256").public_pem)
    files = FileKeys([path])
    assert files.reload_if_changed() and files.keys[0].family == "RSA"
    assert not files.reload_if_changed()  # unchanged
    path.write_text(json.dumps(jwks_doc(signing_key("ES256"))))
    os.utime(path, ns=(1, 1))
    assert files.reload_if_changed() and files.keys[0].kid == signing_key("ES256").kid
    path.write_text("garbage")
    assert not files.reload_if_changed()
    assert files.keys[0].kid == signing_key("ES256").kid  # last good kept


async def test_store_without_jwks_never_raises_on_unknown_kid(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    path.write_bytes(signing_key("ES256").public_pem)
    changes: list[int] = []
    store = KeyStore(FileKeys([path]), None, RefreshPolicy(file_poll=3600))
    store.on_change(lambda: changes.append(1))
    await store.start()
    try:
        assert store.keyset and changes == [1]
        await store.refetch_for_unknown_kid()
        assert store.age() < 60
    finally:
        await store.stop()


class _DeadJwks:
    """A JwksKeys stand-in whose issuer is down: only for the rate-limit bookkeeping."""

    def __init__(self) -> None:
        self.keys: tuple[object, ...] = ()
        self.loaded_at = None
        self.healthy = False
        self.fetches = 0

    async def fetch(self) -> float | None:
        from webhook.keys import KeyLoadError

        self.fetches += 1
        raise KeyLoadError("down")


async def test_unknown_kid_with_issuer_down_is_unavailable_and_rate_limited() -> None:
    now = [1000.0]
    jwks = _DeadJwks()
    store = KeyStore(None, jwks, RefreshPolicy(unknown_kid_refetch=30), clock=lambda: now[0])  # type: ignore[arg-type]
    await store._fetch_jwks()
    assert jwks.fetches == 1 and not store.keyset
    with pytest.raises(KeysUnavailable):
        await store.refetch_for_unknown_kid()
    assert jwks.fetches == 2
    now[0] += 29
    with pytest.raises(KeysUnavailable):
        await store.refetch_for_unknown_kid()
    assert jwks.fetches == 2  # within 30 s of the last unknown-kid refetch: no new fetch
    now[0] += 2
    with pytest.raises(KeysUnavailable) as e:
        await store.refetch_for_unknown_kid()
    assert jwks.fetches == 3 and e.value.headers() == {"Retry-After": "5"}
    assert store.jwks_failures == 3
    metrics = Metrics(None, lambda: 0, store.age, lambda: store.jwks_failures)
    assert metrics.registry.get_sample_value("iam_webhook_jwks_refresh_failures_total") == 3
