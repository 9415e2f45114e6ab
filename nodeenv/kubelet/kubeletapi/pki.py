"""DEVELOPMENT ONLY: a boot's kubelet PKI, as k3s makes it (its server CA signs each kubelet's
serving certificate, its client CA the API server's kubelet client certificate):

  server-ca.crt                          kube-apiserver's --kubelet-certificate-authority
  kubelet-<node>.crt/.key                each node's serving certificate (SANs: node name, address)
  client-ca.crt                          each kubelet's --client-ca-file
  apiserver-kubelet-client.crt/.key      kube-apiserver's --kubelet-client-certificate/-key
Keys are 0600 (webhook/devcerts.py's write_pair); the CA keys are never written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding

from nodeenv.kubelet.kubeletapi.server import API_SERVER_USER
from webhook.devcerts import issue_ca, issue_leaf, write_pair


@dataclass(frozen=True, slots=True)
class KubeletPki:
    dir: Path

    @property
    def server_ca(self) -> Path:
        return self.dir / "server-ca.crt"

    @property
    def client_ca(self) -> Path:
        return self.dir / "client-ca.crt"

    @property
    def client_cert(self) -> Path:
        return self.dir / "apiserver-kubelet-client.crt"

    @property
    def client_key(self) -> Path:
        return self.dir / "apiserver-kubelet-client.key"

    def serving(self, node: str) -> tuple[Path, Path]:
        return self.dir / f"kubelet-{node}.crt", self.dir / f"kubelet-{node}.key"

    def apiserver_flags(self, netns: str = "") -> list[str]:
        flags = ["--kubelet-client-certificate", str(self.client_cert), "--kubelet-client-key",
                 str(self.client_key), "--kubelet-certificate-authority", str(self.server_ca)]  # fmt: skip
        return flags + (["--kubelet-netns", netns] if netns else [])

    def kubelet_flags(self, node: str) -> list[str]:
        cert, key = self.serving(node)
        return ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
                "--client-ca-file", str(self.client_ca)]  # fmt: skip


def make_kubelet_pki(out: Path, nodes: Sequence[tuple[str, str]], user: str = API_SERVER_USER) -> KubeletPki:
    """`nodes`: (name, address) of each node."""
    out.mkdir(parents=True, exist_ok=True)
    server_ca, client_ca = issue_ca(cn="k8shost kubelet server CA"), issue_ca(cn="k8shost kubelet client CA")
    pki = KubeletPki(out)
    pki.server_ca.write_bytes(server_ca[0].public_bytes(Encoding.PEM))
    pki.client_ca.write_bytes(client_ca[0].public_bytes(Encoding.PEM))
    for name, address in nodes:
        write_pair(out, f"kubelet-{name}", *issue_leaf(server_ca, name, server_names=(name, address)))
    write_pair(out, "apiserver-kubelet-client", *issue_leaf(client_ca, user, client=True))
    return pki
