"""The `iam-webhook` program as operators run it: CLI, JSON logs, SIGTERM; and the node
environment component with its sandbox scenario."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from nodeenv.daemons import is_alive, wait_for
from nodeenv.node import Node, NodeSettings, read_env_file
from nodeenv.scenario import Scenario
from nodeenv.scenarios import webhook as webhook_scenario
from nodeenv.webhook_component import WebhookComponent
from tests.unit.webhook.webhook_kit import AUDIENCE, ISSUER

WEBHOOK = [sys.executable, "-m", "webhook.main"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WEBHOOK, *args], capture_output=True, text=True, timeout=60, check=False)


def test_help_for_every_subcommand() -> None:
    for sub in ((), ("serve",), ("gen-dev-pki",), ("mint",)):
        out = cli(*sub, "--help")
        assert out.returncode == 0 and "usage: iam-webhook" in out.stdout
    assert "IAM_WEBHOOK_CLIENT_CA" in cli("serve", "--help").stdout
    assert "DEVELOPMENT ONLY" in cli("mint", "--help").stdout


def test_serve_review_and_sigterm(tmp_path: Path) -> None:
    pki = json.loads(cli("gen-dev-pki", "--out", str(tmp_path / "pki")).stdout)
    ports = tmp_path / "ports.json"
    proc = subprocess.Popen(
        [*WEBHOOK, "serve", "--host", "127.0.0.1", "--port", "0", "--health-port", "0",
         "--port-file", str(ports), "--tls-cert", pki["server_cert"], "--tls-key", pki["server_key"],
         "--client-ca", pki["ca"], "--issuer", ISSUER, "--audience", AUDIENCE,
         "--key-file", pki["signing_pub"]],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(ports.exists, "port file", proc=proc)  # type: ignore[arg-type]
        https = json.loads(ports.read_text())["https"]
        mint = cli("mint", "--key", pki["signing_key"], "--issuer", ISSUER, "--audience", AUDIENCE,
                   "--sub", "user-1", "--org", "o1")  # fmt: skip
        token = mint.stdout.strip()
        assert "DEVELOPMENT ONLY" in mint.stderr
        body = json.dumps({"apiVersion": "authentication.k8s.io/v1beta1", "kind": "TokenReview",
                           "spec": {"token": token}})  # fmt: skip
        out = subprocess.run(
            ["curl", "-sS", "--cacert", pki["ca"], "--cert", pki["client_cert"], "--key", pki["client_key"],
             "-d", body, f"https://localhost:{https}/apis/iam.plasmacloud.io/v1/authenticate"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        doc = json.loads(out.stdout)
        assert doc["apiVersion"] == "authentication.k8s.io/v1beta1"
        assert doc["status"]["user"]["username"] == "user-1"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    lines = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert any(r["msg"] == "review authenticated" and r["user"] == "user-1" for r in lines)
    assert any("signal received" in r["msg"] for r in lines)
    assert token not in err and token.split(".")[1] not in err


def test_serve_refuses_missing_configuration() -> None:
    out = cli(
        "serve", "--issuer", "x", "--audience", "a", "--tls-cert", "c", "--tls-key", "k", "--client-ca", "ca"
    )
    assert out.returncode == 2 and "no key source" in out.stderr


def test_node_component_and_sandbox_scenario(short_tmp: Path) -> None:
    settings = NodeSettings(run_dir=short_tmp / f"wh-{time.monotonic_ns()}", bridge="br-unused")
    node = Node(settings, [WebhookComponent()])
    node.up()
    try:
        env = read_env_file(node.env_file)
        for key in ("WEBHOOK_URL", "WEBHOOK_CA", "WEBHOOK_CLIENT_CERT", "WEBHOOK_CLIENT_KEY",
                    "WEBHOOK_KUBECONFIG", "IAM_ISSUER", "IAM_AUDIENCE", "IAM_DEV_SIGNING_KEY",
                    "IAM_DEV_SIGNING_ALG"):  # fmt: skip
            assert env[key], key
        assert f'server: "{env["WEBHOOK_URL"]}"' in Path(env["WEBHOOK_KUBECONFIG"]).read_text()
        records = node.daemons.load()
        assert [r.name for r in records] == ["iam-webhook"] and is_alive(records[0])
        scn = Scenario(node)
        try:
            webhook_scenario.run(scn)
        finally:
            assert scn.run_cleanups() == []
        assert [(r.name, r.ok) for r in scn.results] == [
            ("webhook: minted token authenticated over mTLS", True),
            ("webhook: tampered token refused", True),
            ("webhook: request without client certificate refused at TLS", True),
        ], scn.table()
    finally:
        node.down()
    assert not is_alive(records[0]) and not settings.run_dir.exists()
