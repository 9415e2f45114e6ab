"""TokenReviews over real HTTPS + mTLS on loopback: versions, mapping rows, audiences, forgeries,
malformed bodies, metrics and logs."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import pytest

from tests.integration.webhook.conftest import V1, V1BETA1, Harness
from tests.unit.webhook.webhook_kit import (
    AUDIENCE,
    USER_ID,
    alg_none_token,
    claims,
    hs256_with_public_key,
    sign,
    signing_key,
    tamper,
)

ORG_ADMIN = dict(
    email="admin@example.com", email_verified=True, roles=["org_admin"], projects=["proj-456", "proj-789"]
)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA", "HS256"])
async def test_authenticated_in_the_request_version(webhook: Harness, api_version: str, alg: str) -> None:
    token = sign(claims(email="user@example.com", email_verified=True, roles=["org_admin"]), signing_key(alg))
    code, doc, headers = await webhook.review(token, api_version)
    assert code == 200 and headers["Content-Type"].startswith("application/json")
    assert doc["apiVersion"] == api_version and doc["kind"] == "TokenReview"
    assert doc["status"]["authenticated"] is True
    assert doc["status"]["user"] == {  # the spec's response example (plus the org admin group)
        "username": "user@example.com",
        "uid": USER_ID,
        "groups": [
            "org:org-123",
            "org:org-123:admin",
            "project:proj-456",
            "system:authenticated",
            "k8s:org-admin",
        ],
        "extra": {"org_id": ["org-123"], "project_id": ["proj-456"], "roles": ["org_admin"]},
    }


@pytest.mark.parametrize(
    "over, username, groups",
    [
        (
            dict(email="user@example.com", email_verified=True),
            "user@example.com",
            ["org:org-123", "project:proj-456", "system:authenticated"],
        ),
        (
            dict(email="user@example.com", email_verified=False),
            USER_ID,
            ["org:org-123", "project:proj-456", "system:authenticated"],
        ),
        ({}, USER_ID, ["org:org-123", "project:proj-456", "system:authenticated"]),
        (
            dict(sub="sa-77", principal_type="service_account", sa_name="deployer"),
            "sa-deployer@proj-456",
            ["org:org-123", "project:proj-456", "system:serviceaccounts"],
        ),
        (
            ORG_ADMIN,
            "admin@example.com",
            [
                "org:org-123",
                "org:org-123:admin",
                "project:proj-456",
                "project:proj-789",
                "system:authenticated",
                "k8s:org-admin",
            ],
        ),
    ],
    ids=["user-email", "user-email-unverified", "user-id", "service-account", "org-admin"],
)
async def test_mapping_table_rows(
    webhook: Harness, over: dict[str, object], username: str, groups: list[str]
) -> None:
    token = sign(claims(**over), signing_key("ES256"))
    code, doc, _ = await webhook.review(token)
    assert code == 200, doc
    user = doc["status"]["user"]
    assert (user["username"], user["groups"]) == (username, groups)
    assert user["uid"] == claims(**over)["sub"]


async def test_system_identity_is_refused(webhook: Harness) -> None:
    token = sign(claims(email="system:masters@x", email_verified=True), signing_key("ES256"))
    code, doc, _ = await webhook.review(token)
    assert code == 200 and doc["status"] == {
        "authenticated": False,
        "error": "system: identities are refused",
    }


async def test_audiences(webhook: Harness) -> None:
    token = sign(claims(aud=[AUDIENCE, "https://kubernetes.default.svc"]), signing_key("RS256"))
    code, doc, _ = await webhook.review(token, audiences=["https://kubernetes.default.svc", "other"])
    assert code == 200 and doc["status"]["audiences"] == ["https://kubernetes.default.svc"]
    code, doc, _ = await webhook.review(token, audiences=["other"])
    assert doc["status"] == {"authenticated": False, "error": "token audience not accepted"}
    code, doc, _ = await webhook.review(token)
    assert doc["status"]["authenticated"] and "audiences" not in doc["status"]
    only_other = sign(claims(aud="other"), signing_key("RS256"))
    code, doc, _ = await webhook.review(only_other)
    assert doc["status"] == {"authenticated": False, "error": "token audience not accepted"}


def _other_key(c: dict[str, object]) -> str:
    return sign(c, signing_key("RS256", 1), {"kid": signing_key("RS256").kid})


def _halve(token: str) -> str:
    head, body, _ = token.split(".")
    return f"{head}.{body[: len(body) // 2]}"


FORGERIES: dict[str, tuple[Callable[[], str], str]] = {
    "alg-none": (lambda: alg_none_token(claims()), "algorithm not allowed"),
    "hs256-with-rsa-public-key": (
        lambda: hs256_with_public_key(claims(), signing_key("RS256")),
        "invalid signature",
    ),
    "wrong-key": (lambda: _other_key(claims()), "invalid signature"),
    "expired": (lambda: sign(claims(exp=int(time.time()) - 120), signing_key("RS256")), "token expired"),
    "not-yet-valid": (
        lambda: sign(claims(nbf=int(time.time()) + 120), signing_key("RS256")),
        "token not yet valid",
    ),
    "wrong-issuer": (lambda: sign(claims(iss="https://evil"), signing_key("RS256")), "wrong issuer"),
    "wrong-audience": (lambda: sign(claims(aud="evil"), signing_key("RS256")), "token audience not accepted"),
    "tampered-payload": (
        lambda: tamper(sign(claims(), signing_key("ES256")), org_id="org-evil"),
        "invalid signature",
    ),
    "truncated-mid-payload": (lambda: _halve(sign(claims(), signing_key("EdDSA"))), "malformed token"),
    "truncated-to-two-parts": (
        lambda: sign(claims(), signing_key("EdDSA")).rsplit(".", 1)[0],
        "malformed token",
    ),
    "too-long": (lambda: "x" * 20000, "token too long"),
    "garbage": (lambda: "this is no JWT \u00e9\u00e9", "malformed token"),
    # PEM keys carry no kid: they are tried whatever the token's kid says, and when none verifies
    # the kid is reported unknown (with a JWKS source that triggers a refetch: test_webhook_jwks).
    "unknown-kid": (lambda: sign(claims(), signing_key("ES256", 5)), "unknown signing key"),
}


@pytest.mark.parametrize("name", list(FORGERIES))
async def test_forged_tokens_are_not_authenticated(
    webhook: Harness, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, reason = FORGERIES[name]
    token = make()
    caplog.set_level(logging.DEBUG)
    lines = webhook.capture_review_lines()
    code, doc, _ = await webhook.review(token)
    assert code == 200
    assert doc["status"] == {"authenticated": False, "error": reason}
    assert token not in json.dumps(doc)
    for text in (caplog.text, lines.getvalue()):
        assert token not in text and token.split(".")[0] not in text
    (line,) = [json.loads(x) for x in lines.getvalue().splitlines()]
    assert (line["result"], line["reason"], line["user"], line["groups"]) == ("rejected", reason, None, 0)


async def test_one_megabyte_token_is_a_bad_request(webhook: Harness) -> None:
    token = "A" * (1 << 20)
    code, doc, _ = await webhook.review(token)
    assert code == 400
    assert doc["kind"] == "Status" and doc["reason"] == "BadRequest" and "larger than" in doc["message"]
    assert token[:100] not in json.dumps(doc)


@pytest.mark.parametrize(
    "body, message",
    [
        (b"not json", "not JSON"),
        (b'{"apiVersion": "authentication.k8s.io/v1", "kind": "Pod", "spec": {"token": "x"}}', "kind"),
        (b'{"apiVersion": "v1", "kind": "TokenReview", "spec": {"token": "x"}}', "apiVersion"),
        (b'{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}', "token"),
    ],
)
async def test_malformed_bodies_get_400_without_a_trace(webhook: Harness, body: bytes, message: str) -> None:
    code, doc, _ = await webhook.post(body)
    assert code == 400 and message in doc["message"] and doc["code"] == 400
    assert "Traceback" not in json.dumps(doc)


async def test_log_line_per_review_without_the_token(
    webhook: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    lines = webhook.capture_review_lines()
    token = sign(claims(**ORG_ADMIN), signing_key("RS256"))
    await webhook.review(token)
    (line,) = [json.loads(x) for x in lines.getvalue().splitlines()]
    # 6 groups: org:<org>:admin besides org:<org> since issue 31
    assert line["user"] == "admin@example.com" and line["groups"] == 6
    assert line["result"] == "authenticated" and line["reason"] is None
    assert line["msg"] == "review authenticated" and line["logger"] == "webhook.review"
    for text in (caplog.text, lines.getvalue()):
        assert token not in text and token.split(".")[2] not in text


async def test_health_and_metrics(webhook: Harness) -> None:
    assert await webhook.health("/healthz") == (200, "ok")
    assert await webhook.health("/readyz") == (200, "ok")
    good = sign(claims(), signing_key("ES256"))
    for token in (good, good, good, "garbage"):
        await webhook.review(token)
    await webhook.post(b"{")
    assert await webhook.metric('iam_webhook_reviews_total{result="authenticated"}') == 3
    assert await webhook.metric('iam_webhook_reviews_total{result="rejected"}') == 1
    assert await webhook.metric('iam_webhook_reviews_total{result="bad_request"}') == 1
    assert await webhook.metric("iam_webhook_review_duration_seconds_count") == 5
    assert await webhook.metric('iam_webhook_cache_lookups_total{result="hit"}') == 2
    assert await webhook.metric("iam_webhook_cache_hit_ratio") == pytest.approx(2 / 4)
    assert await webhook.metric("iam_webhook_keys") == 4
    assert 0 <= await webhook.metric("iam_webhook_keyset_age_seconds") < 600
    async with webhook.session.get(
        webhook.url.replace("/apis/iam.plasmacloud.io/v1/authenticate", "/readyz")
    ) as r:
        assert r.status == 200  # also on the mTLS port


async def test_wrong_method_and_path(webhook: Harness) -> None:
    async with webhook.session.get(webhook.url) as r:
        assert r.status == 405
    async with webhook.session.post(webhook.url + "x", data=b"{}") as r:
        assert r.status == 404


async def test_rejection_in_v1beta1(webhook: Harness) -> None:
    code, doc, _ = await webhook.review("garbage", V1BETA1)
    assert code == 200
    assert doc == {
        "apiVersion": V1BETA1,
        "kind": "TokenReview",
        "status": {"authenticated": False, "error": "malformed token"},
    }
