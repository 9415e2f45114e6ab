"""The IAM webhook as the API double's token authenticator, for tests of the path a tenant takes:
kubectl (or the official client) with a PlasmaCloud IAM token → the API double → `iam-webhook serve`
(a real process, mTLS, its dev PKI from `gen-dev-pki`) → groups → RBAC.

    @pytest.fixture
    def kube_api_config(iam: Iam) -> ApiConfig:
        return iam.api_config()          # the webhook config file, RBAC enforced

    def test_x(kube_api, iam):
        token = iam.mint(sub="user-1", org="o", project="p", roles=("project_viewer",))
        iam.kubeconfig(kube_api, token)  # a kubeconfig holding only that token
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodeenv.daemons import http_ready, wait_for
from nodeenv.kubeapi.devpki import write_kubeconfig
from nodeenv.kubeapi.state import ApiConfig
from tests.kubeapi_fixture import KubeApiHandle
from webhook.devcerts import gen_dev_pki, kubeconfig, mint, new_key, private_pem
from webhook.settings import PATH, MintSettings, PkiSettings

ISSUER, AUDIENCE = "https://iam.test.k8shost.local", "k8shost"


@dataclass
class Iam:
    dir: Path
    pki: dict[str, Path]
    url: str

    def mint(self, *, key: Path | None = None, ttl: int = 600, **claims: Any) -> str:
        """A token the webhook trusts (signed with the dev key), unless `key` signs it instead."""
        s = MintSettings(key=key or self.pki["signing_key"], alg=None, issuer=ISSUER, audiences=(AUDIENCE,),
                         ttl=ttl, **claims)  # fmt: skip
        return mint(s)

    def forged(self, **claims: Any) -> str:
        """Signed with a key the webhook does not know."""
        other = self.dir / "forger.key"
        if not other.exists():
            other.write_bytes(private_pem(new_key("ES256")))
        return self.mint(key=other, **claims)

    def api_config(self, ttl: float = 120.0) -> ApiConfig:
        hook = self.pki["kubeconfig"]
        return ApiConfig(bookmark_interval=1.0, enforce_rbac=True, token_webhook_config=hook,
                         token_webhook_cache_ttl=ttl)  # fmt: skip

    def kubeconfig(self, api: KubeApiHandle, token: str, name: str) -> Path:
        """A kubeconfig for `api` whose only credential is `token`."""
        return write_kubeconfig(self.dir / "users" / f"{name}.kubeconfig", api.url, api.ca, name, token)


@pytest.fixture(scope="module")
def iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Iam]:
    d = tmp_path_factory.mktemp("iam")
    pki = gen_dev_pki(PkiSettings(out=d / "pki"))
    ports = d / "ports.json"
    argv = [sys.executable, "-m", "webhook.main", "serve", "--host", "127.0.0.1", "--port", "0",
            "--health-host", "127.0.0.1", "--health-port", "0", "--port-file", str(ports),
            "--tls-cert", str(pki["server_cert"]), "--tls-key", str(pki["server_key"]),
            "--client-ca", str(pki["ca"]), "--client-cn", "k8s-apiserver",
            "--issuer", ISSUER, "--audience", AUDIENCE, "--key-file", str(pki["signing_pub"])]  # fmt: skip
    with (d / "webhook.log").open("w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(ports.exists, "iam-webhook port file", proc=proc)
        info = json.loads(ports.read_text())
        wait_for(lambda: http_ready(f"http://127.0.0.1:{info['health']}/readyz"), "iam-webhook /readyz")
        url = f"https://127.0.0.1:{info['https']}{PATH}"
        pki["kubeconfig"].write_text(kubeconfig(url, pki["ca"], pki["client_cert"], pki["client_key"]))
        yield Iam(d, pki, url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
