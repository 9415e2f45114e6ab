"""An ApiClient from a kubeconfig file or the pod's service account (kubernetes_asyncio.config),
naming its program in the User-Agent header as client-go does, so the API server's audit log tells
the controllers apart."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration


class KubeconfigError(Exception):
    """No usable client configuration."""


ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def user_agent(program: str) -> str:
    """client-go's form, `<command>/<version> (<os>/<arch>) kubernetes/<commit>`, with ours."""
    try:
        ours = version("k8shost")
    except PackageNotFoundError:
        ours = "0.0.0"
    machine = platform.machine()
    return f"{program}/v{ours} ({platform.system().lower()}/{ARCH.get(machine, machine)}) k8shost"


async def load_api_client(kubeconfig: Path | None, *, in_cluster: bool, program: str = "") -> ApiClient:
    """`kubeconfig` when given, else the in-cluster config when in a pod, else ~/.kube/config;
    `program` names us in the User-Agent (the client library's own when empty)."""
    cfg = Configuration()
    try:
        if kubeconfig is None and in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            path = str(kubeconfig) if kubeconfig is not None else None
            await config.load_kube_config(config_file=path, client_configuration=cfg)
    except (config.ConfigException, OSError, ValueError) as e:
        where = kubeconfig or ("the in-cluster service account" if in_cluster else "~/.kube/config")
        raise KubeconfigError(f"cannot load client configuration from {where}: {e}") from e
    api = ApiClient(configuration=cfg)
    if program:
        api.user_agent = user_agent(program)
    return api
