"""Every name an object refers to exists in the overlay (or is one of the few Secrets/ConfigMaps an admin
creates first, as docs/install-k3s.md says), Services select pods that serve their target ports, and no two
host-network workloads listen on the same node port."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from nodeenv.ovn_pki import MANIFEST_IDENTITIES, secret_name
from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import container_env, containers, ident, objects, pod_spec, workloads

Obj = dict[str, Any]
# Created by the cluster admin before `kubectl apply -k` (docs/install-k3s.md), never shipped.
ADMIN_CREATED = {
    ("Secret", "iam-webhook-tls"),
    ("Secret", "iam-webhook-client-ca"),
    ("ConfigMap", "iam-webhook-keys"),
    *{("Secret", secret_name(i)) for i in MANIFEST_IDENTITIES},  # docs/install-k3s.md
    ("Secret", "plasmacloud-credentials"),  # PlasmaCloud's CA and IAM token (docs/install-k3s.md)
}


def _names(kind: str) -> set[tuple[str, str]]:
    return {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects() if o["kind"] == kind
    }


def _refs(w: Obj) -> list[tuple[str, str]]:
    spec, out = pod_spec(w), []
    if spec.get("serviceAccountName"):
        out.append(("ServiceAccount", spec["serviceAccountName"]))
    for v in spec.get("volumes") or []:
        out += [("ConfigMap", v["configMap"]["name"])] if "configMap" in v else []
        out += [("Secret", v["secret"]["secretName"])] if "secret" in v else []
    for c in containers(w):
        out += [
            ("ConfigMap", s["configMapRef"]["name"]) for s in c.get("envFrom") or [] if "configMapRef" in s
        ]
        for e in c.get("env") or []:
            ref = e.get("valueFrom") or {}
            out += [("ConfigMap", ref["configMapKeyRef"]["name"])] if "configMapKeyRef" in ref else []
            out += [("Secret", ref["secretKeyRef"]["name"])] if "secretKeyRef" in ref else []
    return out


def test_pods_refer_only_to_objects_the_overlay_creates() -> None:
    missing = []
    for w in workloads():
        ns = w["metadata"]["namespace"]
        for kind, name in _refs(w):
            if (ns, name) not in _names(kind) and (kind, name) not in ADMIN_CREATED:
                missing.append(f"{ident(w)} -> {kind} {name}")
    assert missing == []


def test_bindings_name_existing_roles_and_service_accounts() -> None:
    missing = []
    for b in objects():
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref, ns = b["roleRef"], b["metadata"].get("namespace", "")
        if (ns if ref["kind"] == "Role" else "", ref["name"]) not in _names(ref["kind"]):
            missing.append(f"{ident(b)} -> {ref['kind']} {ref['name']}")
        for s in b.get("subjects") or []:
            if s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) not in _names("ServiceAccount"):
                missing.append(f"{ident(b)} -> ServiceAccount {s['namespace']}/{s['name']}")
    assert missing == []


def test_services_select_pods_that_serve_their_target_ports() -> None:
    for svc in (o for o in objects() if o["kind"] == "Service"):
        selector = svc["spec"]["selector"]
        pods = [
            w for w in workloads() if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert pods, f"{ident(svc)} selects no workload"
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            served = {(p.get("name"), p["containerPort"], p.get("protocol", "TCP")) for w in pods
                      for c in containers(w) for p in c.get("ports") or []}  # fmt: skip
            assert any(target in (name, number) and proto == port.get("protocol", "TCP")
                       for name, number, proto in served), f"{ident(svc)} port {port}"  # fmt: skip


def _host_ports(w: Obj) -> set[int]:
    """Ports a host-network pod binds on its node: declared container ports and its programs' listeners."""
    ports: set[int] = set()
    for c in containers(w, init=False):
        ports |= {p["containerPort"] for p in c.get("ports") or []}
        command = c.get("command") or ["/"]
        if command[0] in programs.SCRIPTS:
            settings = programs.parse(command[0], [*command[1:], *(c.get("args") or [])], container_env(w, c))
            health = programs.health(command[0], settings)
            ports |= {health.port} if health else set()
    return ports


def test_host_network_workloads_never_share_a_node_port() -> None:
    owners: dict[int, list[str]] = defaultdict(list)
    for w in workloads():
        if pod_spec(w).get("hostNetwork"):
            for port in _host_ports(w):
                owners[port].append(ident(w))
    assert {p: o for p, o in owners.items() if len(o) > 1} == {}


def _lease_requests(user: str, namespace: str, name: str) -> list[Any]:
    """What the machinery's LeaderElector sends: create the Lease, then get and update it by name."""
    from nodeenv.kubeapi.auth import RequestRecord

    def req(verb: str, lease: str) -> RequestRecord:
        return RequestRecord(user=user, verb=verb, group="coordination.k8s.io", version="v1",
                             resource="leases", subresource="", namespace=namespace, name=lease,
                             status=200, path="/")  # fmt: skip

    return [req("create", ""), req("get", name), req("update", name)]


def test_replicated_controllers_elect_a_leader_on_a_lease_their_rbac_allows() -> None:
    from tests.rbac_coverage import check_requests

    checked = 0
    for w in workloads():
        for c in containers(w, init=False):
            program = (c.get("command") or ["/"])[0]
            if program not in programs.SCRIPTS or not hasattr(programs.module_of(program), "app"):
                continue
            s = programs.parse(program, c.get("args") or [], container_env(w, c))
            if w["spec"].get("replicas", 1) > 1:
                assert s.leader_elect, f"{ident(w)}: {w['spec']['replicas']} replicas without leader election"
            user = f"system:serviceaccount:{w['metadata']['namespace']}:{pod_spec(w)['serviceAccountName']}"
            refused = check_requests(user, _lease_requests(user, s.lease.namespace, s.lease.name))
            assert refused == [], f"{ident(w)}: the Lease {s.lease.namespace}/{s.lease.name}"
            checked += 1
    assert checked >= 4
