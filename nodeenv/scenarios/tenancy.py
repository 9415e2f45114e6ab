"""Tenancy in the sandbox: two PlasmaCloud projects, their pods, the default isolation the project
controller installs and the netpol controller enforces in OVN, one port opened between them by
policy, and a project member's token mapping to the groups the project's RoleBindings name.

Namespaces, Pods and NetworkPolicies go to the API double through kubectl, pods' networks through
the installed `prismnet` executable; TCP echo servers run in the pods' netns. On a cluster each pod
is on its own node: tenant-a's web and client on two nodes reach each other, tenant-b's client on a
third is refused, until the policy pair opens one port across the nodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from nodeenv.daemons import run_checked
from nodeenv.scenario import Place, Scenario
from nodeenv.scenarios.webhook import WebhookClient, _review

PROJECTS = {"tenant-a": ("org-sbx", "proj-a"), "tenant-b": ("org-sbx", "proj-b")}
PODS = (("tenant-a", "web"), ("tenant-a", "client"), ("tenant-b", "client"))
SERVER = """
import socket, sys, threading
def serve(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16)
    while True:
        c, _ = s.accept()
        with c: c.sendall(c.recv(64))
for p in sys.argv[1:]: threading.Thread(target=serve, args=(int(p),)).start()
"""
CLIENT = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.7); s.sendall(b"hi")
sys.exit(0 if s.recv(8) == b"hi" else 1)
"""


def run(scn: Scenario) -> None:
    env = scn.env
    kubectl = ["kubectl", f"--kubeconfig={env['KUBECONFIG']}", "--request-timeout=10s"]
    with scn.step("tenancy: project namespaces get RBAC, quotas and default policies"):
        for ns, (org, project) in PROJECTS.items():
            _apply(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
                "plasmacloud.io/org-id": org, "plasmacloud.io/project-id": project,
                "plasmacloud.io/tenant-type": "project"}}})  # fmt: skip
            scn.defer(_deleter(kubectl, ns))
        for ns in PROJECTS:
            _eventually(_counts(kubectl, "networkpolicies", ns, 2), "default policies")
            _eventually(_counts(kubectl, "rolebindings", ns, 3), "role bindings")
    places = [scn.at(i) for i in range(len(PODS))]
    ips = _pods(scn, kubectl, places)
    web = ips[("tenant-a", "web")]
    a_web, a_client, b_client = places
    with scn.step("tenancy: traffic allowed inside a project", on=scn.where(a_client, a_web)):
        _eventually(lambda: _reaches("tenant-a-client", web, 8080), "tenant-a client -> web:8080 allowed")
    with scn.step("tenancy: traffic refused across projects", on=scn.where(b_client, a_web)):
        _eventually(lambda: not _reaches("tenant-b-client", web, 8080), "tenant-b client -> web:8080 refused")
    if env.get("CLUSTER_DNS_IP"):
        with scn.step("tenancy: the cluster DNS answers a pod under default deny", on=a_client.name):
            _dns(env["CLUSTER_DNS_IP"])
    # with the AdminNetworkPolicy CRDs served, project-controller isolates projects by ANP (admin_policy.py):
    # tenants' policies refine inside their project only, and the pair below opens nothing
    platform = (
        subprocess.run(
            [*kubectl, "get", "adminnetworkpolicy", "project-proj-a"], capture_output=True
        ).returncode
        == 0
    )
    opens = (
        "refused by the platform's AdminNetworkPolicy"
        if platform
        else "opens one port from tenant-b to tenant-a"
    )
    with scn.step(f"tenancy: a policy pair {opens}", on=scn.where(b_client, a_web)):
        _open_port(kubectl, scn)
        if platform:
            time.sleep(1.0)  # what the pair would have opened by now (the other steps take < 1 s)
            if _reaches("tenant-b-client", web, 8080):
                raise RuntimeError(
                    "a tenants' policy pair opened tenant-b -> tenant-a across the platform's ANP"
                )
        else:
            _eventually(lambda: _reaches("tenant-b-client", web, 8080), "tenant-b client -> web:8080 allowed")
        if _reaches("tenant-b-client", web, 9000):
            raise RuntimeError("tenant-b reaches web:9000, which no policy opened")
    with scn.step("tenancy: a member's token maps to the groups the RoleBindings name"):
        _token_matches_bindings(scn, kubectl)


def _deleter(kubectl: list[str], ns: str) -> Callable[[], object]:
    return lambda: subprocess.run([*kubectl, "delete", "namespace", ns, "--wait=false"], capture_output=True)


def _counts(kubectl: list[str], resource: str, ns: str, n: int) -> Callable[[], bool]:
    return lambda: len(_names(kubectl, resource, ns)) == n


def _apply(kubectl: list[str], obj: dict[str, Any]) -> None:
    proc = subprocess.run(
        [*kubectl, "apply", "-f", "-"], input=json.dumps(obj), capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"kubectl apply {obj['kind']}: {proc.stderr.strip()}")


def _get(kubectl: list[str], resource: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        run_checked([*kubectl, "get", resource, "-n", ns, "-o", "json"])
    )["items"]
    return items


def _names(kubectl: list[str], resource: str, ns: str) -> list[str]:
    return [o["metadata"]["name"] for o in _get(kubectl, resource, ns)]


def _eventually(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _reaches(netns: str, ip: str, port: int) -> bool:
    argv = ["ip", "netns", "exec", netns, sys.executable, "-c", CLIENT, ip, str(port)]
    return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0


def _dns(server: str) -> None:
    argv = ["ip", "netns", "exec", "tenant-a-client", "dig", "+short", "+time=1", "+tries=3", f"@{server}",
            "kubernetes.default.svc.cluster.local"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=15).stdout.strip()
    if not out or "timed out" in out:
        raise RuntimeError(f"no DNS answer from {server} in tenant-a: {out!r}")


def _pods(scn: Scenario, kubectl: list[str], places: list[Place]) -> dict[tuple[str, str], str]:
    ips = {}
    with scn.step("tenancy: 3 pods through prismnet, in the API with labels and IPs", on=scn.where(*places)):
        for (ns, name), place in zip(PODS, places, strict=True):
            ips[(ns, name)] = _pod(scn, kubectl, place.env, ns, name)
    return ips


def _pod(scn: Scenario, kubectl: list[str], env: dict[str, str], ns: str, name: str) -> str:
    netns = f"{ns}-{name}"
    result = scn.add_pod(env, ns, name, netns, chained=False)
    ip = str(result["ips"][0]["address"]).split("/")[0]  # type: ignore[index]
    server = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", SERVER, "8080", "9000"])

    def stop_server() -> None:
        server.kill()
        server.wait()

    scn.defer(stop_server)
    meta = {"name": name, "namespace": ns, "labels": {"app": name}}
    _apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                     "spec": {"containers": [{"name": "c", "image": "sandbox"}]}})  # fmt: skip
    status = json.dumps({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
    run_checked(
        [*kubectl, "patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p", status]
    )
    return ip


def _open_port(kubectl: list[str], scn: Scenario) -> None:
    to_a = {"namespaceSelector": {"matchLabels": {"plasmacloud.io/project-id": "proj-a"}},
            "podSelector": {"matchLabels": {"app": "web"}}}  # fmt: skip
    from_b = {"namespaceSelector": {"matchLabels": {"plasmacloud.io/project-id": "proj-b"}}}
    port = [{"protocol": "TCP", "port": 8080}]
    _apply(kubectl, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                     "metadata": {"name": "web-from-b", "namespace": "tenant-a"},
                     "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"],
                              "ingress": [{"from": [from_b], "ports": port}]}})  # fmt: skip
    _apply(kubectl, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                     "metadata": {"name": "to-a-web", "namespace": "tenant-b"},
                     "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                              "egress": [{"to": [to_a], "ports": port}]}})  # fmt: skip


def _token_matches_bindings(scn: Scenario, kubectl: list[str]) -> None:
    sub = "user-00000000-0000-4000-8000-0000000000aa"
    argv = [sys.executable, "-m", "webhook.main", "mint", "--sub", sub,
            "--email", "member@example.com", "--org", "org-sbx", "--project", "proj-a"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=scn.node.process_env(), timeout=30)
    if proc.returncode:
        raise RuntimeError(f"iam-webhook mint: {proc.stderr.strip()}")
    webhook = WebhookClient.from_kubeconfig(scn.env["WEBHOOK_KUBECONFIG"])  # as kube-apiserver finds it
    status = _review(webhook, proc.stdout.strip(), client_cert=True)
    groups = set(status["user"]["groups"]) if status.get("authenticated") else set()
    bound = {
        rb["metadata"]["name"]: rb["subjects"][0]["name"] for rb in _get(kubectl, "rolebindings", "tenant-a")
    }
    if bound.get("project-admin-binding") not in groups or bound.get("org-admin-binding") in groups:
        raise RuntimeError(f"a member's groups {sorted(groups)}: project-admin, not org-admin, expected "
                           f"(bindings: {bound})")  # fmt: skip
