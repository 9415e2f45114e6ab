"""TokenValidator against in-memory key sets: algorithms, key families, claims, forgeries."""

from __future__ import annotations

import time

import jwt
import pytest

from tests.unit.webhook.webhook_kit import (
    ISSUER,
    alg_none_token,
    claims,
    hs256_with_public_key,
    raw_token,
    sign,
    signing_key,
    tamper,
)
from webhook.errors import TokenRejected, UnknownSigningKey
from webhook.keys import KeySet, VerificationKey, family_of
from webhook.tokens import TokenPolicy, TokenValidator


def keyset(*algs: str) -> KeySet:
    out = []
    for alg in algs:
        k = signing_key(alg)
        key = k.private if alg == "HS256" else k.private.public_key()
        out.append(VerificationKey(family_of(key), key, k.kid, "test"))
    return KeySet(tuple(out))


VALIDATOR = TokenValidator(TokenPolicy(issuers=(ISSUER,), leeway=30))


@pytest.mark.parametrize("alg", ["HS256", "RS256", "ES256", "EdDSA"])
def test_each_allowed_algorithm_verifies(alg: str) -> None:
    token = sign(claims(), signing_key(alg))
    v = VALIDATOR.validate(token, keyset("HS256", "RS256", "ES256", "EdDSA"))
    assert v.claims["sub"] == claims()["sub"]
    assert v.audiences == ("k8shost-test",)


def test_alg_none_is_refused() -> None:
    with pytest.raises(TokenRejected, match="algorithm not allowed"):
        VALIDATOR.validate(alg_none_token(claims()), keyset("RS256", "HS256"))


def test_hmac_with_the_rsa_public_key_finds_no_hmac_key() -> None:
    token = hs256_with_public_key(claims(), signing_key("RS256"))
    with pytest.raises(UnknownSigningKey):
        VALIDATOR.validate(token, keyset("RS256"))


def test_hmac_with_the_rsa_public_key_fails_against_the_real_secret() -> None:
    token = hs256_with_public_key(claims(), signing_key("RS256"))
    with pytest.raises(TokenRejected, match="invalid signature"):
        VALIDATOR.validate(token, keyset("RS256", "HS256"))


def test_algorithms_outside_the_allow_list_are_refused() -> None:
    only_rs = TokenValidator(TokenPolicy(issuers=(ISSUER,), algorithms=frozenset({"RS256"})))
    with pytest.raises(TokenRejected, match="algorithm not allowed"):
        only_rs.validate(sign(claims(), signing_key("ES256")), keyset("ES256"))
    with pytest.raises(TokenRejected, match="algorithm not allowed"):
        VALIDATOR.validate(raw_token({"alg": "RS512"}, claims(), b"x"), keyset("RS256"))


def test_wrong_key_with_the_same_kid() -> None:
    other = signing_key("RS256", 1)
    token = sign(claims(), other, {"kid": signing_key("RS256").kid})
    with pytest.raises(TokenRejected, match="invalid signature"):
        VALIDATOR.validate(token, keyset("RS256"))


def test_unknown_kid() -> None:
    token = sign(claims(), signing_key("ES256"), {"kid": "nope"})
    with pytest.raises(UnknownSigningKey) as e:
        VALIDATOR.validate(token, keyset("ES256"))
    assert e.value.kid == "nope"


@pytest.mark.parametrize(
    "over, reason",
    [
        ({"exp": lambda: int(time.time()) - 31}, "token expired"),
        ({"nbf": lambda: int(time.time()) + 120}, "token not yet valid"),
        ({"iat": lambda: int(time.time()) + 120}, "token not yet valid"),
        ({"iss": "https://evil.example"}, "wrong issuer"),
        ({"exp": None}, "missing claim exp"),
        ({"aud": None}, "missing claim aud"),
        ({"sub": None}, "missing claim sub"),
        ({"aud": 7}, "malformed claim aud"),
    ],
)
def test_claim_checks(over: dict[str, object], reason: str) -> None:
    # times are taken when the test runs, not at collection (a long session would age them)
    over = {k: v() if callable(v) else v for k, v in over.items()}
    with pytest.raises(TokenRejected, match=reason):
        VALIDATOR.validate(sign(claims(**over), signing_key("RS256")), keyset("RS256"))


def test_leeway_is_applied() -> None:
    token = sign(claims(exp=int(time.time()) - 5), signing_key("RS256"))
    assert VALIDATOR.validate(token, keyset("RS256")).claims["exp"] < time.time()


def test_tampered_truncated_garbage_and_oversized() -> None:
    good = sign(claims(), signing_key("ES256"))
    with pytest.raises(TokenRejected, match="invalid signature"):
        VALIDATOR.validate(tamper(good, org_id="org-evil"), keyset("ES256"))
    with pytest.raises(TokenRejected):
        VALIDATOR.validate(good[:-10], keyset("ES256"))
    with pytest.raises(TokenRejected, match="malformed token"):
        VALIDATOR.validate("not a jwt at all", keyset("ES256"))
    with pytest.raises(TokenRejected, match="token too long"):
        VALIDATOR.validate("a" * 20000, keyset("ES256"))


def test_crit_header_is_refused() -> None:
    token = sign(claims(), signing_key("ES256"), {"crit": ["exp"]})
    with pytest.raises(TokenRejected):
        VALIDATOR.validate(token, keyset("ES256"))


def test_rejection_reasons_never_contain_the_token() -> None:
    token = sign(claims(exp=1), signing_key("RS256"))
    with pytest.raises(TokenRejected) as e:
        VALIDATOR.validate(token, keyset("RS256"))
    assert token not in str(e.value) and token.split(".")[1] not in e.value.reason


def test_policy_bounds() -> None:
    with pytest.raises(ValueError):
        TokenPolicy(issuers=(ISSUER,), leeway=301)
    with pytest.raises(ValueError):
        TokenPolicy(issuers=(ISSUER,), algorithms=frozenset({"none"}))
    with pytest.raises(ValueError):
        TokenPolicy(issuers=())


def _pyjwt_accepts(token: str, alg: str) -> bool:
    k = signing_key(alg)
    key = k.private if alg == "HS256" else k.private.public_key()
    try:
        jwt.decode(
            token,
            key,
            algorithms=[alg],
            issuer=ISSUER,
            leeway=30,
            options={"verify_aud": False, "require": ["exp", "iss", "sub", "aud"]},
        )
    except jwt.PyJWTError:
        return False
    return True


def _ours_accepts(token: str, alg: str) -> bool:
    try:
        VALIDATOR.validate(token, keyset(alg))
    except TokenRejected:
        return False
    return True


@pytest.mark.parametrize("alg", ["HS256", "RS256", "ES256", "EdDSA"])
def test_agrees_with_pyjwt_decode(alg: str) -> None:
    """Our compact-serialization parsing + claim rules decide as jwt.decode does."""
    now = int(time.time())
    key = signing_key(alg)
    good = sign(claims(), key)
    cases = {
        "good": good,
        "leeway-exp": sign(claims(exp=now - 20), key),
        "expired": sign(claims(exp=now - 40), key),
        "nbf-in-leeway": sign(claims(nbf=now + 20), key),
        "nbf-future": sign(claims(nbf=now + 40), key),
        "iat-future": sign(claims(iat=now + 40), key),
        "float-exp": sign(claims(exp=now + 60.5), key),
        "wrong-iss": sign(claims(iss="https://x"), key),
        "no-sub": sign(claims(sub=None), key),
        "tampered": tamper(good, sub="user-evil"),
        "truncated-sig": good[:-8],
        "no-sig": good.rsplit(".", 1)[0] + ".",
        "other-key": sign(claims(), signing_key(alg, 1), {"kid": key.kid} if key.kid else None),
    }
    for name, token in cases.items():
        assert _ours_accepts(token, alg) == _pyjwt_accepts(token, alg), name
    assert _ours_accepts(good, alg) and not _ours_accepts(cases["tampered"], alg)
    # the one deliberate difference: RFC 7515 base64url has no '=' padding; PyJWT tolerates it
    assert not _ours_accepts(good + "==", alg)
