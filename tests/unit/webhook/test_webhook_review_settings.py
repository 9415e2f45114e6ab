"""Reviewer (cache, audiences, no keys), settings from argv/env, dev PKI and mint."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest
from cryptography import x509

from tests.unit.webhook.webhook_kit import AUDIENCE, ISSUER, USER_ID, claims, sign, signing_key
from webhook import devcerts
from webhook.cache import ReviewCache
from webhook.errors import KeysUnavailable
from webhook.keys import KeySet, VerificationKey, thumbprint
from webhook.mapping import ClaimMapper
from webhook.review import Reviewer
from webhook.settings import MintSettings, PkiSettings, ServeSettings, parse
from webhook.tokens import TokenPolicy, TokenValidator
from webhook.wire import TokenReview

V1 = "authentication.k8s.io/v1"


def reviewer(keys: KeySet, cache: ReviewCache | None = None) -> Reviewer:
    validator = TokenValidator(TokenPolicy(issuers=(ISSUER,)))
    return Reviewer(validator, ClaimMapper(), lambda: keys, (AUDIENCE,), cache)


def es_keys() -> KeySet:
    k = signing_key("ES256")
    return KeySet((VerificationKey("EC-P256", k.private.public_key(), k.kid, "t"),))


def test_audiences_intersection() -> None:
    token = sign(claims(aud=[AUDIENCE, "other", "third"]), signing_key("ES256"))
    r = reviewer(es_keys())
    st = r.review(TokenReview(api_version=V1, token=token, audiences=("third", "other", "nope")))
    assert st.authenticated and st.audiences == ("other", "third")
    st = r.review(TokenReview(api_version=V1, token=token, audiences=("nope",)))
    assert not st.authenticated and st.error == "token audience not accepted"
    st = r.review(TokenReview(api_version=V1, token=token))  # implicit audience: the configured one
    assert st.authenticated and st.audiences == ()
    st = r.review(TokenReview(api_version=V1, token=sign(claims(aud="x"), signing_key("ES256"))))
    assert not st.authenticated


def test_cache_serves_repeated_tokens_and_never_rejections() -> None:
    cache = ReviewCache()
    r = reviewer(es_keys(), cache)
    good = TokenReview(api_version=V1, token=sign(claims(), signing_key("ES256")))
    bad = TokenReview(api_version=V1, token=sign(claims(iss="x"), signing_key("ES256")))
    assert r.review(good).user.username == USER_ID  # type: ignore[union-attr]
    assert r.review(good).authenticated and r.last_cache_hit
    assert not r.review(bad).authenticated and not r.review(bad).authenticated
    assert len(cache) == 1 and cache.hits == 1


def test_no_keys_means_no_decision() -> None:
    with pytest.raises(KeysUnavailable):
        reviewer(KeySet()).review(TokenReview(api_version=V1, token="a.b.c"))


def test_serve_settings_from_env_and_flags(tmp_path: Path) -> None:
    env = {
        "IAM_ISSUER": "https://a,https://b",
        "IAM_AUDIENCE": "k8s",
        "IAM_WEBHOOK_TLS_CERT": "/c.crt",
        "IAM_WEBHOOK_TLS_KEY": "/c.key",
        "IAM_WEBHOOK_CLIENT_CA": "/ca.crt",
        "IAM_KEY_FILES": "/k1.pem,/k2.json",
        "IAM_WEBHOOK_HEALTH_PORT": "off",
        "IAM_MAP_ORG_GROUP_PREFIX": "tenant:",
        "IAM_MAP_USE_EMAIL": "false",
    }
    s = parse(["serve", "--port", "9443", "--leeway", "10"], env)
    assert isinstance(s, ServeSettings)
    assert s.port == 9443 and s.health_port is None and s.token.leeway == 10
    assert s.token.issuers == ("https://a", "https://b")
    assert s.key_files == (Path("/k1.pem"), Path("/k2.json"))
    assert s.mapping.org_group_prefix == "tenant:" and s.mapping.use_email is False


@pytest.mark.parametrize(
    "argv",
    [
        [
            "serve",
            "--issuer",
            "i",
            "--audience",
            "a",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--client-ca",
            "ca",
        ],
        [
            "serve",
            "--issuer",
            "i",
            "--key-file",
            "k",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--client-ca",
            "a",
        ],
        [
            "serve",
            "--issuer",
            "i",
            "--audience",
            "a",
            "--key-file",
            "k",
            "--leeway",
            "900",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--client-ca",
            "ca",
        ],
    ],
)
def test_bad_serve_settings_exit_with_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        parse(argv, {})
    assert e.value.code == 2 and "error:" in capsys.readouterr().err


def test_gen_dev_pki_and_mint(tmp_path: Path) -> None:
    s = parse(["gen-dev-pki", "--out", str(tmp_path), "--server-name", "webhook.local,127.0.0.1"], {})
    assert isinstance(s, PkiSettings)
    paths = devcerts.gen_dev_pki(s)
    server = x509.load_pem_x509_certificate(paths["server_cert"].read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["webhook.local"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    client = x509.load_pem_x509_certificate(paths["client_cert"].read_bytes())
    assert client.subject.rfc4514_string() == "CN=k8s-apiserver"
    kcfg = paths["kubeconfig"].read_text()
    assert 'server: "https://webhook.local:8443/apis/iam.plasmacloud.io/v1/authenticate"' in kcfg
    assert f'client-key: "{paths["client_key"]}"' in kcfg and "current-context: webhook" in kcfg
    assert paths["signing_key"].stat().st_mode & 0o777 == 0o600
    m = parse(
        [
            "mint",
            "--key",
            str(paths["signing_key"]),
            "--sub",
            "sa-1",
            "--service-account",
            "ci",
            "--project",
            "p1",
            "--roles",
            "a,b",
        ],
        {"IAM_ISSUER": ISSUER, "IAM_AUDIENCE": AUDIENCE},
    )
    assert isinstance(m, MintSettings)
    token = devcerts.mint(m)
    pub = paths["signing_pub"].read_bytes()
    decoded = jwt.decode(token, pub, algorithms=["ES256"], audience=AUDIENCE, issuer=ISSUER)
    assert decoded["principal_type"] == "service_account" and decoded["roles"] == ["a", "b"]
    key, alg = devcerts.load_signing_key(paths["signing_key"])
    assert alg == "ES256" and jwt.get_unverified_header(token)["kid"] == thumbprint(key.public_key())


def test_kubeconfig_is_the_spec_layout_and_valid_yaml(tmp_path: Path) -> None:
    import yaml  # PyYAML: a dependency of kubernetes-asyncio

    odd = tmp_path / 'we"ird dir'
    text = devcerts.kubeconfig("https://h:1/p", odd / "ca.crt", odd / "c.crt", odd / "c.key")
    doc = yaml.safe_load(text)
    assert doc["current-context"] == "webhook"
    assert doc["clusters"][0] == {
        "name": "iam-webhook",
        "cluster": {"server": "https://h:1/p", "certificate-authority": str(odd / "ca.crt")},
    }
    assert doc["users"][0]["user"] == {
        "client-certificate": str(odd / "c.crt"),
        "client-key": str(odd / "c.key"),
    }
    assert doc["contexts"][0] == {
        "name": "webhook",
        "context": {"cluster": "iam-webhook", "user": "k8s-apiserver"},
    }
