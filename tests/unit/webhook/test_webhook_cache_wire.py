"""The review cache (bounded, TTL, token exp, hashed keys) and TokenReview parsing/replies."""

from __future__ import annotations

import json

import pytest

from webhook.cache import CachedIdentity, ReviewCache
from webhook.errors import BadRequest
from webhook.wire import TokenReview, TokenReviewStatus, UserInfo, review_reply, status_reply

USER = UserInfo(username="u", uid="1", groups=("g",))
IDENT = CachedIdentity(USER, ("aud",))


def test_cache_hits_until_ttl_or_token_exp() -> None:
    now = [100.0]
    cache = ReviewCache(max_entries=10, ttl=10, clock=lambda: now[0])
    k1, k2 = ReviewCache.key("tok-1"), ReviewCache.key("tok-2")
    cache.put(k1, IDENT, token_exp=1000)
    cache.put(k2, IDENT, token_exp=103)  # the token expires before the TTL
    now[0] = 104
    assert cache.get(k1) is IDENT and cache.get(k2) is None
    now[0] = 111
    assert cache.get(k1) is None
    assert (cache.hits, cache.misses) == (1, 2)
    assert cache.hit_ratio() == pytest.approx(1 / 3)


def test_cache_is_bounded_and_keyed_by_hash() -> None:
    cache = ReviewCache(max_entries=3, ttl=60)
    for i in range(5):
        cache.put(ReviewCache.key(f"tok-{i}"), IDENT, token_exp=float("inf"))
    assert len(cache) == 3
    assert cache.get(ReviewCache.key("tok-0")) is None and cache.get(ReviewCache.key("tok-4")) is IDENT
    assert all(b"tok" not in k for k in cache._entries)
    assert len(ReviewCache.key("tok-0")) == 32
    cache.clear()
    assert len(cache) == 0


def test_cache_off() -> None:
    cache = ReviewCache(ttl=0)
    cache.put(ReviewCache.key("t"), IDENT, token_exp=float("inf"))
    assert cache.get(ReviewCache.key("t")) is None


def body(**over: object) -> bytes:
    doc: dict[str, object] = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "abc", "audiences": ["a", "b"]},
    }
    doc.update(over)
    return json.dumps(doc).encode()


def test_parse_v1_and_v1beta1() -> None:
    r = TokenReview.from_json(body())
    assert (r.api_version, r.token, r.audiences) == ("authentication.k8s.io/v1", "abc", ("a", "b"))
    r = TokenReview.from_json(body(apiVersion="authentication.k8s.io/v1beta1", spec={"token": "x"}))
    assert (r.api_version, r.audiences) == ("authentication.k8s.io/v1beta1", ())


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "not a JSON object"),
        (body(kind="SubjectAccessReview"), "kind must be TokenReview"),
        (body(apiVersion="authentication.k8s.io/v2"), "apiVersion"),
        (body(spec=None), "spec is missing"),
        (body(spec={}), "spec.token is missing"),
        (body(spec={"token": ""}), "spec.token is missing"),
        (body(spec={"token": 5}), "spec.token is missing"),
        (body(spec={"token": "t", "audiences": "a"}), "audiences"),
    ],
)
def test_malformed_reviews(raw: bytes, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        TokenReview.from_json(raw)


def test_replies() -> None:
    ok = TokenReviewStatus(
        authenticated=True,
        user=UserInfo(username="u", uid="1", groups=("g",), extra={"roles": ("r",)}),
        audiences=("a",),
    )
    doc = json.loads(review_reply("authentication.k8s.io/v1beta1", ok))
    assert doc == {
        "apiVersion": "authentication.k8s.io/v1beta1",
        "kind": "TokenReview",
        "status": {
            "authenticated": True,
            "user": {"username": "u", "uid": "1", "groups": ["g"], "extra": {"roles": ["r"]}},
            "audiences": ["a"],
        },
    }
    doc = json.loads(review_reply("authentication.k8s.io/v1", TokenReviewStatus.rejected("token expired")))
    assert doc["status"] == {"authenticated": False, "error": "token expired"}
    assert json.loads(status_reply(400, "BadRequest", "m"))["code"] == 400
