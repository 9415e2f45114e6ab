"""JWT validation: PyJWT's algorithm implementations (on `cryptography`), allow-listed algorithms,
family-matched keys.

The header's `alg` picks the key family (keys.ALG_FAMILY); a token is only ever verified with
keys of that family and with that single algorithm, so `alg: none` and "HS256 signed with the
RSA public key" have nothing to verify against. Signature first, then exp/nbf/iat with a bounded
leeway, issuer and the presence of the claims we need. Every failure is a TokenRejected with a
short reason that never quotes the token. Key-related header fields (jku, x5u, jwk, x5c) are
never followed: keys come only from the configured sources.

Why not `jwt.decode()`: PyJWT 2.15 checks every base64url character of every segment in a
Python generator, which costs ~170 us per token on our nodes (3x the RSA verification itself)
and `get_unverified_header()` pays it again. The compact serialization is split and checked
here with one compiled regex; the signature check is PyJWT's `Algorithm.prepare_key/verify`
(HMAC compare_digest, RSA PKCS#1 v1.5, ECDSA raw→DER, Ed25519) and the registered-claim rules
are PyJWT's (exp <= now - leeway: expired; nbf or iat > now + leeway: not yet valid).
tests/unit/webhook/test_webhook_tokens.py checks that both agree on every forged-token class.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.algorithms import Algorithm

from webhook.errors import TokenRejected, UnknownSigningKey
from webhook.keys import ALG_FAMILY, KeySet, VerificationKey

ALLOWED_ALGORITHMS = frozenset(ALG_FAMILY)
MAX_LEEWAY = 300.0
MAX_CANDIDATE_KEYS = 8
_COMPACT = re.compile(r"([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]*)")
_NEVER_FOLLOWED = ("crit",)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenPolicy:
    issuers: tuple[str, ...]
    algorithms: frozenset[str] = ALLOWED_ALGORITHMS
    leeway: float = 30.0
    max_token_bytes: int = 16384
    required_claims: tuple[str, ...] = ("exp", "iss", "sub", "aud")

    def __post_init__(self) -> None:
        if not self.issuers:
            raise ValueError("at least one trusted issuer is required")
        if not self.algorithms or not self.algorithms <= ALLOWED_ALGORITHMS:
            raise ValueError(f"algorithms must be a subset of {sorted(ALLOWED_ALGORITHMS)}")
        if not 0 <= self.leeway <= MAX_LEEWAY:
            raise ValueError(f"leeway must be between 0 and {MAX_LEEWAY:.0f} s")


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    claims: dict[str, Any]
    audiences: tuple[str, ...]
    expires_at: float


def _b64(segment: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise TokenRejected("malformed token") from None


def _json_object(segment: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(segment))
    except ValueError:  # also UnicodeDecodeError
        raise TokenRejected("malformed token") from None
    if not isinstance(value, dict):
        raise TokenRejected("malformed token")
    return value


class TokenValidator:
    def __init__(self, policy: TokenPolicy, clock: Callable[[], float] = time.time) -> None:
        self.policy, self._clock = policy, clock
        self._algorithms: dict[str, Algorithm] = {
            name: jwt.get_algorithm_by_name(name) for name in policy.algorithms
        }

    def validate(self, token: str, keys: KeySet) -> VerifiedToken:
        """Verify `token` against `keys`; raise TokenRejected (UnknownSigningKey: no such kid)."""
        if len(token) > self.policy.max_token_bytes:
            raise TokenRejected("token too long")
        m = _COMPACT.fullmatch(token)
        if m is None:
            raise TokenRejected("malformed token")
        head, body, sig = m.groups()
        alg, kid = self._header(_json_object(head))
        candidates = keys.candidates(alg, kid)
        if not candidates:
            raise UnknownSigningKey(kid)
        if not self._verify(self._algorithms[alg], f"{head}.{body}".encode(), _b64(sig), candidates):
            if kid is not None and not keys.has_kid(kid):
                raise UnknownSigningKey(kid)  # only kid-agnostic keys tried: a JWKS refetch may know it
            raise TokenRejected("invalid signature")
        claims = _json_object(body)
        self._check_claims(claims)
        return VerifiedToken(claims, _audiences(claims["aud"]), float(claims["exp"]))

    def _header(self, header: dict[str, Any]) -> tuple[str, str | None]:
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.policy.algorithms:
            raise TokenRejected("algorithm not allowed")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("malformed token")
        if any(h in header for h in _NEVER_FOLLOWED):
            raise TokenRejected("unsupported critical header")
        return alg, kid

    @staticmethod
    def _verify(algorithm: Algorithm, signed: bytes, sig: bytes, candidates: list[VerificationKey]) -> bool:
        for key in candidates[:MAX_CANDIDATE_KEYS]:
            try:
                if algorithm.verify(signed, algorithm.prepare_key(key.key), sig):
                    return True
            except (jwt.InvalidKeyError, ValueError, TypeError):
                continue
        return False

    def _check_claims(self, claims: dict[str, Any]) -> None:
        for name in self.policy.required_claims:
            if name not in claims:
                raise TokenRejected(f"missing claim {name}")
        now, leeway = self._clock(), self.policy.leeway
        for name in ("exp", "nbf", "iat"):
            value = claims.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise TokenRejected(f"malformed claim {name}")
        if "exp" in claims and claims["exp"] <= now - leeway:
            raise TokenRejected("token expired")
        if claims.get("nbf", -1) > now + leeway or claims.get("iat", -1) > now + leeway:
            raise TokenRejected("token not yet valid")
        if claims.get("iss") not in self.policy.issuers:
            raise TokenRejected("wrong issuer")


def _audiences(aud: Any) -> tuple[str, ...]:
    if isinstance(aud, str):
        return (aud,)
    if isinstance(aud, list) and aud and all(isinstance(a, str) for a in aud):
        return tuple(aud)
    raise TokenRejected("malformed claim aud")
