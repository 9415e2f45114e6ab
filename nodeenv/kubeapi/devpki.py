"""DEVELOPMENT ONLY: the double's serving certificate (from the repo's dev CA code in
webhook/devcerts.py) and token kubeconfigs for kubectl and kubernetes_asyncio.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.secretfile import write_secret
from webhook.devcerts import issue_ca, issue_leaf, write_pair


@dataclass(frozen=True, slots=True)
class ServingPki:
    ca: Path
    cert: Path
    key: Path


def gen_serving_pki(out: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> ServingPki:
    out.mkdir(parents=True, exist_ok=True)
    ca = issue_ca(cn="k8shost kubeapi dev CA")
    ca_crt, _ = write_pair(out, "ca", *ca)
    crt, key = write_pair(
        out, "apiserver", *issue_leaf(ca, "kube-apiserver", server_names=(*names, "kubernetes"))
    )
    return ServingPki(ca=ca_crt, cert=crt, key=key)


def kept_serving_pki(out: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> ServingPki:
    """The PKI already in `out` (a restart keeps its CA, so clients' kubeconfigs stay valid, as
    k3s keeps its server CA on disk), else a new one."""
    kept = ServingPki(ca=out / "ca.crt", cert=out / "apiserver.crt", key=out / "apiserver.key")
    if all(p.exists() for p in (kept.ca, kept.cert, kept.key)):
        return kept
    return gen_serving_pki(out, names)


def token_kubeconfig(server: str, ca: Path, username: str, token: str, namespace: str = "default") -> str:
    """Values are JSON strings, which YAML reads as double-quoted scalars whatever they contain."""

    def q(value: object) -> str:
        return json.dumps(str(value))

    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: kubeapi\n"
        "  cluster:\n"
        f"    server: {q(server)}\n"
        f"    certificate-authority: {q(ca)}\n"
        "users:\n"
        f"- name: {q(username)}\n"
        "  user:\n"
        f"    token: {q(token)}\n"
        "contexts:\n"
        "- name: kubeapi\n"
        "  context:\n"
        "    cluster: kubeapi\n"
        f"    user: {q(username)}\n"
        f"    namespace: {q(namespace)}\n"
        "current-context: kubeapi\n"
    )


def write_kubeconfig(path: Path, server: str, ca: Path, username: str, token: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_secret(path, token_kubeconfig(server, ca, username, token).encode())  # 0600 from creation
