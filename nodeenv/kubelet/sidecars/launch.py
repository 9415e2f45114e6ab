"""Starting a stand-in in a sidecar container's place: `python -m <module>` with the container's own
args, each path flag (`--csi-address`, the sidecars' only one) mapped to the node path of the volume
the container mounts there; for the stand-in, where the container's service-account mount and
`/registration` mount are on the node and the pod's name (the container's hostname); the container's
resolved environment (KUBERNETES_SERVICE_HOST/PORT, ...); in the pod's network namespace
(`ip netns exec`, the node's for a host-network pod). Its output goes to `log` (kubelet keeps a
container's log under /var/log/pods)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from nodeenv.kubelet.volumes import Mount

PATH_FLAGS = ("--csi-address",)
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def node_path(mounts: list[Mount], path: str) -> Path:
    """Where a container path is on the node: under the source of the longest mount holding it."""
    p = PurePosixPath(path.removeprefix("unix://"))
    held = [m for m in mounts if p.is_relative_to(m.target)]
    if not held:
        raise ValueError(f"{path} is on no volume the container mounts")
    m = max(held, key=lambda m: len(m.target))
    return m.source / p.relative_to(m.target)


def mapped_args(args: list[str], mounts: list[Mount]) -> list[str]:
    out, it = [], iter(args)
    for arg in it:
        flag, eq, value = arg.partition("=")
        if flag in PATH_FLAGS and not eq:
            value = next(it, "")
        out.append(f"{flag}={node_path(mounts, value)}" if flag in PATH_FLAGS else arg)
    return out


def argv(module: str, container: dict[str, Any], mounts: list[Mount], pod_name: str) -> list[str]:
    extra = [f"--pod-name={pod_name}"] if pod_name else []
    for target, flag in ((SA_MOUNT, "--serviceaccount-dir"), ("/registration", "--registration-dir")):
        if any(m.target == target for m in mounts):
            extra.append(f"{flag}={node_path(mounts, target)}")
    return [sys.executable, "-m", module, *mapped_args(list(container.get("args") or []), mounts), *extra]


def start(
    module: str,
    container: dict[str, Any],
    mounts: list[Mount],
    netns: str | None,
    *,
    env: Mapping[str, str] | None = None,
    pod_name: str = "",
    log: BinaryIO | None = None,
) -> subprocess.Popen[bytes]:
    cmd = argv(module, container, mounts, pod_name)
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    full_env = None if env is None else {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    out = log if log is not None else subprocess.DEVNULL
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=full_env)
