"""API errors as the apiserver reports them: a `metav1.Status` body with reason, code, details.

Messages follow k8s.io/apimachinery/pkg/api/errors (e.g. `pods "x" not found`,
`Operation cannot be fulfilled on ...`), so clients that match on reason/code behave as against
the real server. Only the HTTP edge turns these into responses.
"""

from __future__ import annotations

from typing import Any, ClassVar

from nodeenv.kubeapi.kinds import Kind


class ApiError(Exception):
    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class AlreadyExists(ApiError):
    code, reason = 409, "AlreadyExists"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class Expired(ApiError):
    code, reason = 410, "Expired"


class UnsupportedMediaType(ApiError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(ApiError):
    code, reason = 422, "Invalid"


class TooManyRequests(ApiError):
    code, reason = 429, "TooManyRequests"


class Timeout(ApiError):
    code, reason = 504, "Timeout"


class InternalError(ApiError):
    code, reason = 500, "InternalError"


class ServiceUnavailable(ApiError):
    code, reason = 503, "ServiceUnavailable"


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
            405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
            415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}  # fmt: skip


def from_code(code: int, message: str) -> ApiError:
    """An error with `code` and the apiserver's reason for it (unknown codes: InternalError)."""
    reason = _REASONS.get(code, "InternalError")
    cls: type[ApiError] = type(reason, (ApiError,), {"code": code, "reason": reason})
    return cls(message)


def _details(kind: Kind, name: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if kind.group:
        d["group"] = kind.group
    d["kind"] = kind.plural
    return d


def not_found(kind: Kind, name: str) -> NotFound:
    return NotFound(f'{kind.qualified} "{name}" not found', _details(kind, name))


def already_exists(kind: Kind, name: str) -> AlreadyExists:
    return AlreadyExists(f'{kind.qualified} "{name}" already exists', _details(kind, name))


def conflict(kind: Kind, name: str, why: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {kind.qualified} "{name}": {why}', _details(kind, name)
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: Kind, name: str, causes: list[tuple[str, str, str]]) -> Invalid:
    """causes: (reason e.g. FieldValueInvalid, field path, message after the field path)."""
    text = ", ".join(f"{field}: {msg}" for _, field, msg in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details: dict[str, Any] = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    group_kind = f"{kind.kind}.{kind.group}" if kind.group else kind.kind  # schema.GroupKind.String()
    return Invalid(f'{group_kind} "{name}" is invalid: {text}', details)


def method_not_allowed() -> MethodNotAllowed:
    return MethodNotAllowed("the server does not allow this method on the requested resource")
