"""The IAM webhook as kube-apiserver sees it: a minted dev token authenticated over HTTPS with
the apiserver's client certificate, a tampered token refused, no client certificate refused at TLS.

Like kube-apiserver, the scenario knows only the kubeconfig node-up wrote
(`--authentication-token-webhook-config-file`, WEBHOOK_KUBECONFIG): the URL, CA and client
certificate all come from that file."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

import yaml  # type: ignore[import-untyped]  # PyYAML (via kubernetes_asyncio) ships no stubs

from nodeenv.scenario import Scenario


@dataclass(frozen=True)
class WebhookClient:
    """What kube-apiserver reads from the webhook kubeconfig (current context's cluster and user)."""

    url: SplitResult
    ca: str
    client_cert: str
    client_key: str

    @classmethod
    def from_kubeconfig(cls, path: str) -> WebhookClient:
        doc = yaml.safe_load(Path(path).read_text())
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        return cls(
            urlsplit(cluster["server"]),
            cluster["certificate-authority"],
            user["client-certificate"],
            user["client-key"],
        )


def run(scn: Scenario) -> None:
    env = WebhookClient.from_kubeconfig(scn.env["WEBHOOK_KUBECONFIG"])
    with scn.step("webhook: minted token authenticated over mTLS"):
        token = _mint(scn)
        status = _review(env, token, client_cert=True)
        if not status.get("authenticated") or status["user"]["username"] != "dev@example.com":
            raise RuntimeError(f"minted token not authenticated: {status}")
        if "k8s:org-admin" not in status["user"]["groups"]:
            raise RuntimeError(f"org admin group missing: {status['user']['groups']}")
    with scn.step("webhook: tampered token refused"):
        status = _review(env, _tamper(token), client_cert=True)
        if status != {"authenticated": False, "error": "invalid signature"}:
            raise RuntimeError(f"tampered token not refused: {status}")
    with scn.step("webhook: request without client certificate refused at TLS"):
        _expect_tls_refusal(env, token)


def _mint(scn: Scenario) -> str:
    argv = [
        sys.executable,
        "-m",
        "webhook.main",
        "mint",
        "--sub",
        "user-00000000-0000-4000-8000-000000000001",
    ]
    argv += [
        "--email",
        "dev@example.com",
        "--org",
        "org-dev",
        "--project",
        "proj-dev",
        "--roles",
        "org_admin",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=scn.node.process_env(), timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"iam-webhook mint failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _tamper(token: str) -> str:
    head, body, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["org_id"] = "org-someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{sig}"


def _context(env: WebhookClient, client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=env.ca)
    if client_cert:
        ctx.load_cert_chain(env.client_cert, env.client_key)
    return ctx


def _body(token: str) -> bytes:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    return json.dumps(review).encode()


def _review(env: WebhookClient, token: str, client_cert: bool) -> dict[str, Any]:
    url = env.url
    conn = http.client.HTTPSConnection(
        url.hostname or "", url.port, context=_context(env, client_cert), timeout=10
    )
    try:
        conn.request("POST", url.path, _body(token), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        doc = json.loads(resp.read())
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError(f"webhook answered {resp.status}: {doc}")
    status: dict[str, Any] = doc["status"]
    return status


def _expect_tls_refusal(env: WebhookClient, token: str) -> None:
    url = env.url
    request = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.hostname}\r\nContent-Length: {len(_body(token))}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + _body(token)
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        try:
            with _context(env, client_cert=False).wrap_socket(raw, server_hostname=url.hostname) as tls:
                tls.sendall(request)
                answer = tls.recv(65536)
        except (ssl.SSLError, ConnectionError):
            return  # the handshake failed, or TLS 1.3's certificate_required alert after it
    if answer:
        raise RuntimeError(f"served without a client certificate: {answer[:40]!r}")
    # b"": the server closed the TLS session without answering (TLS 1.3, alert not read)
