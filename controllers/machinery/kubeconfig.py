"""An ApiClient from a kubeconfig file or the pod's service account (kubernetes_asyncio.config)."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration


class KubeconfigError(Exception):
    """No usable client configuration."""


async def load_api_client(kubeconfig: Path | None, *, in_cluster: bool) -> ApiClient:
    """`kubeconfig` when given, else the in-cluster config when in a pod, else ~/.kube/config."""
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
    return ApiClient(configuration=cfg)
