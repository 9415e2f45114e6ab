"""Every controller names itself in its User-Agent as client-go does (`<program>/v<version> (<os>/<arch>)
...`), so the API server's audit log tells the controllers (and, by source IP, their replicas) apart."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from controllers.machinery.kubeconfig import load_api_client, user_agent

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_form_is_client_gos() -> None:
    assert re.fullmatch(
        r"netpol-controller/v\d+\.\d+\.\d+\S* \(linux/\w+\) k8shost", user_agent("netpol-controller")
    )


def test_the_client_sends_it(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)

    async def agents() -> tuple[str, str]:
        named = await load_api_client(path, in_cluster=False, program="node-controller")
        plain = await load_api_client(path, in_cluster=False)
        async with named, plain:
            return named.user_agent, plain.user_agent

    named, plain = asyncio.run(agents())
    assert named == user_agent("node-controller")
    assert plain.startswith("OpenAPI-Generator/"), "without a program: the library's own"
