"""Errors of the webhook, each carrying the HTTP reply it becomes at the one edge (app.py).

Two families, kept apart on purpose because kube-apiserver treats them differently:

* `TokenRejected`: the token is bad. The reply is 200 with `authenticated: false` and the
  short `reason` in `status.error` (the apiserver caches that answer for its cache TTL).
* `WebhookError`: the request is bad (400) or the webhook cannot decide right now (503 with
  `Retry-After`; the apiserver does not cache it and retries).
"""

from __future__ import annotations

from typing import ClassVar


class TokenRejected(Exception):
    """The token does not authenticate anyone. `reason` is short and never contains the token."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnknownSigningKey(TokenRejected):
    """No key with the token's `kid` (and algorithm family) is loaded; a JWKS refetch may help."""

    def __init__(self, kid: str | None) -> None:
        super().__init__("unknown signing key")
        self.kid = kid


class WebhookError(Exception):
    http_status: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def headers(self) -> dict[str, str]:
        return {}


class BadRequest(WebhookError):
    http_status = 400
    reason = "BadRequest"


class Forbidden(WebhookError):
    """The client certificate verified but its CN is not the pinned one."""

    http_status = 403
    reason = "Forbidden"


class KeysUnavailable(WebhookError):
    """No usable verification keys (never loaded, or the issuer is unreachable for an unknown kid)."""

    http_status = 503
    reason = "ServiceUnavailable"

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}
