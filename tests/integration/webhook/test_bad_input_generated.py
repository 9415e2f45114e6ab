"""Generated TokenReview bodies (Hypothesis) against the real `iam-webhook` process over HTTPS with
the apiserver's client certificate (mTLS), as kube-apiserver reaches it.

Every answer is 400 with a metav1.Status, or 200 with a TokenReview whose status says
authenticated=false with an error; never a 500, never authenticated for a token we did not
mint, and the process keeps serving.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from nodeenv.daemons import wait_for
from tests.bad_input import JSON_VALUES, TEXT, edge_settings, mutated
from tests.unit.webhook.webhook_kit import AUDIENCE, ISSUER
from webhook.settings import PATH

WEBHOOK = [sys.executable, "-m", "webhook.main"]
V1 = "authentication.k8s.io/v1"


@dataclass
class Webhook:
    proc: subprocess.Popen[bytes]
    port: int
    ctx: ssl.SSLContext
    token: str
    """A token the webhook accepts (minted with the dev key)."""

    def post(self, body: bytes) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPSConnection("localhost", self.port, context=self.ctx, timeout=30)
        try:
            conn.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()


def _cli(*args: str) -> str:
    return subprocess.run([*WEBHOOK, *args], capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    d = tmp_path_factory.mktemp("webhook-gen")
    pki = json.loads(_cli("gen-dev-pki", "--out", str(d / "pki")))
    ports = d / "ports.json"
    log = (d / "webhook.log").open("wb")
    proc = subprocess.Popen(
        [*WEBHOOK, "serve", "--host", "127.0.0.1", "--port", "0", "--health-port", "0",
         "--port-file", str(ports), "--tls-cert", pki["server_cert"], "--tls-key", pki["server_key"],
         "--client-ca", pki["ca"], "--issuer", ISSUER, "--audience", AUDIENCE,
         "--key-file", pki["signing_pub"]],
        stderr=log,
    )  # fmt: skip
    try:
        wait_for(ports.exists, "port file", proc=proc)  # type: ignore[arg-type]
        ctx = ssl.create_default_context(cafile=pki["ca"])
        ctx.load_cert_chain(pki["client_cert"], pki["client_key"])
        token = _cli("mint", "--key", pki["signing_key"], "--issuer", ISSUER, "--audience", AUDIENCE,
                     "--sub", "user-1", "--org", "o1").strip()  # fmt: skip
        hook = Webhook(proc, json.loads(ports.read_text())["https"], ctx, token)
        yield hook
        assert proc.poll() is None, "iam-webhook exited"
        status, reply = hook.post(_review(token))
        assert status == 200 and reply["status"]["authenticated"], reply  # still serving, still right
        text = Path(d / "webhook.log").read_text()
        assert "review crashed" not in text, text[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _review(token: object, **over: object) -> bytes:
    return json.dumps({"apiVersion": V1, "kind": "TokenReview", "spec": {"token": token}, **over}).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@st.composite
def forged_tokens(draw: st.DrawFn, real: str) -> str:
    """The real token with one part replaced: a generated header or claims, or random bytes."""
    parts = real.split(".")
    header = {"alg": "RS256", "typ": "JWT", "kid": "k"}
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "exp": 4102444800, "iat": 0}
    which = draw(st.integers(0, 2))
    base = (header, claims, None)[which]
    if base is None:
        part = _b64(draw(st.binary(max_size=300)))
    else:
        doc = draw(mutated(base) | JSON_VALUES)
        part = _b64(json.dumps(doc).encode())
    parts[which] = draw(st.sampled_from([part, part + "=", part[:-1] or "x"]))
    extra = draw(st.sampled_from([[], [""], ["x"]]))
    return ".".join(parts + extra)


def bodies(real: str) -> st.SearchStrategy[bytes]:
    review = {"apiVersion": V1, "kind": "TokenReview", "spec": {"token": "t", "audiences": [AUDIENCE]}}
    tokens = forged_tokens(real) | TEXT | st.sampled_from(["", "a.b.c", "..", real + "x"])
    return st.one_of(
        mutated(review).map(lambda d: json.dumps(d).encode()),
        st.builds(
            lambda t, a: _review(t, apiVersion=a),
            tokens,
            st.sampled_from([V1, "authentication.k8s.io/v1beta1"]),
        ),
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=300),
        st.integers(1, 5000).map(lambda n: b"[" * n),
        st.integers(60_000, 2_000_000).map(lambda n: _review("x" * n)),
    )


def _check(status: int, reply: dict[str, Any]) -> None:
    assert status != 500, reply
    if status == 200:
        assert reply["kind"] == "TokenReview", reply
        assert reply["status"]["authenticated"] is False and reply["status"].get("error"), reply
    else:
        assert status in (400, 413) and reply["kind"] == "Status" and reply["message"], (status, reply)


@edge_settings(max_examples=200)
@given(data=st.data())
def test_generated_token_reviews_get_a_status_or_an_unauthenticated_review(
    webhook: Webhook, data: st.DataObject
) -> None:
    status, reply = webhook.post(data.draw(bodies(webhook.token), "body"))
    _check(status, reply)


@edge_settings(max_examples=20)
@given(body=st.binary(max_size=100))
@example(body=b"[" * 5000)  # deeper than json recurses
def test_pinned_bodies(webhook: Webhook, body: bytes) -> None:
    _check(*webhook.post(body))
