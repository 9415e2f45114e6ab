"""TokenReview (authentication.k8s.io/v1 and v1beta1) as frozen dataclasses, parsed once at the edge.

Both versions carry the same fields; the reply is written in the request's apiVersion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Self

from webhook.errors import BadRequest

API_VERSIONS = ("authentication.k8s.io/v1", "authentication.k8s.io/v1beta1")
KIND = "TokenReview"


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenReview:
    api_version: str
    token: str
    audiences: tuple[str, ...] = ()
    """spec.audiences; empty means the apiserver did not ask for specific audiences."""

    @classmethod
    def from_json(cls, body: bytes) -> Self:
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"body is not JSON: {type(e).__name__}") from None
        except RecursionError:  # a crash (500) before: deeper than json.loads recurses
            raise BadRequest("body is not JSON kube-apiserver sends: nested too deeply") from None
        if not isinstance(doc, dict):
            raise BadRequest("body is not a JSON object")
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if kind != KIND:
            raise BadRequest(f"kind must be {KIND}")
        if api_version not in API_VERSIONS:
            raise BadRequest(f"apiVersion must be one of {', '.join(API_VERSIONS)}")
        spec = doc.get("spec")
        if not isinstance(spec, dict):
            raise BadRequest("spec is missing")
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise BadRequest("spec.token is missing")
        return cls(api_version=api_version, token=token, audiences=_audiences(spec.get("audiences")))


def _audiences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise BadRequest("spec.audiences must be a list of strings")
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    username: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.username, "uid": self.uid, "groups": list(self.groups)}
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenReviewStatus:
    authenticated: bool
    user: UserInfo | None = None
    audiences: tuple[str, ...] = ()
    error: str = ""

    @classmethod
    def rejected(cls, reason: str) -> Self:
        return cls(authenticated=False, error=reason)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"authenticated": self.authenticated}
        if self.user is not None:
            out["user"] = self.user.to_json()
        if self.audiences:
            out["audiences"] = list(self.audiences)
        if self.error:
            out["error"] = self.error
        return out


# One encoder for every reply: json.dumps with non-default separators builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def review_reply(api_version: str, status: TokenReviewStatus) -> bytes:
    return _encode({"apiVersion": api_version, "kind": KIND, "status": status.to_json()}).encode()


def status_reply(code: int, reason: str, message: str) -> bytes:
    """A metav1.Status, the form Kubernetes uses for errors that are not a TokenReview."""
    doc = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "reason": reason,
           "code": code}  # fmt: skip
    return _encode(doc).encode()
