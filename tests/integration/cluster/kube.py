"""What users and kube-controller-manager write into the cluster's API double (Namespaces, Pods,
Services, EndpointSlices, NetworkPolicies), through the admin kubeconfig on loopback; everything
created is deleted again at the end, newest first. And what the controllers make of it: a
Service's external IPs, the central NB's rows (`nbctl`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from nodeenv.cluster.cluster import Cluster
from nodeenv.kubelet.apiclient import KubeClient, Obj
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod

T = TypeVar("T")
KINDS = {
    "Namespace": ("/api/v1", "namespaces"),
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "EndpointSlice": ("/apis/discovery.k8s.io/v1", "endpointslices"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "Node": ("/api/v1", "nodes"),
    "AdminNetworkPolicy": ("/apis/policy.networking.k8s.io/v1alpha1", "adminnetworkpolicies"),
    "BaselineAdminNetworkPolicy": ("/apis/policy.networking.k8s.io/v1alpha1", "baselineadminnetworkpolicies"),
}


class Api:
    def __init__(self, cluster: Cluster) -> None:
        self.client = KubeClient.from_kubeconfig(Path(read_env_file(cluster.env_file)["KUBECONFIG"]))
        self.made: list[tuple[str, str, str]] = []

    def create(self, obj: Obj) -> Obj:
        base, plural = KINDS[obj["kind"]]
        ns = obj["metadata"].get("namespace", "")
        if ns:
            out = self.client.create(base, plural, ns, obj)
        else:
            out = self.client.request("POST", f"{base}/{plural}", obj)
        self.made.append((obj["kind"], ns, obj["metadata"]["name"]))
        return out

    def get(self, kind: str, ns: str, name: str) -> Obj | None:
        base, plural = KINDS[kind]
        return self.client.get(base, plural, ns, name)

    def delete(self, kind: str, ns: str, name: str) -> None:
        base, plural = KINDS[kind]
        if ns:
            self.client.delete(base, plural, ns, name)
        else:
            self.client.request("DELETE", f"{base}/{plural}/{name}")
        self.made = [m for m in self.made if m != (kind, ns, name)]

    def delete_all(self) -> None:
        for kind, ns, name in reversed(list(self.made)):
            self.delete(kind, ns, name)


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def pod_object(pod: Pod, labels: dict[str, str]) -> Obj:
    """The Pod as kubelet's API has it for a pod the test ADDed on `pod.node`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": labels},
        "spec": {"nodeName": pod.node.name, "containers": [{"name": "c", "image": "busybox"}]},
    }


def service(name: str, ns: str, ports: list[dict[str, Any]], type_: str = "LoadBalancer") -> Obj:
    spec = {"type": type_, "selector": {"app": name}, "ports": ports}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def endpoint_slice(service_name: str, ns: str, ips: Iterable[str], ports: list[dict[str, Any]]) -> Obj:
    """What the EndpointSlice controller writes for the Service's ready pods."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service_name}-a", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        "ports": ports,
    }  # fmt: skip


def eventually(
    fn: Callable[[], T], done: Callable[[T], bool], timeout: float = 15.0, every: float = 0.2
) -> T:
    """fn() until done(result) or the timeout; the last result (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(every)


def ingress(svc: Obj | None) -> list[str]:
    """The external IPs fiberlb-controller wrote into the Service's status."""
    status = (svc or {}).get("status") or {}
    return [i["ip"] for i in (status.get("loadBalancer") or {}).get("ingress") or []]


def nbctl(cluster: Cluster, *args: str) -> str:
    """ovn-nbctl on the central NB (from this namespace: the members' unix sockets)."""
    db = read_env_file(cluster.env_file)["OVN_NB_DB"]
    out = subprocess.run(["ovn-nbctl", f"--db={db}", "--timeout=20", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout
