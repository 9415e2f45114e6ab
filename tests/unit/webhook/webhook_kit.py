"""Shared by the webhook tests: signing keys, claims, tokens (good and forged), settings."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from webhook.devcerts import PrivateKey, new_key, public_pem
from webhook.keys import thumbprint

ISSUER = "https://iam.test.plasmacloud.io"
AUDIENCE = "k8shost-test"
USER_ID = "user-550e8400-e29b-41d4-a716-446655440000"
HMAC_SECRET = b"a-shared-secret-of-at-least-thirty-two-bytes!"


@dataclass(frozen=True)
class SigningKey:
    alg: str
    private: Any
    kid: str | None

    @property
    def public_pem(self) -> bytes:
        return public_pem(self.private)


@functools.cache
def signing_key(alg: str, n: int = 0) -> SigningKey:
    """One key per (alg, n) for the whole session (RSA generation is slow)."""
    if alg == "HS256":
        return SigningKey(alg, HMAC_SECRET if n == 0 else HMAC_SECRET + bytes([n]) * 8, None)
    key: PrivateKey = new_key(alg)
    return SigningKey(alg, key, thumbprint(key.public_key()))


def claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "sub": USER_ID,
        "aud": [AUDIENCE],
        "iat": now,
        "exp": now + 600,
        "org_id": "org-123",
        "project_id": "proj-456",
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


def sign(payload: dict[str, Any], key: SigningKey, headers: dict[str, Any] | None = None) -> str:
    hdr = {"kid": key.kid} if key.kid else {}
    hdr.update(headers or {})
    return jwt.encode(payload, key.private, algorithm=key.alg, headers=hdr or None)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_token(header: dict[str, Any], payload: dict[str, Any], signature: bytes = b"") -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}.{b64(signature)}"


def alg_none_token(payload: dict[str, Any]) -> str:
    return raw_token({"alg": "none", "typ": "JWT"}, payload)


def hs256_with_public_key(payload: dict[str, Any], key: SigningKey) -> str:
    """The classic confusion attack: HMAC keyed with the verifier's own public key PEM."""
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    body = b64(json.dumps(payload).encode())
    mac = hmac.new(key.public_pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"


def tamper(token: str, **changes: Any) -> str:
    head, body, sig = token.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload.update(changes)
    return f"{head}.{b64(json.dumps(payload).encode())}.{sig}"


def write_public_keys(dirpath: Path, *keys: SigningKey) -> list[Path]:
    out = []
    for k in keys:
        p = dirpath / f"{k.alg}-{k.kid}.pub"
        p.write_bytes(k.public_pem)
        out.append(p)
    return out


def jwks_doc(*keys: SigningKey) -> dict[str, Any]:
    docs = []
    for k in keys:
        jwk = json.loads(jwt.get_algorithm_by_name(k.alg).to_jwk(k.private.public_key()))
        jwk.update({"kid": k.kid, "alg": k.alg, "use": "sig"})
        docs.append(jwk)
    return {"keys": docs}
