"""The API double authenticating bearer tokens through the IAM webhook, as kube-apiserver with
`--authentication-token-webhook-config-file`: kubectl with a PlasmaCloud IAM token → the double →
`iam-webhook serve` over mTLS (the client certificate and CA from the config file) → the user and
groups the webhook maps; forged and expired tokens 401; answers cached for the TTL, refusals too."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubeapi.tokenwebhook import WebhookAuthenticator, WebhookConfig, parse_duration
from tests.iam_fixture import Iam
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle
from webhook.devcerts import gen_dev_pki, kubeconfig
from webhook.settings import PkiSettings


@pytest.fixture
def kube_api_config(iam: Iam) -> ApiConfig:
    return iam.api_config()


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_bin(), "--kubeconfig", str(cfg), *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def test_an_iam_token_authenticates_through_the_webhook(kube_api: KubeApiHandle, iam: Iam) -> None:
    token = iam.mint(sub="user-1", email="dev@example.com", org="org-1", project="proj-1")
    out = run(iam.kubeconfig(kube_api, token, "dev"), "auth", "whoami", "-o", "json")
    assert out.returncode == 0, out.stderr
    user = json.loads(out.stdout)["status"]["userInfo"]
    assert user["username"] == "dev@example.com"
    assert user["groups"] == ["org:org-1", "project:proj-1", "system:authenticated"]
    assert kube_api.state.token_webhook is not None and kube_api.state.token_webhook.reviews == 1
    assert "dev@example.com" in {r.user for r in kube_api.requests}


@pytest.mark.parametrize("how", ["forged", "expired", "not-a-jwt"])
def test_a_token_the_webhook_refuses_is_401(kube_api: KubeApiHandle, iam: Iam, how: str) -> None:
    claims: dict[str, Any] = {"sub": "user-1", "org": "org-1", "project": "proj-1"}
    makers: dict[str, Callable[[], str]] = {"forged": lambda: iam.forged(**claims),
                                            "expired": lambda: iam.mint(ttl=-120, **claims),
                                            "not-a-jwt": lambda: "abc.def.ghi"}  # fmt: skip
    token = makers[how]()
    out = run(iam.kubeconfig(kube_api, token, how), "get", "pods")
    assert out.returncode != 0
    assert "You must be logged in to the server" in out.stderr
    assert [r.status for r in kube_api.requests if r.resource == "pods"] == []  # never reached a handler


def test_answers_are_cached_for_the_ttl_refusals_too(kube_api: KubeApiHandle, iam: Iam) -> None:
    hook = kube_api.state.token_webhook
    assert hook is not None and hook.ttl == 120
    good = iam.kubeconfig(kube_api, iam.mint(sub="user-2", org="org-1", project="proj-1"), "good")
    bad = iam.kubeconfig(kube_api, iam.forged(sub="user-2", org="org-1", project="proj-1"), "bad")
    for _ in range(3):
        assert run(good, "auth", "whoami").returncode == 0
        assert run(bad, "auth", "whoami").returncode != 0
    assert hook.reviews == 2  # one review per token, then the cache (kube-apiserver caches refusals too)


def test_static_tokens_do_not_ask_the_webhook(kube_api: KubeApiHandle) -> None:
    kubectl(kube_api, "get", "ns")
    assert kube_api.state.token_webhook is not None and kube_api.state.token_webhook.reviews == 0


def test_the_webhooks_certificate_is_checked_against_the_configs_ca(iam: Iam, tmp_path: Path) -> None:
    """A config naming another CA: the webhook's serving certificate does not verify: no user."""
    other = gen_dev_pki(PkiSettings(out=tmp_path / "other"))
    cfg = tmp_path / "wrong-ca.yaml"
    cfg.write_text(kubeconfig(iam.url, other["ca"], iam.pki["client_cert"], iam.pki["client_key"]))
    token = iam.mint(sub="user-3", org="org-1", project="proj-1")

    async def review(path: Path) -> object:
        hook = WebhookAuthenticator(WebhookConfig.load(path), attempts=1)
        try:
            return await hook.authenticate(token)
        finally:
            await hook.close()

    assert asyncio.run(review(cfg)) is None
    assert asyncio.run(review(iam.pki["kubeconfig"])) is not None
    no_cert = tmp_path / "no-client-cert.yaml"
    no_cert.write_text(kubeconfig(iam.url, iam.pki["ca"], iam.pki["client_cert"], iam.pki["client_key"])
                       .split("users:")[0] + "users:\n- name: k8s-apiserver\n  user: {}\n"
                       + "current-context: webhook\ncontexts:\n- context:\n    cluster: iam-webhook\n"
                       + "    user: k8s-apiserver\n  name: webhook\n")  # fmt: skip
    assert asyncio.run(review(no_cert)) is None  # the webhook wants kube-apiserver's client certificate


def test_the_daemon_flags(tmp_path: Path) -> None:
    from nodeenv.kubeapi.settings import parse

    s = parse(["--dir", str(tmp_path), "--authentication-token-webhook-config-file", "/x.yaml",
               "--authentication-token-webhook-cache-ttl", "1m30s"], {})  # fmt: skip
    assert s.config.token_webhook_config == Path("/x.yaml") and s.config.token_webhook_cache_ttl == 90
    assert parse(["--dir", str(tmp_path)], {}).config.token_webhook_cache_ttl == 120  # kube-apiserver's 2m
    assert parse_duration("0") == 0 and parse_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_duration("2 minutes")
