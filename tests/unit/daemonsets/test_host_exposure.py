"""What the platform's pods expose of the node: an API token only where the pod calls the API, no
host PID namespace, and no listener on every interface of a host-network pod (a metrics endpoint
such as prismnet_ipam_subnet_addresses lists every subnet): such pods bind the node's address (status.podIP
of a host-network pod) or loopback, which still lets Prometheus scrape the node's address."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.daemonsets.rendered import containers, ident, pod_spec, workloads

Obj = dict[str, Any]
NO_API = {
    "DaemonSet/kube-system/ovs-node": "OVS and ovn-controller",
    "StatefulSet/kube-system/ovn-central": "the OVN databases and northd",
    "DaemonSet/kube-system/iam-webhook": "answers TokenReviews, never calls the API",
    "DaemonSet/kube-system/lightningstor-csi-node": "node plugin + registrar: kubelet's socket",
}
"""Workloads that never call the Kubernetes API, and why: no token is mounted into them."""
TOKEN_IN = {"DaemonSet/kube-system/prismnet-agent": "prismnet-agent"}
"""Workloads whose pod opts out of the token but project it into one container: the CNI agent writes
PolicyDenied Events, its installer never calls the API."""
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
ANY_ADDRESS = re.compile(r"(^|[^\d.])(0\.0\.0\.0|\[::\]|::)(:\d+)?$|^:\d+$")


def _by_ident() -> dict[str, Obj]:
    return {ident(w): w for w in workloads()}


@pytest.mark.parametrize("name", sorted(NO_API))
def test_pods_that_never_call_the_api_mount_no_token(name: str) -> None:
    assert pod_spec(_by_ident()[name]).get("automountServiceAccountToken") is False, NO_API[name]


def test_pods_that_call_the_api_keep_their_token() -> None:
    for name, w in _by_ident().items():
        if name not in NO_API and name not in TOKEN_IN:
            assert pod_spec(w).get("automountServiceAccountToken") is not False, name


def token_containers(w: Obj) -> set[str]:
    """Containers with a projected serviceAccountToken mounted at the service-account path."""
    sources = {
        v["name"]: (v.get("projected") or {}).get("sources") or [] for v in pod_spec(w).get("volumes") or []
    }
    vols = {name for name, srcs in sources.items() if any("serviceAccountToken" in s for s in srcs)}
    return {c["name"] for c in containers(w) for m in c.get("volumeMounts") or []
            if m["name"] in vols and m["mountPath"] == SA_MOUNT}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TOKEN_IN))
def test_the_token_is_projected_into_the_one_container_that_calls_the_api(name: str) -> None:
    w = _by_ident()[name]
    assert pod_spec(w).get("automountServiceAccountToken") is False, name
    assert pod_spec(w).get("serviceAccountName") not in (None, "default"), f"{name}: an account of its own"
    assert token_containers(w) == {TOKEN_IN[name]}


def test_no_pod_shares_the_hosts_pid_namespace() -> None:
    assert [ident(w) for w in workloads() if pod_spec(w).get("hostPID")] == []


def _listen_values(c: Obj) -> list[str]:
    args = [a.split("=", 1)[1] for a in c.get("args") or [] if "address=" in a or "host=" in a]
    env = [str(e.get("value", "")) for e in c.get("env") or [] if re.search(r"ADDRESS|HOST$", e["name"])]
    return args + env


def test_host_network_pods_listen_on_no_wildcard_address() -> None:
    found = [
        (ident(w), c["name"], v)
        for w in workloads()
        if pod_spec(w).get("hostNetwork")
        for c in containers(w)
        for v in _listen_values(c)
        if ANY_ADDRESS.search(v)
    ]
    assert found == []


def test_the_metrics_of_host_network_pods_bind_the_nodes_address() -> None:
    for w in workloads():
        if not pod_spec(w).get("hostNetwork"):
            continue
        for c in containers(w, init=False):
            for v in _listen_values(c):
                if "$(POD_IP)" in v:
                    refs = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                            for e in c.get("env") or []}  # fmt: skip
                    assert refs.get("POD_IP") == "status.podIP", (ident(w), c["name"])
                    names = [e["name"] for e in c.get("env") or []]
                    users = [e["name"] for e in c.get("env") or [] if "$(POD_IP)" in str(e.get("value", ""))]
                    assert all(
                        names.index("POD_IP") < names.index(u) for u in users
                    )  # kubelet expands in order


def test_the_wildcard_check_sees_a_wildcard() -> None:
    values = ("0.0.0.0:9465", ":8080", "[::]:53", "127.0.0.1:9", "$(POD_IP):9")
    assert [v for v in values if ANY_ADDRESS.search(v)] == ["0.0.0.0:9465", ":8080", "[::]:53"]
