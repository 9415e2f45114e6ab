"""JWT validation with PyJWT (on `cryptography`): allow-listed algorithms, family-matched keys.

The header's `alg` picks the key family (keys.ALG_FAMILY); a token is only ever verified with
keys of that family and with that single algorithm, so `alg: none` and "HS256 signed with the
RSA public key" have nothing to verify against. Signature first, then exp/nbf/iat with a bounded
leeway, issuer and the presence of the claims we need. Every failure is a TokenRejected with a
short reason that never quotes the token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import jwt

from webhook.errors import TokenRejected, UnknownSigningKey
from webhook.keys import ALG_FAMILY, KeySet

log = logging.getLogger(__name__)

ALLOWED_ALGORITHMS = frozenset(ALG_FAMILY)
MAX_LEEWAY = 300.0
MAX_CANDIDATE_KEYS = 8

_REJECTIONS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "token expired"),
    (jwt.ImmatureSignatureError, "token not yet valid"),
    (jwt.InvalidIssuedAtError, "invalid iat"),
    (jwt.InvalidIssuerError, "wrong issuer"),
    (jwt.InvalidAlgorithmError, "algorithm not allowed"),
    (jwt.DecodeError, "malformed token"),
)


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


class TokenValidator:
    def __init__(self, policy: TokenPolicy) -> None:
        self.policy = policy
        self._jwt = jwt.PyJWT()
        self._options: Any = {"verify_aud": False, "require": list(policy.required_claims)}

    def validate(self, token: str, keys: KeySet) -> VerifiedToken:
        """Verify `token` against `keys`; raise TokenRejected (UnknownSigningKey: no such kid)."""
        if len(token) > self.policy.max_token_bytes:
            raise TokenRejected("token too long")
        alg, kid = self._header(token)
        candidates = keys.candidates(alg, kid)
        if not candidates:
            raise UnknownSigningKey(kid)
        for key in candidates[:MAX_CANDIDATE_KEYS]:
            try:
                claims = self._jwt.decode(
                    token,
                    key.key,  # type: ignore[arg-type]  # bytes or a cryptography public key
                    algorithms=[alg],
                    options=self._options,
                    issuer=self.policy.issuers,
                    leeway=self.policy.leeway,
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.MissingRequiredClaimError as e:
                raise TokenRejected(f"missing claim {e.claim}") from None
            except jwt.PyJWTError as e:
                raise TokenRejected(_reason(e)) from None
            return VerifiedToken(claims, _audiences(claims.get("aud")), float(claims["exp"]))
        raise TokenRejected("invalid signature")

    def _header(self, token: str) -> tuple[str, str | None]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("malformed token") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.policy.algorithms:
            raise TokenRejected("algorithm not allowed")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("malformed token")
        if "crit" in header:
            raise TokenRejected("unsupported critical header")
        return alg, kid


def _reason(e: Exception) -> str:
    for cls, reason in _REJECTIONS:
        if isinstance(e, cls):
            return reason
    return "invalid token"


def _audiences(aud: Any) -> tuple[str, ...]:
    if isinstance(aud, str):
        return (aud,)
    if isinstance(aud, list) and aud and all(isinstance(a, str) for a in aud):
        return tuple(aud)
    raise TokenRejected("malformed claim aud")
