"""The iam-webhook DaemonSet's container started as kubelet would start it (its command, args and the
environment the manifest gives, files at the paths its Secret/ConfigMap volumes would hold), probed on
the manifest's probe paths, then called the way kube-apiserver calls it: through the kubeconfig in
daemonsets/k3s/iam-webhook.yaml, with the client certificate it names. Only the ports move (loopback
ports of our own instead of 3000/3001) and the /etc paths into a temp dir."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeenv.daemons import free_port, http_ready
from tests.unit.daemonsets.rendered import K3S, container_env, find

# Where the DaemonSet's volumes put each file -> what `iam-webhook gen-dev-pki` names it.
VOLUME_FILES = {
    "/etc/iam-webhook/tls/tls.crt": "server.crt",
    "/etc/iam-webhook/tls/tls.key": "server.key",
    "/etc/iam-webhook/client-ca/ca.crt": "ca.crt",
    "/etc/iam-webhook/keys/keys.pem": "signing.pub",
}


POD_IP = "127.0.0.1"
"""hostNetwork: the pod's IP is the node's address, loopback here."""


def _cli(*args: str) -> str:
    argv = [sys.executable, "-m", "webhook.main", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, str]]]:
    w = find("DaemonSet", "iam-webhook")
    (c,) = w["spec"]["template"]["spec"]["containers"]
    env = container_env(w, c)
    port, health = free_port(), free_port()
    env |= {"IAM_WEBHOOK_PORT": str(port), "IAM_WEBHOOK_HEALTH_PORT": str(health), "POD_IP": POD_IP}
    env = {k: v.replace("$(POD_IP)", POD_IP) for k, v in env.items()}  # kubelet's $(VAR) expansion
    _cli("gen-dev-pki", "--out", str(tmp_path), "--server-name", env["IAM_WEBHOOK_HOST"])
    env = {k: str(tmp_path / VOLUME_FILES[v]) if v in VOLUME_FILES else v for k, v in env.items()}
    env["PATH"] = os.environ["PATH"]
    argv = [str(Path(sys.executable).parent / c["command"][0]), *c.get("args", [])]
    log = (tmp_path / "webhook.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield c, {"port": port, "health": health, "pki": tmp_path}, env
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _kubeconfig_context(pki: Path, port: int) -> tuple[str, ssl.SSLContext]:
    """The URL and TLS settings kube-apiserver takes from daemonsets/k3s/iam-webhook.yaml."""
    cfg = yaml.safe_load((K3S / "iam-webhook.yaml").read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]

    def here(path: str) -> str:
        return str(pki / Path(path).name)  # /etc/k8shost/<file> as gen-dev-pki wrote it

    ctx = ssl.create_default_context(cafile=here(cluster["certificate-authority"]))
    ctx.load_cert_chain(here(user["client-certificate"]), here(user["client-key"]))
    return cluster["server"].replace(":3000/", f":{port}/"), ctx


def test_webhook_as_deployed_answers_the_apiserver_through_the_k3s_kubeconfig(webhook: Any) -> None:
    c, where, env = webhook
    ready = c["readinessProbe"]["httpGet"]
    deadline = time.monotonic() + 20
    while not http_ready(f"http://{ready.get('host', POD_IP)}:{where['health']}{ready['path']}"):
        assert time.monotonic() < deadline, "the readiness probe never passed"
        time.sleep(0.1)
    live = c["livenessProbe"]["httpGet"]
    assert http_ready(f"http://{live.get('host', POD_IP)}:{where['health']}{live['path']}")

    token = _cli("mint", "--key", str(where["pki"] / "signing.key"), "--issuer", env["IAM_ISSUER"],
                 "--audience", env["IAM_AUDIENCE"], "--sub", "user-1", "--email", "a@example.com",
                 "--org", "org-1", "--project", "p-1")  # fmt: skip
    url, ctx = _kubeconfig_context(where["pki"], where["port"])
    for tok, expected in ((token, True), (token[:-4] + "AAAA", False)):
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": tok}}
        req = urllib.request.Request(url, data=json.dumps(review).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            status = json.load(resp)["status"]
        assert status["authenticated"] is expected, status
    assert status.get("error")  # the forged one says why, briefly
