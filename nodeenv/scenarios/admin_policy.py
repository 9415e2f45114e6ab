"""Projects isolated by the platform's own AdminNetworkPolicies (issue 28), on the tenancy part's pods
(run right after it): project-controller's per-project ANPs, the DNS ANP and the BANP are Ready; the
project admin of tenant-b, with its own IAM token and kubectl, deletes every NetworkPolicy of its
namespace and still cannot reach tenant-a's web; the cluster DNS still answers it; it cannot delete or
change the platform's policies (403). The refused probe shows in the verdict log (the isolation ANPs
log their Deny rules: project-controller's --isolation-acl-logging): the node agent's JSON line and
counter, and the PolicyDenied Event tenant-b reads in its own namespace with its own token.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

from nodeenv.scenario import Scenario
from nodeenv.scenarios.tenancy import PROJECTS, _reaches
from nodeenv.scenarios.verdict_log import logged_drop, policy_denied, summary

PRIORITY_99 = '{"spec":{"priority":99}}'
ISOLATION = ("project-proj-a", "project-proj-b")
ANPS = (*ISOLATION, "plasmacloud-platform-dns")


def run(scn: Scenario) -> None:
    kubectl = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s"]
    if subprocess.run(
        [*kubectl, "get", "crd", "adminnetworkpolicies.policy.networking.k8s.io"], capture_output=True
    ).returncode:
        return  # the API does not serve the ANP CRDs: nothing of this part applies
    with scn.step("admin policy: project-controller's project ANPs, DNS ANP and BANP are Ready"):
        _wait(lambda: not _not_ready(kubectl), lambda: f"not Ready: {_not_ready(kubectl)}")
    org, project = PROJECTS["tenant-b"]
    tenant = [*kubectl, "--token", _mint(scn, "user-00000000-0000-4000-8000-0000000000bb", org, project)]
    web = _pod_ip(kubectl, "tenant-a", "web")
    with scn.step("admin policy: tenant-b's admin deletes all its NetworkPolicies (kubectl, own token)"):
        _ok(tenant, "delete", "networkpolicy", "--all", "-n", "tenant-b")
    b_client, a_web = scn.at(2), scn.at(0)  # where tenancy put them (its PODS order)
    with scn.step("admin policy: tenant-b, without its NetworkPolicies, still cannot reach tenant-a",
                  on=scn.where(b_client, a_web)):  # fmt: skip
        deadline = time.monotonic() + 2.0  # what a missing policy would open, opens in well under that
        while time.monotonic() < deadline:
            if _reaches("tenant-b-client", web, 8080):
                raise RuntimeError("tenant-b reached tenant-a's web:8080 after deleting its own policies")
    b_ip = _pod_ip(kubectl, "tenant-b", "client")
    with scn.step("admin policy: the refused probe in the verdict log (agent's JSON line, counter)",
                  on=scn.where(b_client, a_web)) as r:  # fmt: skip
        v, count = logged_drop((b_client, a_web), lambda: _reaches("tenant-b-client", web, 8080),
                               lambda v: (v["src"], v["dst"], v["dport"]) == (b_ip, web, 8080))  # fmt: skip
        if v["kind"] != "anp" or v["policy"] not in ISOLATION:
            raise RuntimeError(f"the drop was not the project isolation ANP's: {v}")
        r.detail = f"{summary(v)}; counter {count:.0f}"
    if v["namespace"] == "tenant-b" and any(
        p.env.get("PRISMNET_EVENTS_KUBECONFIG") for p in (b_client, a_web)
    ):
        with scn.step(
            "admin policy: tenant-b sees its refused probe as a PolicyDenied Event (own token)"
        ) as r:
            r.detail = policy_denied(tenant, "tenant-b")
    if scn.env.get("CLUSTER_DNS_IP"):
        with scn.step("admin policy: the platform's DNS still answers tenant-b", on=b_client.name):
            _dns("tenant-b-client", scn.env["CLUSTER_DNS_IP"])
    with scn.step("admin policy: tenant-b cannot delete or change the platform's ANP/BANP (403)"):
        for argv in (
            ["delete", "adminnetworkpolicy", "project-proj-b"],
            ["delete", "baselineadminnetworkpolicy", "default"],
            ["patch", "adminnetworkpolicy", "project-proj-a", "--type=merge", "-p", PRIORITY_99],
        ):
            out = subprocess.run([*tenant, *argv], capture_output=True, text=True, timeout=60)
            if out.returncode == 0 or "forbidden" not in out.stderr.lower():
                raise RuntimeError(f"kubectl {' '.join(argv)} as tenant-b: not 403: {out.stderr.strip()}")


def _not_ready(kubectl: list[str]) -> list[str]:
    left = []
    for kind, name in [*(("adminnetworkpolicy", a) for a in ANPS), ("baselineadminnetworkpolicy", "default")]:
        out = subprocess.run([*kubectl, "get", kind, name, "-o", "json"], capture_output=True, text=True)
        conds = json.loads(out.stdout).get("status", {}).get("conditions", []) if out.returncode == 0 else []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            left.append(f"{kind}/{name}")
    return left


def _wait(check: Callable[[], bool], why: Callable[[], str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(str(why()))
        time.sleep(0.3)


def _ok(kubectl: list[str], *args: str) -> str:
    out = subprocess.run([*kubectl, *args], capture_output=True, text=True, timeout=60)
    if out.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def _pod_ip(kubectl: list[str], ns: str, name: str) -> str:
    return _ok(kubectl, "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.podIP}").strip()


def _mint(scn: Scenario, sub: str, org: str, project: str) -> str:
    argv = [sys.executable, "-m", "webhook.main", "mint", "--sub", sub, "--org", org, "--project", project]
    out = subprocess.run(argv, capture_output=True, text=True, env=scn.node.process_env(), timeout=30)
    if out.returncode:
        raise RuntimeError(f"iam-webhook mint: {out.stderr.strip()}")
    return out.stdout.strip()


def _dns(netns: str, server: str) -> None:
    argv = [
        "ip",
        "netns",
        "exec",
        netns,
        "dig",
        "+time=1",
        "+tries=3",
        f"@{server}",
        "kubernetes.default.svc.cluster.local",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    if out.returncode or "status:" not in out.stdout:
        raise RuntimeError(f"no DNS answer from {server} in {netns}: {out.stdout.strip()!r}")
