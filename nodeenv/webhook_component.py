"""The IAM webhook in the node environment: a DEVELOPMENT PKI and signing key in the run dir,
`iam-webhook serve` on a free loopback port, and the endpoints an apiserver (or a test) needs.

node.env gains WEBHOOK_URL, WEBHOOK_CA, WEBHOOK_CLIENT_CERT/KEY (kube-apiserver's client
identity), WEBHOOK_KUBECONFIG (for --authentication-token-webhook-config-file), IAM_ISSUER,
IAM_AUDIENCE, IAM_DEV_SIGNING_KEY and IAM_DEV_SIGNING_ALG (mint tokens with `iam-webhook mint`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nodeenv.daemons import free_port, http_ready, start_foreground, wait_for
from nodeenv.node import Node
from webhook.devcerts import gen_dev_pki, kubeconfig
from webhook.settings import PATH, PkiSettings

DEV_ISSUER = "https://iam.dev.k8shost.local"
DEV_AUDIENCE = "k8shost"


class WebhookComponent:
    name = "webhook"

    def __init__(self, issuer: str = DEV_ISSUER, audience: str = DEV_AUDIENCE, alg: str = "ES256") -> None:
        self.issuer, self.audience, self.alg = issuer, audience, alg

    def start(self, node: Node) -> dict[str, str]:
        wdir = node.path("webhook", "pki", "x").parent.parent
        pki = gen_dev_pki(
            PkiSettings(out=wdir / "pki", server_names=("localhost", "127.0.0.1"), signing_alg=self.alg)
        )
        port_file = wdir / "ports.json"
        argv = [sys.executable, "-m", "webhook.main", "serve", *self._flags(pki, port_file)]
        # the daemon gets its whole configuration from argv, never from stray IAM_* variables
        env = {k: v for k, v in node.process_env().items() if not k.startswith("IAM_")}
        _, proc = start_foreground("iam-webhook", argv, wdir / "webhook.log", env, node.daemons)
        wait_for(port_file.exists, "iam-webhook port file", proc=proc)
        ports = json.loads(port_file.read_text())
        wait_for(
            lambda: http_ready(f"http://127.0.0.1:{ports['health']}/readyz"), "iam-webhook /readyz", proc=proc
        )
        url = f"https://127.0.0.1:{ports['https']}{PATH}"
        pki["kubeconfig"].write_text(kubeconfig(url, pki["ca"], pki["client_cert"], pki["client_key"]))
        return {
            "WEBHOOK_URL": url,
            "WEBHOOK_HEALTH_URL": f"http://127.0.0.1:{ports['health']}",
            "WEBHOOK_CA": str(pki["ca"]),
            "WEBHOOK_CLIENT_CERT": str(pki["client_cert"]),
            "WEBHOOK_CLIENT_KEY": str(pki["client_key"]),
            "WEBHOOK_KUBECONFIG": str(pki["kubeconfig"]),
            "IAM_ISSUER": self.issuer,
            "IAM_AUDIENCE": self.audience,
            "IAM_DEV_SIGNING_KEY": str(pki["signing_key"]),
            "IAM_DEV_SIGNING_ALG": self.alg,
        }

    def _flags(self, pki: dict[str, Path], port_file: Path) -> list[str]:
        return [
            # concrete ports, as the other daemons': the same argv started again (a cold restart,
            # nodeenv/cluster/coldrestart.py) serves where the API double's webhook config points
            "--host", "127.0.0.1", "--port", str(free_port()),
            "--health-host", "127.0.0.1", "--health-port", str(free_port()),
            "--port-file", str(port_file),
            "--tls-cert", str(pki["server_cert"]), "--tls-key", str(pki["server_key"]),
            "--client-ca", str(pki["ca"]), "--client-cn", "k8s-apiserver",
            "--issuer", self.issuer, "--audience", self.audience,
            "--key-file", str(pki["signing_pub"]),
        ]  # fmt: skip

    def cleanup(self, node: Node) -> None:
        """Everything lives in the run dir, which Node.down removes; the daemon is stopped by PID."""
