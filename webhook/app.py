"""The HTTP edge: aiohttp routes and the one place where exceptions become HTTP replies.

POST /apis/iam.plasmacloud.io/v1/authenticate   TokenReview v1 / v1beta1 → same apiVersion back
GET  /healthz  /readyz  /metrics                also served on the plain-HTTP health port

Replies: 200 with the TokenReview (authenticated or not); 400 metav1.Status for a malformed
body; 403 when a pinned client CN does not match; 503 + Retry-After when no decision is
possible (no keys, issuer unreachable); 500 without details for anything unexpected.
"""

from __future__ import annotations

import logging
import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.errors import BadRequest, Forbidden, KeysUnavailable, UnknownSigningKey, WebhookError
from webhook.keys import KeyStore
from webhook.metrics import Metrics
from webhook.review import Reviewer
from webhook.reviewlog import ReviewLog
from webhook.settings import PATH
from webhook.tls import peer_common_name
from webhook.wire import TokenReview, TokenReviewStatus, review_reply, status_reply

log = logging.getLogger(__name__)

_RESULT_OF_ERROR = {BadRequest: "bad_request", Forbidden: "forbidden", KeysUnavailable: "unavailable"}
REVIEWER: web.AppKey[Reviewer] = web.AppKey("reviewer", Reviewer)
KEYSTORE: web.AppKey[KeyStore] = web.AppKey("keystore", KeyStore)
METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)
CLIENT_CN: web.AppKey[str | None] = web.AppKey("client_cn", str)
MAX_BODY: web.AppKey[int] = web.AppKey("max_body", int)
REVIEW_LOG: web.AppKey[ReviewLog] = web.AppKey("review_log", ReviewLog)


async def authenticate(request: web.Request) -> web.Response:
    t0 = time.perf_counter()
    app = request.app
    try:
        _check_client(request, app[CLIENT_CN])
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise BadRequest(f"request body larger than {app[MAX_BODY]} bytes") from None
        req = TokenReview.from_json(body)
        status = await _decide(app[REVIEWER], app[KEYSTORE], req)
    except WebhookError as e:
        outcome = _RESULT_OF_ERROR.get(type(e), "error")
        app[METRICS].observe(outcome, time.perf_counter() - t0)
        extra = {"result": outcome, "reason": e.message, "status": e.http_status}
        log.warning("review not decided: %s", e.message, extra=extra)
        return _error(e.http_status, e.reason, e.message, e.headers())
    except Exception:
        app[METRICS].observe("error", time.perf_counter() - t0)
        log.exception("review crashed")
        return _error(500, "InternalError", "internal error", {})
    result = "authenticated" if status.authenticated else "rejected"
    app[METRICS].observe(result, time.perf_counter() - t0)
    user = status.user
    app[REVIEW_LOG].record(
        result,
        user=user.username if user else None,
        groups=len(user.groups) if user else 0,
        reason=status.error or None,
        cached=app[REVIEWER].last_cache_hit,
        api_version=req.api_version,
    )
    return web.Response(body=review_reply(req.api_version, status), content_type="application/json")


async def _decide(reviewer: Reviewer, keys: KeyStore, req: TokenReview) -> TokenReviewStatus:
    try:
        return reviewer.review(req)
    except UnknownSigningKey:
        await keys.refetch_for_unknown_kid()  # rate-limited; raises KeysUnavailable if issuer down
    try:
        return reviewer.review(req)
    except UnknownSigningKey as e:
        return TokenReviewStatus.rejected(e.reason)


def _check_client(request: web.Request, pinned_cn: str | None) -> None:
    """TLS already verified the client certificate against the CA; here only the optional CN pin."""
    if pinned_cn is None:
        return
    transport = request.transport
    cn = peer_common_name(transport.get_extra_info("peercert") if transport else None)
    if cn != pinned_cn:
        raise Forbidden("client certificate CN is not the allowed one")


def _error(code: int, reason: str, message: str, headers: dict[str, str]) -> web.Response:
    body = status_reply(code, reason, message)
    return web.Response(status=code, body=body, headers=headers, content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    if request.app[KEYSTORE].keyset:
        return web.Response(text="ok")
    return web.Response(status=503, text="no usable verification keys", headers={"Retry-After": "5"})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _base(keys: KeyStore, stats: Metrics, client_max_size: int = 1024**2) -> web.Application:
    app = web.Application(client_max_size=client_max_size)
    app[KEYSTORE], app[METRICS] = keys, stats
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


def make_app(
    reviewer: Reviewer,
    keys: KeyStore,
    stats: Metrics,
    *,
    max_body: int,
    client_cn: str | None = None,
    review_log: ReviewLog | None = None,
) -> web.Application:
    app = _base(keys, stats, client_max_size=max_body)
    app[REVIEWER], app[CLIENT_CN], app[MAX_BODY] = reviewer, client_cn, max_body
    app[REVIEW_LOG] = review_log if review_log is not None else ReviewLog()
    app.router.add_post(PATH, authenticate)
    return app


def make_health_app(keys: KeyStore, stats: Metrics) -> web.Application:
    """/healthz, /readyz, /metrics over plain HTTP: kubelet probes carry no client certificate."""
    return _base(keys, stats)
