"""The Kubernetes API as the runner reaches it: JSON over HTTPS, the server, CA and bearer token read
from a kubeconfig (the kind the API double and k3s write). Thin: dicts in, dicts out, one error type
carrying the Status the server sent."""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

Obj = dict[str, Any]


class ApiError(RuntimeError):
    def __init__(self, code: int, status: Obj) -> None:
        super().__init__(f"{code} {status.get('reason', '')}: {status.get('message', '')}")
        self.code, self.status = code, status


@dataclass(frozen=True)
class KubeClient:
    server: str
    token: str
    ca_file: Path

    @classmethod
    def from_kubeconfig(cls, path: Path) -> KubeClient:
        conf = yaml.safe_load(path.read_text())
        ctx_name = conf["current-context"]
        ctx = next(c["context"] for c in conf["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in conf["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in conf["users"] if u["name"] == ctx["user"])
        return cls(cluster["server"], user["token"], Path(cluster["certificate-authority"]))

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self, method: str, path: str, body: Obj | None = None, ctype: str = "application/json"
    ) -> Obj:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=30) as resp:
                result: Obj = json.loads(resp.read())
                return result
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"message": raw.decode(errors="replace")}
            raise ApiError(e.code, status) from None

    def list(self, base: str, plural: str, namespace: str = "", selector: str = "") -> list[Obj]:
        ns = f"/namespaces/{namespace}" if namespace else ""
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        items: list[Obj] = self.request("GET", f"{base}{ns}/{plural}{query}")["items"]
        return items

    def get(self, base: str, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return self.request("GET", f"{base}/namespaces/{namespace}/{plural}/{name}")
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def create(self, base: str, plural: str, namespace: str, obj: Obj) -> Obj:
        return self.request("POST", f"{base}/namespaces/{namespace}/{plural}", obj)

    def patch_status(self, base: str, plural: str, namespace: str, name: str, status: Obj) -> Obj:
        path = f"{base}/namespaces/{namespace}/{plural}/{name}/status"
        return self.request("PATCH", path, {"status": status}, "application/merge-patch+json")

    def delete(self, base: str, plural: str, namespace: str, name: str) -> None:
        try:
            self.request("DELETE", f"{base}/namespaces/{namespace}/{plural}/{name}")
        except ApiError as e:
            if e.code != 404:
                raise


def machine_capacity() -> dict[str, str]:
    """The Node's capacity as kubelet reports it: this machine's CPUs and memory, 110 pods (nodes
    sharing one machine each report all of it)."""
    meminfo = Path("/proc/meminfo").read_text().split("\n")
    kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{kib}Ki", "pods": "110"}


def register_node(
    client: KubeClient, name: str, address: str, labels: Mapping[str, str], kubelet_port: int = 0
) -> None:
    """What kubelet does at start: the Node object (if missing), then its status: Ready, with its
    InternalIP and Hostname addresses, capacity and allocatable, and its kubelet API's port
    (daemonEndpoints) if it serves one."""
    try:
        client.request("GET", f"/api/v1/nodes/{name}")
    except ApiError as e:
        if e.code != 404:
            raise
        meta = {
            "name": name,
            "labels": {**labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        }
        client.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta})
    status: dict[str, object] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                              "message": "kubelet is posting ready status"}],
              "capacity": machine_capacity(), "allocatable": machine_capacity(),
              "addresses": [{"type": "InternalIP", "address": address},
                            {"type": "Hostname", "address": name}]}  # fmt: skip
    if kubelet_port:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    client.request(
        "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, "application/merge-patch+json"
    )
