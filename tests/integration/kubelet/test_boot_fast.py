"""The overlay booted from the image by the runner against the API double, on one node (this
machine's network namespace, hostPaths under a private root), without the node's OVS: the workloads
that run on the host network and need no pod network come up as kubelet would run them.
ovs-node and prismnet-agent (they start OVS and the CNI on the node) are removed from the API
before the runner starts; the OVN boot test runs them."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from nodeenv.kubeapi.tokenwebhook import WebhookAuthenticator, WebhookConfig
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_bin
from tests.integration.kubelet.conftest import NS, pods, wait_for

K3S = Path(__file__).parents[3] / "daemonsets" / "k3s"
HOST_NETWORK_OURS = {"iam-webhook": 1, "ovn-central": 1, "fiberlb-controller": 1, "netpol-controller": 1,
                     "node-controller": 1}  # fmt: skip


def conditions(p: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}


def _review(pki: Path, token: str) -> dict[str, Any]:
    """A TokenReview sent as kube-apiserver sends it from daemonsets/k3s/iam-webhook.yaml."""
    cfg = yaml.safe_load((K3S / "iam-webhook.yaml").read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=str(pki / Path(cluster["certificate-authority"]).name))
    ctx.load_cert_chain(
        str(pki / Path(user["client-certificate"]).name), str(pki / Path(user["client-key"]).name)
    )
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    req = urllib.request.Request(cluster["server"], data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result


def test_host_network_workloads_ready_through_their_probes(kube_api, applied: Path, runner_factory) -> None:
    kubectl(kube_api, "-n", NS, "delete", "daemonset", "ovs-node", "prismnet-agent")
    # OVS's Python library resolves a host name only with the `unbound` module, which the image lacks:
    # `ssl:prismnet-server:6641` (base/config.yaml) fails in fiberlb/netpol ("Could not retrieve
    # schema"), so the endpoints are set to an address, as README install step 2 allows.
    patch = {"data": {"OVN_NB_DB": "ssl:127.0.0.1:6641", "OVN_SB_DB": "ssl:127.0.0.1:6642"}}
    kubectl(
        kube_api, "-n", NS, "patch", "configmap", "k8shost-config", "--type=merge", "-p", json.dumps(patch)
    )
    runner_factory(hosts=(("prismnet-server", "127.0.0.1"),))

    def all_ready() -> dict[str, Any] | None:
        ps = pods(kube_api)
        ready = {n: p for n, p in ps.items() if conditions(p).get("Ready") == "True"}
        got = {w: sum(n.startswith(w + "-") for n in ready) for w in HOST_NETWORK_OURS}
        all_ready.last = got  # type: ignore[attr-defined]
        return ps if got == HOST_NETWORK_OURS else None

    ps = wait_for(
        all_ready,
        60,
        f"one Ready pod of each of {sorted(HOST_NETWORK_OURS)}",
        lambda: f"Ready: {all_ready.last}",
    )  # type: ignore[attr-defined]
    for name, p in ps.items():
        if conditions(p).get("Ready") == "True":
            assert p["status"]["phase"] == "Running" and p["status"]["podIP"] == "127.0.0.1"
            statuses = p["status"]["containerStatuses"]
            assert all(s["ready"] and "running" in s["state"] for s in statuses), name
    # the second replica of a host-network Deployment does not fit a one-node cluster (its host ports)
    second = [
        p
        for n, p in ps.items()
        if n.startswith("fiberlb-controller-") and conditions(p).get("Ready") != "True"
    ]
    assert [conditions(p).get("PodScheduled") for p in second] == ["False"]
    assert "didn't have free ports" in second[0]["status"]["conditions"][0]["message"]
    table = kubectl(kube_api, "get", "pods", "-n", NS, "-l", "app.kubernetes.io/part-of=k8shost")
    assert sum(" 1/1 " in line and "Running" in line for line in table.splitlines()) == 4, table
    assert any(" 4/4 " in line and line.startswith("ovn-central-") for line in table.splitlines()), table

    pki = applied
    env = ps[next(n for n in ps if n.startswith("iam-webhook-"))]["spec"]["containers"][0]["env"]
    cm = kube_api.get("configmaps", NS, "iam-webhook-config")
    assert cm is not None and any(e["name"] == "IAM_ISSUER" for e in env)
    mint = [".venv/bin/iam-webhook", "mint", "--key", str(pki / "signing.key"),
            "--issuer", cm["data"]["IAM_ISSUER"], "--audience", cm["data"]["IAM_AUDIENCE"],
            "--sub", "user-1", "--email", "a@example.com",
            "--org", "org-1", "--project", "p-1"]  # fmt: skip
    token = subprocess.run(mint, capture_output=True, text=True, check=True).stdout.strip()
    assert _review(pki, token)["status"]["authenticated"] is True
    assert _review(pki, token[:-4] + "AAAA")["status"]["authenticated"] is False

    # `make boot`'s API double: tokens through the booted iam-webhook pod, named by the kubeconfig
    # `iam-webhook gen-dev-pki` wrote (kube-apiserver's --authentication-token-webhook-config-file)
    hook = WebhookAuthenticator(WebhookConfig.load(pki / "iam-webhook.yaml"))
    kube_api.state.token_webhook = hook
    whoami = [kubectl_bin(), "--kubeconfig", str(kube_api.kubeconfig), "--token", token, "auth", "whoami"]
    out = subprocess.run(whoami, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "a@example.com" in out.stdout and "project:p-1" in out.stdout, out.stderr
    assert hook.reviews == 1
